// A pool of persistent Python worker processes on this machine, behind a p-queue. Every worker starts
// under the numerical profile and is checked (its hello: profile and package versions) before it is
// given a task. A task that exceeds its timeout kills its worker; the pool goes on with a fresh one.
// The local executor runs records on it; preparation uses it directly.
import PQueue from 'p-queue';
import { registryProblems } from '../catalog/families.ts';
import { pinnedVersions, versionDrift } from './identity.ts';
import { HELLO_TIMEOUT_SECONDS, RecordTimeout, RuntimeRefused, WorkerCrash, type ExecutorOptions } from './executor.ts';
import { activeProfile, profileProblems, type NumericalProfile } from './numerics.ts';
import type { HelloResult } from './protocol.ts';
import { pythonEnvironment, PythonWorker } from './python-worker.ts';

export type PoolOptions = Omit<ExecutorOptions, 'workers'>;

/** Rejects after `seconds` with `error()`; the returned cancel function clears the timer. */
function deadline(seconds: number, error: () => Error): [Promise<never>, () => void] {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(error()), seconds * 1000);
  });
  return [promise, () => clearTimeout(timer)];
}

export class WorkerPool {
  private readonly idle: PythonWorker[] = [];
  private readonly all = new Set<PythonWorker>();
  private readonly queue: PQueue;
  private readonly env: Record<string, string>;
  private readonly expectedVersions: Readonly<Record<string, string>>;
  readonly profile: NumericalProfile;
  /** Every checked worker's hello, in start order (replacements included). */
  readonly runtimes: HelloResult[] = [];
  /** Workers started over the pool's life (replacements included). */
  started = 0;

  constructor(
    readonly size: number,
    private readonly options: PoolOptions = {},
  ) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`worker count must be a positive integer, not ${size}`);
    this.profile = options.profile ?? activeProfile();
    this.env = { ...pythonEnvironment(this.profile), ...options.env };
    this.expectedVersions = options.expectedVersions ?? pinnedVersions();
    this.queue = new PQueue({ concurrency: size });
  }

  /** Why a worker's hello is refused (empty: accepted). */
  private refusals(hello: HelloResult): string[] {
    const problems = profileProblems(this.profile, hello.numerics).map((p) => `numerical profile '${this.profile.name}': ${p}`);
    problems.push(...registryProblems(hello.families).map((p) => `family registry: ${p}`));
    if (!this.options.allowVersionDrift) {
      const drift = versionDrift(hello.versions, this.expectedVersions);
      if (drift.length) problems.push(`versions differ from the expected ones (${drift.join('; ')}); run 'npm run setup', or pass --allow-version-drift`);
    }
    return problems;
  }

  /** An idle worker, or a fresh one whose hello is accepted. */
  private async take(): Promise<PythonWorker> {
    const worker = this.idle.pop();
    if (worker) return worker;
    const fresh = new PythonWorker(this.env);
    this.all.add(fresh);
    this.started++;
    const [timeout, clear] = deadline(HELLO_TIMEOUT_SECONDS, () => new WorkerCrash(`worker ${fresh.pid} did not answer its hello within ${HELLO_TIMEOUT_SECONDS} s`));
    try {
      const hello = await Promise.race([fresh.hello(), timeout]);
      const problems = this.refusals(hello);
      if (problems.length) throw new RuntimeRefused(`worker ${fresh.pid} refused before it ran anything: ${problems.join('; ')}`);
      fresh.runtime = hello;
      this.runtimes.push(hello);
      return fresh;
    } catch (error) {
      this.discard(fresh);
      throw error;
    } finally {
      clear();
    }
  }

  private discard(worker: PythonWorker): void {
    worker.kill();
    this.all.delete(worker);
  }

  /** Runs `task` on a checked worker; tasks start in submission order. */
  submit<T>(task: (worker: PythonWorker) => Promise<T>, timeoutSeconds: number): Promise<T> {
    return this.queue.add(async () => {
      const worker = await this.take();
      const [timeout, clear] = deadline(timeoutSeconds, () => new RecordTimeout(`exceeded the ${timeoutSeconds} s timeout; worker ${worker.pid} was stopped`));
      let healthy = true;
      try {
        return await Promise.race([task(worker), timeout]);
      } catch (error) {
        if (error instanceof RecordTimeout || error instanceof WorkerCrash) healthy = false;
        throw error;
      } finally {
        clear();
        if (healthy) this.idle.push(worker);
        else this.discard(worker);
      }
    }) as Promise<T>;
  }

  /** The runtime identity (hello) of a checked worker of this pool, starting one if needed. */
  async runtime(): Promise<HelloResult> {
    return this.runtimes[0] ?? this.submit(async (worker) => worker.runtime!, HELLO_TIMEOUT_SECONDS);
  }

  async close(): Promise<void> {
    await this.queue.onIdle();
    await Promise.all([...this.all].map((w) => w.close()));
    this.all.clear();
    this.idle.length = 0;
  }

  /** Stops everything now (interrupts). */
  kill(): void {
    this.queue.clear();
    for (const worker of this.all) worker.kill();
  }
}
