// The Dask executor on real local clusters (a `dask scheduler` and `dask worker` processes on
// 127.0.0.1, started and stopped here): the executor contract, tables identical to the local pool's,
// a worker killed mid-run losing nothing, a worker of another runtime or with Dask's own hash seed
// refused, a lost scheduler stopping the job with its journal kept for the resume.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { readReferenceManifest, readReferenceTable } from '../support/raw-references.ts';
import { execa, execaSync } from 'execa';
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { startScheduler, startWorkers, workerEnvironment, type LocalScheduler } from '../../pipelines/execution/dask/cluster.ts';
import { ensurePythonRuntime } from '../../pipelines/core/runtime.ts';
import { DaskExecutor } from '../../pipelines/execution/dask/dask-executor.ts';
import { ExecutorLost } from '../../pipelines/execution/executor.ts';
import { openExecutor } from '../../pipelines/execution/executors.ts';
import { rebuild } from '../../pipelines/jobs/rebuild.ts';
import { replay, replayTargets, storedFromReference } from '../../pipelines/jobs/replay.ts';

import { readManifest } from '../../pipelines/sources/prepare.ts';
import { registered } from '../support/dask.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { executorContract } from './executor-contract.ts';
import { currentSettings } from '../support/workspace.ts';

const catalog = loadCatalog(currentSettings());
const committed = (id: string) => readReferenceTable(join(ROOT, 'outputs', 'references', `${id}.arrow`)).records;
const essentials = (records: ReturnType<typeof committed>) => records.map((r) => [r.mask, r.status, r.prediction_sha256, r.utility]);
/** Records in a rebuild journal so far (none before it exists). */
const journalLines = (journal: string) => (existsSync(journal) ? readFileSync(journal, 'utf8').split('\n').filter(Boolean).length : 0);
/** A fresh rebuild of one condition on the Dask scheduler at `address`. */
const rebuildOnDask = (id: string, address: string, workers: number) =>
  rebuild(catalog, {
    settings: currentSettings(),
    conditions: [id],
    workers,
    fresh: true,
    quiet: true,
    log: () => {},
    executor: { kind: 'dask', scheduler: address },
  });

/** Each worker process's PYTHONHASHSEED and MALLOC_TRIM_THRESHOLD_ (null: unset), read through Dask's client. */
function workerVariables(scheduler: string): Record<string, [string | null, string | null]> {
  const script = [
    'import json, os, sys',
    'from distributed import Client',
    'client = Client(sys.argv[1], timeout=30)',
    "print(json.dumps(client.run(lambda: [os.environ.get('PYTHONHASHSEED'), os.environ.get('MALLOC_TRIM_THRESHOLD_')])))",
    'client.close()',
  ].join('\n');
  return JSON.parse(
    execaSync(ensurePythonRuntime(currentSettings()), ['-c', script, scheduler], { cwd: ROOT, env: workerEnvironment(currentSettings()) })
      .stdout,
  ) as Record<string, [string | null, string | null]>;
}

/** Committed prepared inputs are used as they are (prepared/ is set up before the tests run). */
let ws: Workspace;
beforeAll(() => {
  ws = useTempWorkspace({ inputs: 'committed' });
});
afterAll(() => ws.dispose());

describe('Dask executor: the executor contract, each case on a cluster of its own (dask-local)', () => {
  executorContract(
    (options) => openExecutor({ kind: 'dask-local' }, options),
    () => ({ source: 'nile', files: readManifest(currentSettings().paths, 'nile').prepared_files }),
  );
});

