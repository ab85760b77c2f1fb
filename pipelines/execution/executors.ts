// Which executor runs a job's records, chosen by name (`--executor`): the local process pool, a Dask
// cluster at a scheduler address, or a Dask cluster of this machine started for the job and stopped
// after it. Jobs ask this module for an Executor and never construct one themselves. Each executor's
// module (the Python launcher, Dask) is loaded when one is opened: the command line's options import this one.
import { UserError } from '../core/errors.ts';
import type { Executor, ExecutorOptions } from './executor.ts';
import type { HelloResult } from './protocol.ts';

export const EXECUTOR_KINDS = ['local', 'dask', 'dask-local'] as const;
export type ExecutorKind = (typeof EXECUTOR_KINDS)[number];

export interface ExecutorChoice {
  kind: ExecutorKind;
  /** The scheduler address of `dask`. */
  scheduler?: string;
}

/** An executor of the chosen kind; `options.workers` is the pool size (local) or the cluster size (dask-local). */
export async function openExecutor(
  choice: ExecutorChoice,
  options: ExecutorOptions & { inputRoots?: string[]; log?: (line: string) => void },
): Promise<Executor> {
  switch (choice.kind) {
    case 'local': {
      const { LocalExecutor } = await import('./local/local-executor.ts');
      return new LocalExecutor(options);
    }
    case 'dask': {
      if (!choice.scheduler) throw new UserError('--executor dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.5:8786)');
      const { DaskExecutor } = await import('./dask/dask-executor.ts');
      return new DaskExecutor({ ...options, scheduler: choice.scheduler });
    }
    case 'dask-local': {
      const { DaskExecutor } = await import('./dask/dask-executor.ts');
      const { startLocalCluster } = await import('./dask/cluster.ts');
      const cluster = await startLocalCluster(options.settings, options.workers, {
        profile: options.profile,
        env: options.env ? { ...options.env } : undefined,
      });
      return new DaskExecutor({ ...options, scheduler: cluster.address, cluster });
    }
  }
}

/** What a manifest records of the executor: its kind, and the identity and profile of every worker. */
export interface ExecutorRecord {
  kind: string;
  worker_count: number;
  workers: { host: string; pid: number; cpu_model: string; libc: string; blas: string[]; profile: string }[];
}

export function executorRecord(executor: Executor, hellos: HelloResult[]): ExecutorRecord {
  return {
    kind: executor.kind,
    worker_count: hellos.length,
    workers: hellos.map((h) => ({
      host: h.host,
      pid: h.pid,
      cpu_model: h.numerics.cpu_model,
      libc: h.numerics.libc,
      blas: h.numerics.blas.map((b) => `${b.package} ${b.internal_api ?? '?'} ${b.version ?? '?'} ${b.architecture ?? '?'}`),
      profile: executor.profile.name,
    })),
  };
}
