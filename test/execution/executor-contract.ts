// The contract every Executor keeps, written once so that each implementation runs the same tests:
// checked runtimes, typed failures (timeout, crash, Python error), refused runtimes and inputs, and
// records identical whichever job submits them. Needs the prepared input of `nile` (see the caller).
import { readReferenceTable } from '../support/raw-references.ts';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { UserError } from '../../pipelines/core/errors.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { executeRecord } from '../../pipelines/execution/execute-record.ts';
import {
  RecordTimeout,
  RuntimeRefused,
  TRUTH_TIMEOUT_SECONDS,
  WorkerCrash,
  WorkerError,
  type Executor,
  type ExecutorOptions,
  type PreparedInput,
} from '../../pipelines/execution/executor.ts';
import { pinnedVersions } from '../../pipelines/execution/identity.ts';
import { profileProblems } from '../../pipelines/execution/numerics.ts';
import { currentSettings } from '../support/workspace.ts';
import { slowRecords, exitOnMask } from '../support/doubles.ts';

export type ExecutorFactory = (options: ExecutorOptions) => Executor | Promise<Executor>;

/** Runs `body` with a fresh executor and always closes it. */
async function using<T>(make: ExecutorFactory, options: ExecutorOptions, body: (executor: Executor) => Promise<T>): Promise<T> {
  const executor = await make(options);
  try {
    return await body(executor);
  } finally {
    await executor.close();
  }
}

export function executorContract(make: ExecutorFactory, input: () => PreparedInput): void {
  const request = (mask: string) => ({ family: 'forecasting' as const, input: input(), mask });

  it('describes every worker it started, each on the pinned versions, the numerical profile and fixed string hashing', async () => {
    await using(make, { settings: currentSettings(), workers: 2 }, async (executor) => {
      const hellos = await executor.describe();
      expect(hellos.length).toBeGreaterThanOrEqual(1);
      for (const hello of hellos) {
        expect(hello.versions).toMatchObject(
          Object.fromEntries(Object.entries(pinnedVersions(currentSettings().runtime)).filter(([p]) => p in hello.versions)),
        );
        expect(profileProblems(executor.profile, hello.numerics)).toEqual([]);
        expect(hello.hash_randomization).toBe(false);
      }
    });
  });

  it('gives every job the same record: isolated (replay) or not (rebuild), through executeRecord, equal to the committed table', async () => {
    const committed = readReferenceTable(join(ROOT, 'outputs', 'references', 'nile.arrow')).records;
    await using(make, { settings: currentSettings(), workers: 1 }, async (executor) => {
      const truth = await executor.truth({ family: 'forecasting', input: input() }, { timeoutSeconds: TRUTH_TIMEOUT_SECONDS });
      for (const stored of committed.slice(0, 6)) {
        const task = {
          condition: 'nile',
          source: 'nile',
          family: 'forecasting' as const,
          dimensions: 4,
          mask: stored.mask,
          planSha256: stored.plan_sha256,
          input: input(),
          timeoutSeconds: 60,
        };
        const asRebuild = await executeRecord(executor, task, truth);
        const asReplay = await executeRecord(executor, { ...task, isolation: `replay ${stored.mask}` }, truth);
        expect(asRebuild.status, asRebuild.error ?? '').toBe('ok');
        expect([asRebuild.prediction_sha256, asRebuild.utility]).toEqual([stored.prediction_sha256, stored.utility]);
        expect([asReplay.prediction_sha256, asReplay.utility]).toEqual([stored.prediction_sha256, stored.utility]);
      }
    });
  });

  it('a record over its timeout rejects with RecordTimeout, and the executor goes on', async () => {
    await using(make, { settings: currentSettings(), workers: 1, env: slowRecords(5) }, async (executor) => {
      await expect(executor.run(request('0000'), { timeoutSeconds: 1 })).rejects.toThrow(RecordTimeout);
      const next = await executor.run(request('0001'), { timeoutSeconds: 30 });
      expect(next.prediction_sha256).toMatch(/^[0-9a-f]{64}$/);
    });
  });

  it('a worker that dies mid-record rejects with WorkerCrash, and the executor goes on', async () => {
    await using(make, { settings: currentSettings(), workers: 1, env: exitOnMask('0011') }, async (executor) => {
      await expect(executor.run(request('0011'), { timeoutSeconds: 60 })).rejects.toThrow(WorkerCrash);
      const next = await executor.run(request('0010'), { timeoutSeconds: 60 });
      expect(next.utility).toBeGreaterThan(0);
    });
  });

  it('a Python error rejects with WorkerError carrying the exception type', async () => {
    await using(make, { settings: currentSettings(), workers: 1 }, async (executor) => {
      const error = await executor.run(request('01x1'), { timeoutSeconds: 60 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkerError);
      expect((error as WorkerError).type).toBe('ValueError');
      expect((error as Error).message).toMatch(/mask/);
    });
  });

  it('refuses a runtime whose hello differs from the pinned set, before any record', async () => {
    await using(make, { settings: currentSettings(), workers: 1, expectedVersions: { numpy: '0.0.0' } }, async (executor) => {
      await expect(executor.describe()).rejects.toThrow(RuntimeRefused);
      await expect(executor.run(request('0000'), { timeoutSeconds: 60 })).rejects.toThrow(/numpy: expected 0\.0\.0, installed 2\.2\.6/);
    });
    await using(make, { settings: currentSettings(), workers: 1, env: { OPENBLAS_CORETYPE: 'Prescott' } }, async (executor) => {
      await expect(executor.run(request('0000'), { timeoutSeconds: 60 })).rejects.toThrow(
        /runs Katmai kernels, the profile requires Haswell/,
      );
    });
    await using(make, { settings: currentSettings(), workers: 1, env: { PYTHONHASHSEED: 'random' } }, async (executor) => {
      await expect(executor.run(request('0000'), { timeoutSeconds: 60 })).rejects.toThrow(/string hashing is randomized/);
    });
  });

  it('refuses a prepared input whose files differ from the requested hashes', async () => {
    await using(make, { settings: currentSettings(), workers: 1 }, async (executor) => {
      const wrong = { ...input(), files: { ...input().files, 'arrays.npz': '0'.repeat(64) } };
      const error = await executor
        .run({ family: 'forecasting', input: wrong, mask: '0000' }, { timeoutSeconds: 60 })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UserError);
      expect((error as Error).message).toMatch(/prepared input changed: .*arrays\.npz/);
    });
  });
}