describe('Dask executor on a two-worker cluster', () => {
  let scheduler: LocalScheduler;
  let workers: ReturnType<typeof startWorkers>;
  beforeAll(async () => {
    scheduler = await startScheduler(currentSettings());
    workers = startWorkers(currentSettings(), { scheduler: scheduler.address, nworkers: 2 });
  });
  afterAll(async () => {
    await workers.stop();
    await scheduler.stop();
  });

  it("rebuilds conditions of four families into tables identical to the local pool's, and records the executor", async () => {
    const conditions = ['nile', 'wine__d6', 'graph_lesmis__d6', 'mitdb_100__d6'];
    // `workers` sizes only a local pool: the summary counts the cluster's admitted workers.
    const summary = await rebuild(catalog, {
      settings: currentSettings(),
      conditions,
      workers: 1,
      fresh: true,
      quiet: true,
      log: () => {},
      executor: { kind: 'dask', scheduler: scheduler.address },
    });
    expect(summary.failed).toBe(0);
    expect(summary.workers).toBe(2);
    for (const id of conditions)
      expect(essentials(readReferenceTable(join(ws.references, `${id}.arrow`)).records), id).toEqual(essentials(committed(id)));
    const manifest = readReferenceManifest(ws.references)!;
    expect(manifest.executor?.kind).toBe('dask');
    expect(manifest.executor?.workers.length).toBeGreaterThanOrEqual(2);
    expect(new Set(manifest.executor?.workers.map((w) => w.profile))).toEqual(new Set(['x86-64-v3']));
  });

  it('replays through Dask with every check, reporting timing per worker host', async () => {
    const report = await replay({
      settings: currentSettings(),
      conditions: ['nile', 'graph_dolphins__d6'],
      referencesDir: join(ROOT, 'outputs', 'references'),
      quiet: true,
      executor: { kind: 'dask', scheduler: scheduler.address },
    });
    expect(report.all_passed).toBe(true);
    expect(report.passed).toBe(80);
    expect(report.workers).toBe(2);
    expect(report.hosts.map((h) => h.host)).toEqual([hostname()]);
    expect(report.hosts[0]!.records).toBe(80);
    // The checks are the same ones: a changed utility fails through Dask too.
    const tampered = await replayTargets(
      [
        {
          condition: 'nile',
          family: 'forecasting',
          input: { source: 'nile', files: readManifest(currentSettings().paths, 'nile').prepared_files },
          records: committed('nile')
            .map(storedFromReference)
            .map((r, i) => (i === 3 ? { ...r, utility: r.utility! + 1e-12 } : r)),
        },
      ],
      { versions: readReferenceManifest(join(ROOT, 'outputs', 'references'))!.versions, numerics: 'unrecorded' },
      { settings: currentSettings(), quiet: true, executor: { kind: 'dask', scheduler: scheduler.address } },
    );
    expect(tampered.passed).toBe(15);
    expect(tampered.records.find((r) => !r.passed)!.failures.map((f) => f.check)).toEqual(['utility']);
  });

  it('a worker process killed mid-run loses nothing: its records run elsewhere, none lost or doubled', async () => {
    const id = 'spambase__d6';
    const journal = join(ws.cache, 'journal', `${id}.jsonl`);
    const executor = new DaskExecutor({ settings: currentSettings(), scheduler: scheduler.address });
    const [victim] = await executor.describe();
    await executor.close();
    const run = rebuildOnDask(id, scheduler.address, 2);
    // Kill one worker process (its nanny starts a new one) once some records are in the journal.
    const lines = () => journalLines(journal);
    while (lines() < 8) await new Promise((resolve) => setTimeout(resolve, 50));
    process.kill(victim!.pid, 'SIGKILL');
    const summary = await run;
    expect(summary.failed).toBe(0);
    const table = readReferenceTable(join(ws.references, `${id}.arrow`)).records;
    expect(table.map((r) => r.mask)).toEqual(committed(id).map((r) => r.mask));
    expect(essentials(table)).toEqual(essentials(committed(id)));
  });

  it('refuses and names a worker of another runtime, retires it, and computes on the others', async () => {
    const odd = startWorkers(currentSettings(), { scheduler: scheduler.address, nworkers: 1, env: { OPENBLAS_CORETYPE: 'Prescott' } });
    try {
      await registered(odd.process);
      const notes: string[] = [];
      const executor = new DaskExecutor({ settings: currentSettings(), scheduler: scheduler.address, log: (line) => notes.push(line) });
      try {
        const admitted = await executor.describe();
        expect(admitted.length).toBe(2);
        expect(admitted.every((h) => h.numerics.blas.every((b) => b.architecture === 'Haswell'))).toBe(true);
        expect(admitted.every((h) => !h.hash_randomization)).toBe(true);
        expect(executor.refused.size).toBe(1);
        expect([...executor.refused.values()][0]).toMatch(/Katmai kernels, the profile requires Haswell/);
        expect(notes.join('\n')).toMatch(/Dask worker tcp:\/\/127\.0\.0\.1:\d+ refused and retired: .*Katmai/);
        const input = { source: 'nile', files: readManifest(currentSettings().paths, 'nile').prepared_files };
        const result = await executor.run({ family: 'forecasting', input, mask: '0101' }, { timeoutSeconds: 60 });
        expect(result.prediction_sha256).toBe(committed('nile').find((r) => r.mask === '0101')!.prediction_sha256);
      } finally {
        await executor.close();
      }
      // Retired: the odd worker's processes end.
      const ended = await Promise.race([odd.process.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 30_000))]);
      expect(ended).toBe(true);
    } finally {
      odd.kill();
    }
  });

  it("refuses a worker that Dask's nanny started with its own hash seed and malloc trimming (no nanny preload)", async () => {
    // `dask worker` as a job script might start it: wwref's environment and worker preload, but not
    // the nanny preload, so Dask's nanny replaces PYTHONHASHSEED=0 with a seed of its own.
    const plain = execa(
      ensurePythonRuntime(currentSettings()),
      [
        '-m',
        'distributed.cli.dask_worker',
        scheduler.address,
        '--nthreads',
        '1',
        '--host',
        '127.0.0.1',
        '--preload',
        'workflows.cluster.preload',
        '--no-dashboard',
      ],
      { cwd: ROOT, env: workerEnvironment(currentSettings()), stdio: 'pipe', buffer: false, reject: false, cleanup: true },
    );
    try {
      await registered(plain);
      // What the nanny preload changes: wwref's workers keep its seed and no malloc trimming.
      const variables = Object.values(workerVariables(scheduler.address));
      expect(variables.length).toBe(3);
      expect(variables.filter(([seed, trim]) => seed === '0' && trim === null).length).toBe(2);
      expect(variables.filter(([seed, trim]) => seed !== '0' && trim === '65536').length).toBe(1);
      const executor = new DaskExecutor({ settings: currentSettings(), scheduler: scheduler.address, log: () => {} });
      try {
        expect((await executor.describe()).length).toBe(2);
        expect(executor.refused.size).toBe(1);
        expect([...executor.refused.values()][0]).toMatch(
          /string hashing is randomized \(PYTHONHASHSEED was not 0 when it started; a Dask worker started without '--preload-nanny workflows\.cluster\.nanny' gets Dask's own seed\)/,
        );
      } finally {
        await executor.close();
      }
    } finally {
      plain.kill('SIGKILL');
    }
  });
});

