// The local executor (a pool of Python processes on this machine) keeps the executor contract, and
// gives each isolation key fresh worker processes (forked from its template).
import { loadCatalog } from '../../pipelines/references/store.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalExecutor } from '../../pipelines/execution/local/local-executor.ts';
import { prepareSources, readManifest } from '../../pipelines/sources/prepare.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { executorContract } from './executor-contract.ts';
import { RecordTimeout, WorkerCrash } from '../../pipelines/execution/executor.ts';
import { exitOnMask, slowRecords } from '../support/doubles.ts';
import { currentSettings } from '../support/workspace.ts';

let ws: Workspace;
beforeAll(async () => {
  ws = useTempWorkspace();
  const [outcome] = await prepareSources([loadCatalog(currentSettings()).source('nile')], {
    settings: currentSettings(),
    workers: 1,
    online: false,
  });
  expect(outcome!.ok).toBe(true);
});
afterAll(() => ws.dispose());

describe('local executor', () => {
  executorContract(
    (options) => new LocalExecutor(options),
    () => ({ source: 'nile', files: readManifest(currentSettings().paths, 'nile').prepared_files }),
  );

  it('runs requests of another isolation key in a fresh worker process, and those of the same key in one', async () => {
    const executor = new LocalExecutor({ settings: currentSettings(), workers: 1 });
    try {
      const run = (mask: string, isolation: string) =>
        executor.run(
          {
            family: 'forecasting',
            input: { source: 'nile', files: readManifest(currentSettings().paths, 'nile').prepared_files },
            mask,
            isolation,
          },
          { timeoutSeconds: 60 },
        );
      await run('0000', 'a');
      const afterA = (await executor.describe()).length;
      await run('0001', 'a');
      expect((await executor.describe()).length).toBe(afterA);
      await run('0000', 'b');
      const hellos = await executor.describe();
      expect(hellos.length).toBe(afterA + 1);
      expect(new Set(hellos.map((h) => h.pid)).size).toBe(hellos.length);
    } finally {
      await executor.close();
    }
  });

  // Requests of one isolation key are sent to their busy worker ahead of time (pipelined): these show
  // that a request waiting there is timed from when it begins, and runs on a fresh worker when the
  // one it waited in is lost before it began.
  const nile = (mask: string) => ({
    family: 'forecasting' as const,
    input: { source: 'nile', files: readManifest(currentSettings().paths, 'nile').prepared_files },
    mask,
    isolation: 'k',
  });

  it('times a request waiting behind another from when it begins, not from when it was sent', async () => {
    const executor = new LocalExecutor({ settings: currentSettings(), workers: 1, env: slowRecords(1.5) });
    try {
      await executor.describe();
      // each record takes 1.5 s: the second one's 2.5 s would be over if it ran from when it was sent (about 3 s)
      const [first, second] = await Promise.allSettled([
        executor.run(nile('0000'), { timeoutSeconds: 30 }),
        executor.run(nile('0001'), { timeoutSeconds: 2.5 }),
      ]);
      expect(first.status).toBe('fulfilled');
      expect(second.status, String((second as PromiseRejectedResult).reason)).toBe('fulfilled');
      expect((await executor.describe()).length).toBe(1); // one worker ran both
    } finally {
      await executor.close();
    }
  });

  it('runs a request that waited behind a timed-out or crashed record on a fresh worker, in order', async () => {
    const slow = new LocalExecutor({ settings: currentSettings(), workers: 1, env: slowRecords(3) });
    try {
      const results = await Promise.allSettled([
        slow.run(nile('0000'), { timeoutSeconds: 1 }),
        slow.run(nile('0001'), { timeoutSeconds: 30 }),
      ]);
      expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(RecordTimeout);
      expect(results[1]!.status).toBe('fulfilled');
      const pids = (await slow.describe()).map((h) => h.pid);
      expect(new Set(pids).size).toBe(2); // the second record ran on a fresh worker
    } finally {
      await slow.close();
    }
    const crashing = new LocalExecutor({ settings: currentSettings(), workers: 1, env: exitOnMask('0011') });
    try {
      // several tasks in one worker: when 0011 crashes it, 0010 and 0001 wait there (sent ahead)
      // and go back to the queue in their order, for a fresh worker
      const masks = ['0000', '0011', '0010', '0001'];
      const settled: string[] = [];
      const results = await Promise.allSettled(
        masks.map((mask) => crashing.run(nile(mask), { timeoutSeconds: 60 }).finally(() => settled.push(mask))),
      );
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(WorkerCrash);
      expect(settled).toEqual(masks);
      const pids = (await crashing.describe()).map((h) => h.pid);
      expect(new Set(pids).size).toBe(2); // 0010 and 0001 ran on one fresh worker
    } finally {
      await crashing.close();
    }
  });

  it("forks the next isolation key's worker while the current key's records run, reads its truth there ahead, and uses it", async () => {
    const executor = new LocalExecutor({ settings: currentSettings(), workers: 1, env: slowRecords(0.5) });
    try {
      const run = (mask: string, isolation: string) => executor.run({ ...nile(mask), isolation }, { timeoutSeconds: 30 });
      const order: string[] = [];
      const a = ['0000', '0001', '0010'].map((mask) => run(mask, 'a').then(() => order.push(`a ${mask}`)));
      // b's truth may run ahead (it reads the input, computes no record); b's record waits its turn
      const truth = executor
        .truth({ family: 'forecasting', input: nile('0000').input, isolation: 'b' }, { timeoutSeconds: 30 })
        .then(() => order.push('b truth'));
      const b = run('0000', 'b').then(() => order.push('b 0000'));
      await a[0];
      // a's other records still run: b's worker is already forked and admitted
      expect((await executor.describe()).length).toBe(2);
      await Promise.all([...a, truth, b]);
      expect((await executor.describe()).length).toBe(2); // b ran on it: no other fork
      expect(order.indexOf('b truth')).toBeLessThan(order.indexOf('a 0010'));
      expect(order.at(-1)).toBe('b 0000');
    } finally {
      await executor.close();
    }
  });

  it("ends a key's worker once another key's task has begun and nothing of its own is queued, before close", async () => {
    const executor = new LocalExecutor({ settings: currentSettings(), workers: 1, env: slowRecords(0.3) });
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      const run = (mask: string, isolation: string) => executor.run({ ...nile(mask), isolation }, { timeoutSeconds: 30 });
      const until = async (condition: () => boolean) => {
        for (let waited = 0; !condition() && waited < 100; waited++) await new Promise((r) => setTimeout(r, 20));
        return condition();
      };
      const [a, b] = [['0000', '0001'].map((mask) => run(mask, 'a')), ['0000', '0001'].map((mask) => run(mask, 'b'))];
      const c = run('0000', 'c');
      await Promise.all(a);
      await b[0];
      // a's and b's workers (forked side by side: their hellos in either order). b's first record has
      // run on b's: a's, with nothing queued, is ended; b's lives on (its second record is to come)
      const first = (await executor.describe()).slice(0, 2).map((h) => h.pid);
      expect(await until(() => first.filter(alive).length === 1)).toBe(true);
      const bPid = first.find(alive)!;
      await Promise.all(b);
      await c;
      expect(await until(() => !alive(bPid))).toBe(true); // c's task began; nothing of b was queued
      // a key may come back later: a fresh worker serves it
      await run('0010', 'b');
      const pids = (await executor.describe()).map((h) => h.pid);
      expect(new Set(pids).size).toBe(pids.length);
      expect(pids.at(-1)).not.toBe(bPid);
    } finally {
      await executor.close();
    }
  });
});
