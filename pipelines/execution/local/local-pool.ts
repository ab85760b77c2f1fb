// A pool of persistent Python worker processes on this machine, behind a p-queue. The pool spawns one
// template process under the numerical profile and forks its workers from it (python-worker.ts);
// the template and every worker are admitted (admission.ts: profile, versions, one-thread pools,
// family registry, workflow code) before they are used. A task that exceeds its timeout kills its worker; the pool
// goes on with a fresh one. Tasks may carry an isolation key: a worker serves one key only, and the
// first task of another key gets a fresh worker. The local executor runs records on it; preparation
// uses it directly.
import PQueue from 'p-queue';
import * as z from 'zod';
import { admissionProblems, type AdmissionRules } from '../admission.ts';
import { pinnedVersions, workflowsSha256 } from '../identity.ts';
import { RecordTimeout, RuntimeDidNotStart, RuntimeRefused, WorkerCrash, type ExecutorOptions } from '../executor.ts';
import type { NumericalProfile } from '../../core/profiles.ts';
import type { HelloResult } from '../protocol.ts';
import { PythonWorker } from '../python-worker.ts';

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
  private template?: Promise<PythonWorker>;
  private readonly all = new Set<PythonWorker>();
  private readonly queue: PQueue;
  private readonly rules: AdmissionRules;
  readonly profile: NumericalProfile;
  private stopped = false;
  /** The reject functions of the tasks submitted and not yet settled. */
  private readonly waiting = new Set<(error: Error) => void>();
  /** Every checked worker's hello, in start order (replacements included). */
  readonly hellos: HelloResult[] = [];

  constructor(
    readonly size: number,
    private readonly options: PoolOptions,
  ) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`worker count must be a positive integer, not ${size}`);
    this.profile = options.profile ?? options.settings.profile;
    this.rules = {
      profile: this.profile,
      expectedVersions: options.expectedVersions ?? pinnedVersions(options.settings.runtime),
      allowVersionDrift: options.allowVersionDrift,
      codeSha256: workflowsSha256(),
    };
    this.queue = new PQueue({ concurrency: size });
  }

  /** How the pool's processes start: its profile, and the caller's extra variables. */
  private launch() {
    return { profile: this.profile, env: this.options.env };
  }

  /** Waits for `worker`'s hello and refuses it (RuntimeRefused) when it differs from what is expected. */
  private async check(worker: PythonWorker): Promise<HelloResult> {
    const seconds = this.options.settings.helloTimeoutSeconds;
    const [timeout, clear] = deadline(seconds, () => new WorkerCrash(`worker ${worker.pid} did not answer its hello within ${seconds} s`));
    try {
      const hello = await Promise.race([worker.hello(), timeout]).catch((error: unknown) => {
        // an interpreter that exits, answers with something else or stays silent is a set-up problem: one line
        if (!(error instanceof WorkerCrash) && !(error instanceof z.ZodError)) throw error;
        const said = worker.stderrTail().trim().split('\n').filter(Boolean).at(-1);
        const why =
          error instanceof z.ZodError
            ? 'answered its hello with something else than a wwref worker'
            : (error as Error).message.split('\n')[0]!.replace(/:$/, '');
        throw new RuntimeDidNotStart(
          `the Python runtime ${this.options.settings.python.executable} did not start a wwref worker: ${why}` +
            `${said ? ` (its last words: ${said.slice(0, 300)})` : ''}; ` +
            "check WWREF_PYTHON, or run 'npm run setup' to bring the runtime up to date",
        );
      });
      const problems = admissionProblems(hello, this.rules);
      if (problems.length) throw new RuntimeRefused(`worker ${worker.pid} refused before it ran anything: ${problems.join('; ')}`);
      worker.admitted = hello;
      return hello;
    } finally {
      clear();
    }
  }

  /** The checked template the workers are forked from; a template that died is replaced. */
  private async liveTemplate(): Promise<PythonWorker> {
    const current = await this.template?.catch(() => undefined);
    if (current?.alive) return current;
    const spawned = PythonWorker.spawn(this.options.settings, this.launch());
    this.template = this.check(spawned).then(
      () => spawned,
      (error: unknown) => {
        spawned.kill();
        this.template = undefined;
        throw error;
      },
    );
    return this.template;
  }

  /** A fresh worker: forked from the template (spawned where there is no fork), checked. */
  private async fresh(): Promise<PythonWorker> {
    const worker =
      process.platform === 'win32' ? PythonWorker.spawn(this.options.settings, this.launch()) : await (await this.liveTemplate()).fork();
    this.all.add(worker);
    try {
      this.hellos.push(await this.check(worker));
      return worker;
    } catch (error) {
      this.discard(worker);
      throw error;
    }
  }

  /** An idle worker that may serve `isolation` (one of the same key, else an unused one), or a fresh one. */
  private async take(isolation?: string): Promise<PythonWorker> {
    const fits = (w: PythonWorker) => isolation === undefined || w.isolation === isolation;
    let index = this.idle.findLastIndex(fits);
    if (index < 0) index = this.idle.findLastIndex((w) => w.isolation === undefined);
    if (index < 0 && this.idle.length) this.discard(this.idle.shift()!); // it served another key: never reused
    const worker = index >= 0 ? this.idle.splice(index, 1)[0]! : await this.fresh();
    if (isolation !== undefined) worker.isolation = isolation;
    return worker;
  }

  private discard(worker: PythonWorker): void {
    worker.kill();
    this.all.delete(worker);
  }

  /** Runs `task` on a checked worker; tasks start in submission order. A stopped pool (kill) rejects every task it holds. */
  submit<T>(task: (worker: PythonWorker) => Promise<T>, timeoutSeconds: number, isolation?: string): Promise<T> {
    if (this.stopped) return Promise.reject(new WorkerCrash('the worker pool was stopped'));
    return new Promise<T>((resolve, reject) => {
      this.waiting.add(reject);
      this.queued(task, timeoutSeconds, isolation)
        .then(resolve, reject)
        .finally(() => this.waiting.delete(reject));
    });
  }

  private queued<T>(task: (worker: PythonWorker) => Promise<T>, timeoutSeconds: number, isolation?: string): Promise<T> {
    return this.queue.add(async () => {
      const worker = await this.take(isolation);
      const [timeout, clear] = deadline(
        timeoutSeconds,
        () => new RecordTimeout(`exceeded the ${timeoutSeconds} s timeout; worker ${worker.pid} was stopped`),
      );
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

  /** The hello of a checked worker of this pool (its interpreter's identity), starting one if needed. */
  async hello(): Promise<HelloResult> {
    return this.hellos[0] ?? this.submit(async (worker) => worker.admitted!, this.options.settings.helloTimeoutSeconds);
  }

  async close(): Promise<void> {
    await this.queue.onIdle();
    await Promise.all([...this.all].map((w) => w.close()));
    this.all.clear();
    this.idle.length = 0;
    const template = await this.template?.catch(() => undefined);
    this.template = undefined;
    await template?.close();
  }

  /** Stops everything now (interrupts). */
  kill(): void {
    this.stopped = true;
    // a cleared task never runs: its caller is told now, not left waiting
    this.queue.clear();
    for (const reject of this.waiting) reject(new WorkerCrash('the worker pool was stopped'));
    this.waiting.clear();
    for (const worker of this.all) worker.kill();
    void this.template?.then(
      (t) => t.kill(),
      () => {},
    );
  }
}
