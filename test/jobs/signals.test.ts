// Ctrl-C and SIGTERM of a running job (pipelines/jobs/job.ts): the job loop cancels the executor, every
// worker process it started is gone, the job's own cleanup runs and the command exits with 128 + the
// signal's number. add-source, whose undo a signal used to skip, leaves no source manifest, prepared
// input, staging folder or frozen plan behind, so the source id is not blocked afterwards.
import { execa } from 'execa';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { slowRecords } from '../support/doubles.ts';
import { tinyCameraPlan } from '../support/fixtures.ts';
import { alive, descendants } from '../support/processes.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';

const BIN = join(ROOT, 'bin', 'wwref.mjs');

let ws: Workspace;
beforeAll(() => {
  ws = useTempWorkspace();
  mkdirSync(join(ws.root, 'plans'), { recursive: true });
});
afterAll(() => ws.dispose());

async function until(condition: () => boolean, seconds = 120): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for the command to get going');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const journalLines = (condition: string) => {
  const file = join(ws.cache, 'journal', `${condition}.jsonl`);
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0;
};

describe('a signal stops a job and everything it started', () => {
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`add-source under ${signal}: exit ${code}, no worker left, nothing of the source left behind`, async () => {
      const source = `tiny_${signal.toLowerCase()}`;
      const planFile = join(ws.root, 'plans', `${source}.plan.json`);
      writeFileSync(planFile, JSON.stringify(tinyCameraPlan(source)));
      const child = execa('node', [BIN, 'add-source', planFile, '--workers', '1'], { cwd: ws.root, env: slowRecords(0.5), reject: false });
      await until(() => journalLines(source) >= 2);
      const started = descendants(child.pid!);
      expect(started.length, 'the command runs worker processes').toBeGreaterThan(0);
      child.kill(signal);
      const result = await child;
      expect(result.exitCode, String(result.stderr)).toBe(code);
      expect(String(result.stderr)).toMatch(new RegExp(`wwref: ${signal === 'SIGINT' ? 'interrupted' : 'stopped by SIGTERM'}: `));
      expect(String(result.stderr)).not.toMatch(/internal error|\n\s+at /);
      expect(
        started.filter(alive).map((p) => p.command),
        'processes the command started',
      ).toEqual([]);
      expect(existsSync(join(ws.manifests, `${source}.json`)), 'source manifest').toBe(false);
      expect(existsSync(join(ws.prepared, source)), 'prepared input').toBe(false);
      expect(
        readdirSync(join(ws.cache, 'add-source')).filter((name) => name.startsWith(source)),
        'staging and frozen plan',
      ).toEqual([]);
      // the source id is free: the dry run accepts the plan again
      const again = await execa('node', [BIN, 'add-source', planFile, '--dry-run'], { cwd: ws.root, reject: false });
      expect(again.exitCode, String(again.stderr)).toBe(0);
    });
  }
});
