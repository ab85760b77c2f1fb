// The local executor: records run in a pool of Python worker processes on this machine. Prepared
// inputs are found and verified by inputs.ts before their first use, and again by each worker on the
// bytes it reads.
import type { Executor, ExecutorOptions, RecordRequest, RunOptions, TruthRequest } from '../executor.ts';
import { WorkerPool } from './local-pool.ts';
import type { HelloResult, RunResult, TruthResult } from '../protocol.ts';
import type { PythonWorker } from '../python-worker.ts';
import { LocalInputs } from '../inputs.ts';

export class LocalExecutor implements Executor {
  readonly kind = 'local';
  private readonly pool: WorkerPool;
  private readonly inputs: LocalInputs;

  constructor(options: ExecutorOptions & { inputRoots?: string[] }) {
    this.pool = new WorkerPool(options.workers, { ...options, pipeline: true });
    this.inputs = new LocalInputs(options.inputRoots?.length ? options.inputRoots : [options.settings.paths.prepared]);
  }

  get profile() {
    return this.pool.profile;
  }

  async describe(): Promise<HelloResult[]> {
    await this.pool.hello();
    return [...this.pool.hellos];
  }

  async truth(request: TruthRequest, options: RunOptions): Promise<TruthResult['truth']> {
    // ahead: the next condition's truth (its input read) may be read by its worker while a record of
    // another computes; the input's files are checked when the task begins (for the first task of an
    // input: its hashes here, then the worker's own check of the bytes it reads)
    const task = (w: PythonWorker) => w.truth(request.family, this.inputs.resolve(request.input));
    return (await this.pool.submit(task, options.timeoutSeconds, request.isolation, true)).truth;
  }

  async run(request: RecordRequest, options: RunOptions): Promise<RunResult> {
    return this.pool.submit(
      (w) => w.run(request.family, this.inputs.resolve(request.input), request.mask, { reuseSharedStage: request.reuseSharedStage }),
      options.timeoutSeconds,
      request.isolation,
    );
  }

  cancel(): void {
    this.pool.kill();
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
