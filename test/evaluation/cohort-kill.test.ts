// A cohort run killed with SIGKILL (no cleanup runs) leaves its agent running; the same command,
// resuming, stops it before starting the episode again. Real processes and files.
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { BIN, cliProcess } from '../support/cli.ts';
import { runningPid } from '../support/processes.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-cohort-kill-'));
const left: number[] = [];
afterAll(() => {
  for (const pid of left)
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  rmSync(dir, { recursive: true, force: true });
});

it('a resumed run stops the agent that a killed run left running', async () => {
  // the agent records its pid, then hangs (the first time) or exits at once (once `quick` exists)
  const agent = join(dir, 'agent.sh');
  writeFileSync(agent, `#!/bin/sh\necho $$ >> ${dir}/pids\n[ -e ${dir}/quick ] && exit 0\nexec sleep 1000\n`);
  chmodSync(agent, 0o755);
  const args = ['cohort', 'run', '--agent', agent, '--out', join(dir, 'c'), '--condition', 'wine', '--budget', '4'];
  const run = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, stdio: 'ignore' });
  const pids = join(dir, 'pids');
  for (let k = 0; k < 600 && !existsSync(pids); k++) await new Promise((r) => setTimeout(r, 100));
  const [pid] = readFileSync(pids, 'utf8').split('\n').map(Number);
  left.push(pid!);
  run.kill('SIGKILL');
  await new Promise((r) => run.once('exit', r));
  expect(runningPid(pid!)).toBe(true);
  writeFileSync(join(dir, 'quick'), '');
  const resumed = await cliProcess(args, ROOT);
  expect(resumed.code, resumed.stderr).toBe(1); // the agent exits without submitting: nothing delivered
  expect(runningPid(pid!)).toBe(false);
}, 120_000);
