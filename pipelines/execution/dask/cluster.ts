// Processes of a Dask cluster started by wwref: `wwref worker` (Dask worker processes running the
// pinned runtime under the numerical profile, one computation thread each) and, for `--executor
// dask-local` and the tests, a scheduler on 127.0.0.1. The scheduler is Dask's own; wwref adds nothing
// to it.
import type { ResultPromise } from 'execa';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { ROOT } from '../../core/paths.ts';
import type { Settings } from '../../core/settings.ts';
import { pythonEnvironment, startPython } from '../launcher.ts';
import type { NumericalProfile } from '../../core/profiles.ts';

/** How long a scheduler may take to write its address. */
const SCHEDULER_START_SECONDS = 60;


export interface WorkerOptions {
  /** The scheduler's address, or the file a scheduler started here writes it to. */
  scheduler: string | { file: string };
  /** Worker processes on this machine (each one computation thread). */
  nworkers: number;
  profile?: NumericalProfile;
  /** Interface to listen on; default 127.0.0.1 when the scheduler is local, else Dask's choice. */
  host?: string;
  /** Extra environment (a test's double, an experiment's variable). */
  env?: Record<string, string>;
  /** Inherit stdio (the `wwref worker` command) instead of capturing it. */
  inherit?: boolean;
}

/**
 * Dask settings of every worker, and of the scheduler wwref starts. Dask's statistical profiler samples
 * the event loop (and on workers the computing thread) every 10 ms, and the event loop wakes every
 * 20 ms to watch itself; both take the GIL from the record being computed, or a core from the workers
 * on a small machine, and slow records by a fifth or more. wwref times records itself, so the profiler
 * is off and the watches (event loop, system, memory) are slower.
 */
const QUIET_DASK_CONFIG = {
  DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED: 'False',
  DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL: '500ms',
  DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL: '5s',
  DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL: '1s',
} as const;

/** The variables wwref's Dask processes get beyond every Python process's (launcher.ts). */
const DASK_ENV = { ...QUIET_DASK_CONFIG, PYTHONPATH: ROOT } as const;

/** The environment of wwref's Dask workers (`wwref worker --print-env` prints it for job scripts). */
export function workerEnvironment(settings: Settings, profile?: NumericalProfile): Record<string, string> {
  return { ...pythonEnvironment(settings, profile), ...DASK_ENV };
}

/**
 * `dask worker` processes (each under a nanny that restarts it) with the project's runtime, the
 * worker preload (one thread, libraries imported) and the nanny preload (the worker processes keep
 * wwref's environment: see workflows/cluster/nanny.py).
 */
export function startWorkers(settings: Settings, options: WorkerOptions): ResultPromise {
  // From a scheduler file the workers wait for it to appear, at most as long as a scheduler may take to start.
  const scheduler = typeof options.scheduler === 'string'
    ? [options.scheduler]
    : ['--scheduler-file', options.scheduler.file, '--death-timeout', String(SCHEDULER_START_SECONDS)];
  const host = options.host ?? (typeof options.scheduler === 'string' && /^(tcp|tls):\/\/(127\.0\.0\.1|localhost)[:/]/.test(options.scheduler) ? '127.0.0.1' : undefined);
  const args = ['-m', 'distributed.cli.dask_worker', ...scheduler, '--nworkers', String(options.nworkers), '--nthreads', '1',
    '--preload', 'workflows.cluster.preload', '--preload-nanny', 'workflows.cluster.nanny', '--no-dashboard', ...(host ? ['--host', host] : [])];
  return startPython(settings, args, {
    profile: options.profile,
    env: { ...DASK_ENV, ...options.env },
    stdio: options.inherit ? 'inherit' : 'pipe',
    buffer: false,
    reject: false,
    cleanup: true,
  });
}

export interface LocalScheduler {
  address: string;
  process: ResultPromise;
  stop(): Promise<void>;
}

/** A scheduler being started: the file it writes its address to, and the address once written. */
interface LaunchedScheduler {
  file: string;
  process: ResultPromise;
  address: Promise<string>;
  stop(): Promise<void>;
}

/** The address in a scheduler file, once the file is there and whole. */
function writtenAddress(file: string): string | undefined {
  if (!existsSync(file)) return undefined;
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as { address?: string }).address;
  } catch {
    return undefined; // still being written
  }
}

function launchScheduler(settings: Settings): LaunchedScheduler {
  const dir = mkdtempSync(join(tmpdir(), 'wwref-scheduler-'));
  const file = join(dir, 'scheduler.json');
  const child = startPython(settings, ['-m', 'distributed.cli.dask_scheduler', '--host', '127.0.0.1', '--port', '0', '--no-dashboard', '--scheduler-file', file], {
    env: DASK_ENV,
    stdio: 'pipe',
    buffer: false,
    reject: false,
    cleanup: true,
  });
  const stop = async () => {
    child.kill('SIGTERM');
    await child;
    rmSync(dir, { recursive: true, force: true });
  };
  let exited = false;
  void child.then(() => (exited = true));
  const address = (async () => {
    const started = Date.now();
    for (;;) {
      const written = writtenAddress(file);
      if (written) return written;
      if (exited || Date.now() - started > SCHEDULER_START_SECONDS * 1000) {
        await stop();
        throw new UserError(`the local Dask scheduler did not start within ${SCHEDULER_START_SECONDS} s`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return { file, process: child, address, stop };
}

/** A Dask scheduler listening on 127.0.0.1 (a free port), without dashboard. */
export async function startScheduler(settings: Settings): Promise<LocalScheduler> {
  const scheduler = launchScheduler(settings);
  return { address: await scheduler.address, process: scheduler.process, stop: scheduler.stop };
}

export interface LocalCluster {
  address: string;
  /** The scheduler's process id (benchmarks read its CPU time). */
  schedulerPid: number | undefined;
  stop(): Promise<void>;
}

/**
 * A scheduler and `nworkers` worker processes on 127.0.0.1 (`--executor dask-local`). Both commands
 * start at once: the workers' interpreter starts and imports Dask while the scheduler starts, then
 * waits for its address file before spawning the worker processes.
 */
export async function startLocalCluster(settings: Settings, nworkers: number, options: { profile?: NumericalProfile; env?: Record<string, string> } = {}): Promise<LocalCluster> {
  const scheduler = launchScheduler(settings);
  const workers = startWorkers(settings, { scheduler: { file: scheduler.file }, nworkers, host: '127.0.0.1', ...options });
  const stop = async () => {
    workers.kill('SIGTERM');
    await workers;
    await scheduler.stop();
  };
  let address: string;
  try {
    address = await scheduler.address;
  } catch (error) {
    await stop();
    throw error;
  }
  return { address, schedulerPid: scheduler.process.pid, stop };
}
