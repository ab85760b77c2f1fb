// A pool of persistent Python workers behind a p-queue. A task that exceeds its timeout kills its
// worker (the record fails, the pool goes on with a fresh worker on the next task).
import PQueue from 'p-queue';
import { PythonWorker, WorkerCrash } from './worker.ts';

export class RecordTimeout extends Error {
  override name = 'RecordTimeout';
}

export class WorkerPool {
  private readonly idle: PythonWorker[] = [];
  private readonly all = new Set<PythonWorker>();
  private readonly queue: PQueue;
  /** Workers started over the pool's life (replacements included). */
  started = 0;

  constructor(
    readonly size: number,
    private readonly env: Record<string, string> = {},
  ) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`worker count must be a positive integer, not ${size}`);
    this.queue = new PQueue({ concurrency: size });
  }

  private take(): PythonWorker {
    const worker = this.idle.pop();
    if (worker) return worker;
    const fresh = new PythonWorker(this.env);
    this.all.add(fresh);
    this.started++;
    return fresh;
  }

  private discard(worker: PythonWorker): void {
    worker.kill();
    this.all.delete(worker);
  }

  /** Runs `task` on an idle worker; tasks start in submission order. */
  submit<T>(task: (worker: PythonWorker) => Promise<T>, timeoutSeconds: number): Promise<T> {
    return this.queue.add(async () => {
      const worker = this.take();
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
