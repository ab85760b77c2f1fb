// Processes of a Dask cluster started by wwref: `wwref worker` (Dask worker processes running the
// pinned runtime under the numerical profile, one computation thread each) and, for `--executor
// dask-local` and the tests, a scheduler on 127.0.0.1. The scheduler is Dask's own; wwref adds nothing
// to it. Each command runs in a process group of its own with a private folder, and ends with
// everything it started, whichever way it or this process ends (workflows/cluster/launch.py).
import type { ResultPromise } from 'execa';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { ROOT } from '../../core/paths.ts';
import type { NumericalProfile } from '../../core/profiles.ts';
import type { Settings } from '../../core/settings.ts';
import { pythonEnvironment, startPython } from '../launcher.ts';

/** How long a scheduler may take to write its address. */
const SCHEDULER_START_SECONDS = 60;
/** How long Dask's processes may take to close when asked (SIGTERM) before their group is killed. */
const STOP_GRACE_SECONDS = 10;

export interface WorkerOptions {
  /** The scheduler's address, or the file a scheduler started here writes it to. */
  scheduler: string | { file: string };
  /** Worker processes on this machine (each one computation thread). */
  nworkers: number;
  profile?: NumericalProfile;
  /** Interface to listen on; default 127.0.0.1 when the scheduler is local, else Dask's choice. */
  host?: string;
  /** Extra environment (test-only switches). */
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

/**
 * The environment of wwref's Dask workers (`wwref worker --print-env` prints it for job scripts): Dask's
 * scratch space goes to the project's cache folder (the processes started here get a private folder).
 */
export function workerEnvironment(settings: Settings, profile?: NumericalProfile): Record<string, string> {
  return { ...pythonEnvironment(settings, profile), ...DASK_ENV, DASK_TEMPORARY_DIRECTORY: join(settings.paths.cache, 'dask') };
}

/** The variables wwref's Dask processes get beyond every Python process's (launcher.ts). */
const DASK_ENV = { ...QUIET_DASK_CONFIG, PYTHONPATH: ROOT } as const;

/**
 * A Dask command started here (a scheduler, or `dask worker` and the worker processes of its nannies)
 * through workflows/cluster/launch.py: in a process group of its own, so that it is stopped as a whole
 * and a Ctrl-C on the terminal reaches this process only, with a private folder for its files (Dask's
 * scratch space included), and a pipe on its standard input whose end tells it this process is gone.
 */
export interface DaskProcesses {
  process: ResultPromise;
  folder: string;
  /** Asks the command to close (SIGTERM), kills what is left after a grace period, removes the folder. */
  stop(): Promise<void>;
  /** Kills the whole group and removes the folder, at once (cancel). */
  kill(): void;
}

/** `args` of the command, given its folder. */
function launch(
  settings: Settings,
  command: 'scheduler' | 'worker',
  args: (folder: string) => string[],
  options: { profile?: NumericalProfile; env?: Record<string, string>; inherit?: boolean } = {},
): DaskProcesses {
  const { profile, env = {}, inherit = false } = options;
  const folder = mkdtempSync(join(tmpdir(), `wwref-dask-${command}-`));
  const child = startPython(settings, ['-m', 'workflows.cluster.launch', folder, command, ...args(folder)], {
    profile,
    env: { ...DASK_ENV, ...env, DASK_TEMPORARY_DIRECTORY: folder },
    stdin: 'pipe',
    stdout: inherit ? 'inherit' : 'pipe',
    stderr: inherit ? 'inherit' : 'pipe',
    detached: true,
    buffer: false,
    reject: false,
  });
  // Output nobody reads must not fill its pipe and block Dask's logging (a reader added later still gets what follows).
  child.stdout?.resume();
  child.stderr?.resume();
  const kill = () => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // the group is gone
    }
    rmSync(folder, { recursive: true, force: true });
  };
  const stop = async () => {
    child.kill('SIGTERM');
    const timer = setTimeout(kill, STOP_GRACE_SECONDS * 1000);
    await child;
    clearTimeout(timer);
    kill();
  };
  return { process: child, folder, stop, kill };
}

