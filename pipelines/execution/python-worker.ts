// One persistent Python worker process (workflows/worker.py) and its request/response loop.
import { execa, type ResultPromise } from 'execa';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import type { z } from 'zod';
import { UserError } from '../core/errors.ts';
import type { FamilyName } from '../catalog/families.ts';
import { pythonExecutable, ROOT } from '../core/paths.ts';
import { WorkerCrash, WorkerError } from './executor.ts';
import { activeProfile, profileEnvironment, type NumericalProfile } from './numerics.ts';
import { HelloResult, PrepareResult, Request, Response, RunResult, TruthResult } from './protocol.ts';

/** One computation thread everywhere: set before Python (and its BLAS/OpenMP pools) starts. */
export const THREAD_ENV = {
  OMP_NUM_THREADS: '1',
  OPENBLAS_NUM_THREADS: '1',
  MKL_NUM_THREADS: '1',
  VECLIB_MAXIMUM_THREADS: '1',
  NUMEXPR_NUM_THREADS: '1',
} as const;

/** The environment of every Python process of the project: one thread, fixed hash seed, the numerical profile. */
export function pythonEnvironment(profile: NumericalProfile = activeProfile()): Record<string, string> {
  return { ...THREAD_ENV, PYTHONHASHSEED: '0', ...profileEnvironment(profile) };
}

/** How long a worker asked to shut down may take before it is killed. */
const SHUTDOWN_GRACE_SECONDS = 5;

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

export class PythonWorker {
  private readonly process: ResultPromise;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private exited = false;
  private stderrTail = '';
  /** This worker's hello, once its pool has checked it against the numerical profile. */
  runtime?: HelloResult;

  /** `env` is added to the inherited environment: pythonEnvironment() and any test-only switches. */
  constructor(env: Record<string, string>) {
    const python = pythonExecutable();
    if (!existsSync(python)) {
      throw new UserError(`the pinned Python runtime is missing (${python}); run 'npm run setup' first`);
    }
    this.process = execa(python, ['-u', '-m', 'workflows.worker'], {
      cwd: ROOT,
      env,
      stdin: 'pipe',
      stdout: 'pipe',
      stderr: 'pipe',
      buffer: false,
      reject: false,
      cleanup: true,
    });
    this.process.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString()).slice(-4000);
    });
    const lines = createInterface({ input: this.process.stdout! });
    lines.on('line', (line) => this.onLine(line));
    void this.process.then(() => this.onExit());
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  private onLine(line: string): void {
    let parsed: z.infer<typeof Response>;
    try {
      parsed = Response.parse(JSON.parse(line));
    } catch (error) {
      this.failAll(new WorkerCrash(`worker sent an invalid protocol line: ${line.slice(0, 200)}`));
      this.kill();
      return;
    }
    const pending = parsed.id === null ? undefined : this.pending.get(parsed.id);
    if (!pending) return;
    this.pending.delete(parsed.id!);
    if (parsed.ok) pending.resolve(parsed.result);
    else pending.reject(new WorkerError(parsed.error.type, parsed.error.message, parsed.error.traceback));
  }

  private onExit(): void {
    this.exited = true;
    const tail = this.stderrTail.trim().split('\n').slice(-5).join('\n');
    this.failAll(new WorkerCrash(`worker process exited${tail ? `:\n${tail}` : ''}`));
  }

  private failAll(error: Error): void {
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
  }

  private request<T>(schema: z.ZodType<T>, body: Request): Promise<T> {
    if (this.exited) return Promise.reject(new WorkerCrash('worker process is not running'));
    const id = this.nextId++;
    const line = `${JSON.stringify({ id, ...Request.parse(body) })}\n`;
    return new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.process.stdin!.write(line);
    }).then((result) => schema.parse(result));
  }

  hello(): Promise<HelloResult> {
    return this.request(HelloResult, { op: 'hello' });
  }

  run(family: FamilyName, folder: string, mask: string, options: { cold?: boolean; reuseSharedStage?: boolean } = {}): Promise<RunResult> {
    return this.request(RunResult, {
      op: 'run',
      family,
      folder,
      mask,
      cold: options.cold ?? false,
      reuse_shared_stage: options.reuseSharedStage ?? false,
    });
  }

  truth(family: FamilyName, folder: string): Promise<TruthResult> {
    return this.request(TruthResult, { op: 'truth', family, folder });
  }

  prepare(recipe: string, params: unknown, raw: Record<string, string>, out: string): Promise<Record<string, unknown>> {
    return this.request(PrepareResult, { op: 'prepare', recipe, params, raw, out });
  }

  /** Hard stop (used for timeouts): the pending request fails with WorkerCrash. */
  kill(): void {
    if (!this.exited) this.process.kill('SIGKILL');
  }

  async close(): Promise<void> {
    if (this.exited) return;
    this.process.stdin!.end(`${JSON.stringify({ id: 0, op: 'shutdown' })}\n`);
    const timer = setTimeout(() => this.kill(), SHUTDOWN_GRACE_SECONDS * 1000);
    await this.process;
    clearTimeout(timer);
  }
}
