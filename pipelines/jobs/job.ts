// The job loop, written once: every job that executes records (rebuild, replay, add-source through
// rebuild) runs its body inside runJob, which opens the executor the user chose, admits its workers
// (executor.describe: profile, versions, code, one thread), turns SIGINT/SIGTERM into a cancellation,
// and always closes the executor, so that a stopped job leaves no worker, cluster or temporary folder
// behind and the caller's own cleanup (`finally`) still runs. A stopped job ends with Interrupted.
import { Interrupted } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import type { Executor, ExecutorOptions } from '../execution/executor.ts';
import { openExecutor, type ExecutorChoice } from '../execution/executors.ts';
import type { HelloResult } from '../execution/protocol.ts';

export interface JobSpec extends Omit<ExecutorOptions, 'settings' | 'workers'> {
  settings: Settings;
  workers: number;
  /** What runs the records (default the local pool). */
  executor?: ExecutorChoice;
  /** Where a pack's inputs are, when not in prepared/. */
  inputRoots?: string[];
  log: (line: string) => void;
  /** What the user is told when a signal stops the job (what was kept, how to go on). */
  interrupted: string;
  /**
   * Work of the job's own that needs no worker (reading and checking its inputs), done while the
   * workers start (their interpreters import the libraries meanwhile); an error it throws ends the
   * job before any record, as it would have before the workers started.
   */
  whileStarting?: () => void;
}

export interface RunningJob {
  executor: Executor;
  /** The first admitted worker's hello. */
  hello: HelloResult;
  /** Aborted when a signal stops the job: a body checks it before it commits anything. */
  signal: AbortSignal;
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export async function runJob<T>(spec: JobSpec, body: (job: RunningJob) => Promise<T>): Promise<T> {
  let stopped: NodeJS.Signals | undefined;
  let executor: Executor | undefined;
  const abort = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopped) return; // the first signal's cleanup is under way
    stopped = signal;
    spec.log(`\n${signal === 'SIGINT' ? 'interrupted' : `stopped by ${signal}`}: stopping the workers…`);
    abort.abort(signal);
    executor?.cancel();
  };
  for (const signal of SIGNALS) process.on(signal, onSignal);
  const interrupted = () =>
    new Interrupted(stopped!, `${stopped === 'SIGINT' ? 'interrupted' : `stopped by ${stopped}`}: ${spec.interrupted}`);
  try {
    const { settings, workers, executor: choice, interrupted: _said, whileStarting, ...options } = spec;
    executor = await openExecutor(choice ?? { kind: 'local' }, { ...options, settings, workers });
    if (stopped) throw interrupted();
    const described = executor.describe();
    described.catch(() => {}); // awaited below, after the job's own checks
    if (whileStarting) {
      await new Promise((resolve) => setImmediate(resolve)); // the first worker is spawned by now
      whileStarting();
    }
    const [hello] = await described;
    const result = await body({ executor, hello: hello!, signal: abort.signal });
    if (stopped) throw interrupted();
    return result;
  } catch (error) {
    executor?.cancel();
    throw stopped ? interrupted() : error;
  } finally {
    try {
      await executor?.close();
    } finally {
      for (const signal of SIGNALS) process.removeListener(signal, onSignal);
    }
  }
}