/**
 * `dask worker` processes (each under a nanny that restarts it) with the project's runtime, the
 * worker preload (one thread, libraries imported) and the nanny preload (the worker processes keep
 * wwref's environment: see workflows/cluster/nanny.py).
 */
export function startWorkers(settings: Settings, options: WorkerOptions): DaskProcesses {
  // From a scheduler file the workers wait for it to appear, at most as long as a scheduler may take to start.
  const scheduler =
    typeof options.scheduler === 'string'
      ? [options.scheduler]
      : ['--scheduler-file', options.scheduler.file, '--death-timeout', String(SCHEDULER_START_SECONDS)];
  const host =
    options.host ??
    (typeof options.scheduler === 'string' && /^(tcp|tls):\/\/(127\.0\.0\.1|localhost)[:/]/.test(options.scheduler)
      ? '127.0.0.1'
      : undefined);
  const args = [
    ...scheduler,
    '--nworkers',
    String(options.nworkers),
    '--nthreads',
    '1',
    '--preload',
    'workflows.cluster.preload',
    '--preload-nanny',
    'workflows.cluster.nanny',
    '--no-dashboard',
    ...(host ? ['--host', host] : []),
  ];
  return launch(settings, 'worker', () => args, { profile: options.profile, env: options.env, inherit: options.inherit });
}

export interface LocalScheduler extends DaskProcesses {
  address: string;
}

/** A scheduler being started: the file it writes its address to, and the address once written. */
interface LaunchedScheduler extends DaskProcesses {
  file: string;
  address: Promise<string>;
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

const SCHEDULER_FILE = 'scheduler.json';

function launchScheduler(settings: Settings): LaunchedScheduler {
  const scheduler = launch(settings, 'scheduler', (folder) => [
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--no-dashboard',
    '--scheduler-file',
    join(folder, SCHEDULER_FILE),
  ]);
  const file = join(scheduler.folder, SCHEDULER_FILE);
  let exited = false;
  void scheduler.process.then(() => (exited = true));
  const address = (async () => {
    const started = Date.now();
    for (;;) {
      const written = writtenAddress(file);
      if (written) return written;
      if (exited || Date.now() - started > SCHEDULER_START_SECONDS * 1000) {
        await scheduler.stop();
        throw new UserError(`the local Dask scheduler did not start within ${SCHEDULER_START_SECONDS} s`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return { ...scheduler, file, address };
}

/** A Dask scheduler listening on 127.0.0.1 (a free port), without dashboard. */
export async function startScheduler(settings: Settings): Promise<LocalScheduler> {
  const scheduler = launchScheduler(settings);
  return { ...scheduler, address: await scheduler.address };
}

export interface LocalCluster {
  address: string;
  /** The scheduler's process id (benchmarks read its CPU time). */
  schedulerPid: number | undefined;
  /** Stops the workers, then the scheduler. */
  stop(): Promise<void>;
  /** Kills every process of the cluster and removes its folders, at once. */
  kill(): void;
}

/**
 * A scheduler and `nworkers` worker processes on 127.0.0.1 (`--executor dask-local`). Both commands
 * start at once: the workers' interpreter starts and imports Dask while the scheduler starts, then
 * waits for its address file before spawning the worker processes.
 */
export async function startLocalCluster(
  settings: Settings,
  nworkers: number,
  options: { profile?: NumericalProfile; env?: Record<string, string> } = {},
): Promise<LocalCluster> {
  const scheduler = launchScheduler(settings);
  const workers = startWorkers(settings, { scheduler: { file: scheduler.file }, nworkers, host: '127.0.0.1', ...options });
  const stop = async () => {
    await workers.stop();
    await scheduler.stop();
  };
  let address: string;
  try {
    address = await scheduler.address;
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    address,
    schedulerPid: scheduler.process.pid,
    stop,
    kill: () => {
      workers.kill();
      scheduler.kill();
    },
  };
}
