// The local executor: records run in a pool of Python worker processes on this machine. Prepared
// inputs are found and verified by inputs.ts before their first use, and again by each worker on the
// bytes it reads.
import type { Executor, ExecutorOptions, RecordRequest, RunOptions, TruthRequest } from '../executor.ts';
import { WorkerPool } from './local-pool.ts';
import type { HelloResult, RunResult, TruthResult } from '../protocol.ts';
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
    const input = this.inputs.resolve(request.input);
    return (await this.pool.submit((w) => w.truth(request.family, input), options.timeoutSeconds, request.isolation)).truth;
  }

  async run(request: RecordRequest, options: RunOptions): Promise<RunResult> {
    const input = this.inputs.resolve(request.input);
    return this.pool.submit(
      (w) => w.run(request.family, input, request.mask, { reuseSharedStage: request.reuseSharedStage }),
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
