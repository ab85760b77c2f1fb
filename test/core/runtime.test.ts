// The pinned Python runtime on first use (pipelines/core/runtime.ts): an existing runtime is used as it
// is, without running the set-up; an interpreter named by WWREF_PYTHON that does not exist is a one-line
// user error, never created. (Creating .venv itself takes minutes and the network: it is what the test
// run's globalSetup, test/setup/runtime.ts, and .ci/run on a fresh clone exercise.)
import { execaSync } from 'execa';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UserError } from '../../pipelines/core/errors.ts';
import { ensurePythonRuntime } from '../../pipelines/core/runtime.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { currentSettings } from '../support/workspace.ts';

describe('ensurePythonRuntime', () => {
  it('returns the existing pinned interpreter without a set-up line, and it runs CPython 3.12 or 3.13', () => {
    const lines: string[] = [];
    const settings = currentSettings();
    const python = ensurePythonRuntime(settings, (line) => lines.push(line));
    expect(python).toBe(settings.python.executable);
    if (!settings.python.explicit) expect(python).toBe(join(settings.runtime.venv, 'bin', 'python'));
    expect(lines).toEqual([]);
    const version = execaSync(python, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])']).stdout.trim();
    expect(['3.12', '3.13']).toContain(version);
  });

  it('an interpreter named by WWREF_PYTHON that does not exist is refused, not created', () => {
    const settings = loadSettings({}, { ...process.env, WWREF_PYTHON: '/nonexistent/wwref/python' });
    const lines: string[] = [];
    expect(() => ensurePythonRuntime(settings, (line) => lines.push(line))).toThrow(UserError);
    expect(() => ensurePythonRuntime(settings)).toThrow(/WWREF_PYTHON names \/nonexistent\/wwref\/python, which does not exist/);
    expect(lines).toEqual([]);
  });
});