describe('Dask executor: a lost scheduler', () => {
  it('stops the rebuild with a clear message; the journal keeps the finished records and the local executor resumes', async () => {
    const id = 'spambase__d6';
    const journal = join(ws.cache, 'journal', `${id}.jsonl`);
    const scheduler = await startScheduler(currentSettings());
    const workers = startWorkers(currentSettings(), { scheduler: scheduler.address, nworkers: 1 });
    try {
      const run = rebuildOnDask(id, scheduler.address, 1);
      const lines = () => journalLines(journal);
      while (lines() < 8) await new Promise((resolve) => setTimeout(resolve, 50));
      scheduler.process.kill('SIGKILL');
      const error = await run.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ExecutorLost);
      expect((error as Error).message).toMatch(/scheduler .* (lost|unreachable).*journal.*resumes/);
      const kept = lines();
      expect(kept).toBeGreaterThanOrEqual(8);
      const resumed = await rebuild(catalog, { settings: currentSettings(), conditions: [id], workers: 1, quiet: true, log: () => {} });
      expect(resumed.resumed).toBe(kept);
      expect(essentials(readReferenceTable(join(ws.references, `${id}.arrow`)).records)).toEqual(essentials(committed(id)));
    } finally {
      workers.kill();
      await scheduler.stop();
    }
  });
});
