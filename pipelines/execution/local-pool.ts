// A pool of persistent Python workers behind a p-queue. Every worker starts under the numerical
// profile and is checked against it (its hello) before it is given a task. A task that exceeds its
// timeout kills its worker (the record fails, the pool goes on with a fresh worker on the next task).
import PQueue from 'p-queue';
import { activeProfile, checkWorkerNumerics, type NumericalProfile } from './numerics.ts';
import type { HelloResult } from './protocol.ts';
import { pythonEnvironment, PythonWorker, WorkerCrash } from './python-worker.ts';

/** How long a fresh worker may take to import its libraries and answer its hello. */
const HELLO_TIMEOUT_SECONDS = 120;

export interface PoolOptions {
  /** The numerical profile of every worker (default: activeProfile()). */
  profile?: NumericalProfile;
  /** Extra environment applied after the profile's (test-only switches). */
  env?: Record<string, string>;
}

export class RecordTimeout extends Error {
  override name = 'RecordTimeout';
}

export class WorkerPool {
  private readonly idle: PythonWorker[] = [];
  private readonly all = new Set<PythonWorker>();
  private readonly queue: PQueue;
  private readonly env: Record<string, string>;
  readonly profile: NumericalProfile;
  /** Workers started over the pool's life (replacements included). */
  started = 0;

  constructor(
    readonly size: number,
    options: PoolOptions = {},
  ) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`worker count must be a positive integer, not ${size}`);
    this.profile = options.profile ?? activeProfile();
    this.env = { ...pythonEnvironment(this.profile), ...options.env };
    this.queue = new PQueue({ concurrency: size });
  }

  /** An idle worker, or a fresh one whose hello matches the profile. */
  private async take(): Promise<PythonWorker> {
    const worker = this.idle.pop();
    if (worker) return worker;
    const fresh = new PythonWorker(this.env);
    this.all.add(fresh);
    this.started++;
    let timer: NodeJS.Timeout | undefined;
    try {
      const hello = await Promise.race([
        fresh.hello(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new WorkerCrash(`worker ${fresh.pid} did not answer its hello within ${HELLO_TIMEOUT_SECONDS} s`)), HELLO_TIMEOUT_SECONDS * 1000);
        }),
      ]);
      checkWorkerNumerics(this.profile, hello.numerics, fresh.pid);
      fresh.runtime = hello;
      return fresh;
    } catch (error) {
      this.discard(fresh);
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  private discard(worker: PythonWorker): void {
    worker.kill();
    this.all.delete(worker);
  }

  /** Runs `task` on an idle worker; tasks start in submission order. */
  submit<T>(task: (worker: PythonWorker) => Promise<T>, timeoutSeconds: number): Promise<T> {
    return this.queue.add(async () => {
      const worker = await this.take();
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new RecordTimeout(`exceeded the ${timeoutSeconds} s timeout; worker ${worker.pid} was stopped`));
        }, timeoutSeconds * 1000);
      });
      let healthy = true;
      try {
        return await Promise.race([task(worker), timeout]);
      } catch (error) {
        if (error instanceof RecordTimeout || error instanceof WorkerCrash) healthy = false;
        throw error;
      } finally {
        clearTimeout(timer);
        if (healthy) this.idle.push(worker);
        else this.discard(worker);
      }
    }) as Promise<T>;
  }

  /** The runtime identity (hello) of a checked worker of this pool. */
  runtime(): Promise<HelloResult> {
    return this.submit(async (worker) => worker.runtime!, HELLO_TIMEOUT_SECONDS);
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
