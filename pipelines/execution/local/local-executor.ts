// The local executor: records run in a pool of Python worker processes on this machine. A prepared
// input is named by source and content hashes; it is looked up as <root>/<source>/ in the input roots
// (prepared/ by default; a pack's inputs/ for a pack replay) and its files are verified against those
// hashes before the first request that uses it (and again by each worker, on the bytes it reads).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { checkFileHashes } from '../../core/hashing.ts';
import { preparedDir } from '../../core/paths.ts';
import type { Executor, ExecutorOptions, PreparedInput, RecordRequest, RunOptions, TruthRequest } from '../executor.ts';
import { WorkerPool } from './local-pool.ts';
import type { HelloResult, RunResult, TruthResult } from '../protocol.ts';
import type { InputFiles } from '../python-worker.ts';

export class LocalExecutor implements Executor {
  readonly kind = 'local';
  private readonly pool: WorkerPool;
  private readonly verified = new Map<string, string>();
  private readonly inputRoots: string[];

  constructor(options: ExecutorOptions & { inputRoots?: string[] }) {
    this.pool = new WorkerPool(options.workers, options);
    this.inputRoots = options.inputRoots ?? [preparedDir()];
  }

  get profile() {
    return this.pool.profile;
  }

  /** The local folder of a prepared input, once its files match the requested hashes. */
  private local(input: PreparedInput): InputFiles {
    const key = JSON.stringify([input.source, Object.entries(input.files).sort()]);
    let folder = this.verified.get(key);
    if (!folder) {
      folder = join(this.inputRoots.find((root) => existsSync(join(root, input.source))) ?? preparedDir(), input.source);
      checkFileHashes(folder, input.files, 'prepared input', `run 'wwref prepare --source ${input.source}'`);
      this.verified.set(key, folder);
    }
    return { folder, files: input.files };
  }

  async describe(): Promise<HelloResult[]> {
    await this.pool.runtime();
    return [...this.pool.runtimes];
  }

  async truth(request: TruthRequest, options: RunOptions): Promise<TruthResult['truth']> {
    const input = this.local(request.input);
    return (await this.pool.submit((w) => w.truth(request.family, input), options.timeoutSeconds, request.isolation)).truth;
  }

  async run(request: RecordRequest, options: RunOptions): Promise<RunResult> {
    const input = this.local(request.input);
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
