// A Python runtime that cannot start a wwref worker is a set-up problem, said in one line with exit 2:
// an interpreter that exits at once, one that prints something else than the protocol, and a system
// Python without the pinned packages (real processes, through the command line).
import { execa } from 'execa';
import { spawnSync } from 'node:child_process';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { howItEnded, runPython } from '../../pipelines/execution/launcher.ts';
import { currentSettings, useTempWorkspace, type Workspace } from '../support/workspace.ts';

let ws: Workspace;
beforeAll(() => {
  ws = useTempWorkspace();
});
afterAll(() => ws.dispose());

async function prepareWith(python: string) {
  const result = await execa('node', [join(ROOT, 'bin', 'wwref.mjs'), 'prepare', '--source', 'nile'], {
    cwd: ws.root,
    env: { WWREF_PYTHON: python },
    reject: false,
    timeout: 60_000,
  });
  expect(result.timedOut).toBe(false);
  expect(result.exitCode, String(result.stderr)).toBe(2);
  expect(String(result.stderr)).not.toMatch(/internal error|\n\s+at /);
  const lines = String(result.stderr)
    .split('\n')
    .filter((l) => l.startsWith('wwref:'));
  expect(lines).toHaveLength(1);
  return lines[0]!;
}

describe('a Python runtime that cannot start a worker', () => {
  it('an interpreter that exits at once', async () => {
    expect(await prepareWith('/bin/false')).toMatch(
      /the Python runtime \/bin\/false did not start a wwref worker: worker process exited; check WWREF_PYTHON/,
    );
  });

  it('an interpreter that answers with something else', async () => {
    const fake = join(ws.root, 'chatty-python');
    writeFileSync(fake, '#!/bin/sh\necho "Python 2.7, hello"\nsleep 5\n');
    chmodSync(fake, 0o755);
    expect(await prepareWith(fake)).toMatch(/did not start a wwref worker: worker sent an invalid protocol line: Python 2\.7, hello/);
  });

  it.skipIf(spawnSync('python3', ['--version']).status !== 0)('a Python without the pinned packages, naming what is missing', async () => {
    const bare = join(ws.root, 'bare-python');
    // the system's python3 with the standard library only (-S: no site-packages)
    writeFileSync(bare, '#!/bin/sh\nexec python3 -S "$@"\n');
    chmodSync(bare, 0o755);
    expect(await prepareWith(bare)).toMatch(
      /did not start a wwref worker: worker process exited \(its last words: ModuleNotFoundError: No module named '(?!workflows)/,
    );
  });
});

describe('how a failed Python process ended, in one line', () => {
  it('an answer over the size read, a signal, an exit status: never "exit status undefined"', () => {
    const settings = currentSettings();
    const big = runPython(settings, ['-c', 'import sys; sys.stdout.write("x" * 100000)'], { reject: false, maxBuffer: 1000 });
    expect(howItEnded(big)).toBe('its answer was larger than wwref reads (it was stopped)');
    const killed = runPython(settings, ['-c', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'], { reject: false });
    expect(howItEnded(killed)).toBe('it was ended by SIGKILL');
    const status = runPython(settings, ['-c', 'import sys; sys.exit(3)'], { reject: false });
    expect(howItEnded(status)).toBe('exit status 3');
    const said = runPython(settings, ['-c', 'import sys; sys.exit("the file is too large")'], { reject: false });
    expect(howItEnded(said)).toBe('the file is too large');
  });
});
