// The pinned Python runtime on first use (pipelines/core/runtime.ts): an existing runtime is used as it
// is, without running the set-up; an interpreter named by WWREF_PYTHON that does not exist is a one-line
// user error, never created. (Creating .venv itself takes minutes and the network: it is what the test
// run's globalSetup, test/setup/runtime.ts, and .ci/run on a fresh clone exercise.)
import { execaSync } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { UserError } from '../../pipelines/core/errors.ts';
import { pythonExecutable } from '../../pipelines/core/paths.ts';
import { ensurePythonRuntime } from '../../pipelines/core/runtime.ts';

const saved = process.env.WWREF_PYTHON;
afterEach(() => {
  if (saved === undefined) delete process.env.WWREF_PYTHON;
  else process.env.WWREF_PYTHON = saved;
});

describe('ensurePythonRuntime', () => {
  it('returns the existing pinned interpreter without a set-up line, and it runs CPython 3.12 or 3.13', () => {
    const lines: string[] = [];
    const python = ensurePythonRuntime((line) => lines.push(line));
    expect(python).toBe(pythonExecutable());
    expect(lines).toEqual([]);
    const version = execaSync(python, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])']).stdout.trim();
    expect(['3.12', '3.13']).toContain(version);
  });

  it('an interpreter named by WWREF_PYTHON that does not exist is refused, not created', () => {
    process.env.WWREF_PYTHON = '/nonexistent/wwref/python';
    const lines: string[] = [];
    expect(() => ensurePythonRuntime((line) => lines.push(line))).toThrow(UserError);
    expect(() => ensurePythonRuntime()).toThrow(/WWREF_PYTHON names \/nonexistent\/wwref\/python, which does not exist/);
    expect(lines).toEqual([]);
  });
});
