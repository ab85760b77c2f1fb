// A pool of persistent Python worker processes on this machine, with its own queue. The pool spawns one
// template process under the numerical profile and forks its workers from it (python-worker.ts);
// the template and every worker are admitted (admission.ts: profile, versions, one-thread pools,
// family registry, workflow code) before they are used. A task that exceeds its timeout kills its worker; the pool
// goes on with a fresh one. Tasks may carry an isolation key: a worker serves one key only, and the
// first task of another key gets a fresh worker. The local executor runs records on it; preparation
// uses it directly.
import * as z from 'zod';
import { admissionProblems, type AdmissionRules } from '../admission.ts';
import { pinnedVersions, workflowsSha256 } from '../identity.ts';
import { RecordTimeout, RuntimeDidNotStart, RuntimeRefused, WorkerCrash, type ExecutorOptions } from '../executor.ts';
import type { NumericalProfile } from '../../core/profiles.ts';
import type { HelloResult } from '../protocol.ts';
import { PythonWorker } from '../python-worker.ts';

export type PoolOptions = Omit<ExecutorOptions, 'workers'> & {
  /** Send a task to a busy worker of its isolation key when none is free (the local executor's records). */
  pipeline?: boolean;
};

interface Task {
  task: (worker: PythonWorker) => Promise<unknown>;
  timeoutSeconds: number;
  isolation?: string;
  /** May run on the next isolation key's spare worker before its turn (it computes no record). */
  ahead?: boolean;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

/**
 * How many tasks a worker may hold with pipelining: the one it computes and those waiting in its
 * input, so that it never waits for the orchestrator between two records, even through a run of
 * records shorter than the orchestrator's verification of each (an image's 65,536-pixel exact sum
 * takes about 2 ms). Measured on 384 cheap records: 2 → 3 → 8 took the overhead after the start-up
 * from 0.59 to 0.53 to 0.40 ms a record; 16 gave no more. The tasks of one key are spread over its
 * busy workers (the least loaded first), so at most this many minus one wait in one worker at the end.
 */
const PIPELINE_DEPTH = 8;

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
  /** Tasks submitted and not yet sent to a worker, in submission order. */
  private readonly pending: Task[] = [];
  /**
   * Workers taken for tasks (at most `size`), each with the tasks sent to it, how the last one ended
   * (true: the worker is sound) and the last of its tasks handed back to the queue when it was lost.
   */
  private readonly busy = new Map<PythonWorker, { tasks: number; last: Promise<boolean>; returned?: Task }>();
  private taken = 0;
  /** A fresh worker being forked (and perhaps running a task ahead) for the next isolation key (forkSpare). */
  private spare?: Promise<void>;
  /** The isolation keys of the tasks whose worker is being taken. */
  private readonly beginning: (string | undefined)[] = [];
  /** Waiting for the pool to hold no task (close). */
  private readonly drained: (() => void)[] = [];
  /** What every worker's hello must say; read when the first worker has been started (admissionRules). */
  private rules?: AdmissionRules;
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
  }

  /**
   * The admission rules, computed once, after the first worker was started: hashing the workflow
   * code takes tens of milliseconds, spent while that interpreter imports the libraries.
   */
  private admissionRules(): AdmissionRules {
    this.rules ??= {
      profile: this.profile,
      expectedVersions: this.options.expectedVersions ?? pinnedVersions(this.options.settings.runtime),
      allowVersionDrift: this.options.allowVersionDrift,
      codeSha256: workflowsSha256(),
    };
    return this.rules;
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
      const rules = this.admissionRules(); // while the worker, just started, imports the libraries
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
      const problems = admissionProblems(hello, rules);
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
    await this.spare; // a worker forked ahead is idle once ready, and may already serve this key
    const fits = (w: PythonWorker) => isolation === undefined || w.isolation === isolation;
    let index = this.idle.findLastIndex(fits);
    if (index < 0) index = this.idle.findLastIndex((w) => w.isolation === undefined);
    if (index < 0 && this.idle.length) this.discard(this.idle.shift()!); // it served another key: never reused
    const worker = index >= 0 ? this.idle.splice(index, 1)[0]! : await this.fresh();
    if (isolation !== undefined) {
      worker.isolation = isolation;
      this.retireIdle(isolation);
    }
    return worker;
  }

  /**
   * A task of `current` has its worker: the idle workers of other keys with nothing queued will
   * never run anything again (a key's worker serves no other), so they end now, beside the work
   * that goes on, rather than pile up for close (a replay's earlier conditions, passed by the
   * workers forked ahead).
   */
  private retireIdle(current: string): void {
    const queued = new Set([...this.pending.map((t) => t.isolation), ...this.beginning]);
    for (const worker of this.idle.filter((w) => w.isolation !== undefined && w.isolation !== current && !queued.has(w.isolation))) {
      this.idle.splice(this.idle.indexOf(worker), 1);
      this.discard(worker);
    }
  }

  /**
   * With pipelining, while every worker is busy and no idle one waits for a queued task: a fresh worker forked and admitted
   * ahead of time for the first queued task of an isolation key no worker serves (replay: the next
   * condition), so that the switch waits for no fork and hello. If that key's first queued task may
   * run ahead (replay: the condition's truth, which reads its input), the worker runs it now, beside
   * the record being computed; it computes no record until one is its turn. Then it waits among the
   * idle workers (unused, or serving that key).
   */
  private forkSpare(): void {
    if (!this.options.pipeline || this.spare || this.stopped || this.taken < this.size || process.platform === 'win32') return;
    // one worker ahead at most: none while an idle one is unused or serves a key still queued
    const waiting = new Set(this.pending.map((t) => t.isolation));
    if (this.idle.some((w) => w.isolation === undefined || waiting.has(w.isolation))) return;
    const served = new Set([...[...this.busy.keys(), ...this.idle].map((w) => w.isolation), ...this.beginning]);
    const key = this.pending.find((t) => t.isolation !== undefined && !served.has(t.isolation))?.isolation;
    if (key === undefined) return;
    this.spare = this.fresh()
      .then(
        async (worker) => {
          if (this.stopped) return this.discard(worker);
          const index = this.pending.findIndex((t) => t.isolation === key);
          if (index >= 0 && this.pending[index]!.ahead) {
            worker.isolation = key;
            await this.runAhead(this.pending.splice(index, 1)[0]!, worker);
          }
          if (worker.alive && this.all.has(worker)) this.idle.push(worker);
        },
        () => {}, // the same failure reaches the task that needs a fresh worker
      )
      .finally(() => {
        this.spare = undefined;
      });
  }

  /** A task run ahead on a worker of its own that holds no slot (forkSpare), under its timeout. */
  private async runAhead(task: Task, worker: PythonWorker): Promise<void> {
    const [timeout, clear] = deadline(
      task.timeoutSeconds,
      () => new RecordTimeout(`exceeded the ${task.timeoutSeconds} s timeout; worker ${worker.pid} was stopped`),
    );
    try {
      task.resolve(await Promise.race([Promise.resolve().then(() => task.task(worker)), timeout]));
    } catch (error) {
      if (error instanceof RecordTimeout || error instanceof WorkerCrash) this.discard(worker);
      task.reject(error as Error);
    } finally {
      clear();
    }
  }

  private discard(worker: PythonWorker): void {
    worker.kill();
    this.all.delete(worker);
  }

  /**
   * Runs `task` on a checked worker; tasks start in submission order. A stopped pool (kill) rejects
   * every task it holds. With `pipeline`, a task may be sent to a busy worker of its own isolation
   * key while no worker is free: it waits in the worker's input and starts the moment the task before
   * it ends, so the worker never waits for the orchestrator between two records. Its timeout runs from
   * then; if the worker is lost first (the task before it timed out or crashed), it was never begun
   * and goes back to the head of the queue, for a fresh worker.
   */
  submit<T>(task: (worker: PythonWorker) => Promise<T>, timeoutSeconds: number, isolation?: string, ahead = false): Promise<T> {
    if (this.stopped) return Promise.reject(new WorkerCrash('the worker pool was stopped'));
    return new Promise<T>((resolve, reject) => {
      this.waiting.add(reject);
      const settle = (action: () => void) => {
        this.waiting.delete(reject);
        action();
      };
      this.pending.push({
        task: task as Task['task'],
        timeoutSeconds,
        isolation,
        ahead,
        resolve: (value) => settle(() => resolve(value as T)),
        reject: (error) => settle(() => reject(error)),
      });
      this.pump();
    });
  }

  /** Starts the queue's head while a worker is free (or pipelines it onto a busy one), in order. */
  private pump(): void {
    while (this.pending.length && !this.stopped) {
      const head = this.pending[0]!;
      if (this.taken < this.size) {
        this.pending.shift();
        this.taken++;
        void this.begin(head);
        continue;
      }
      const busy = this.options.pipeline ? this.pipelinable(head) : undefined;
      if (!busy) {
        this.forkSpare();
        break;
      }
      this.pending.shift();
      void this.execute(head, busy);
    }
    if (!this.pending.length && this.taken === 0) for (const done of this.drained.splice(0)) done();
  }

  /**
   * A busy worker that `task` may wait behind: the same isolation key (any worker of a pool of one),
   * fewer than PIPELINE_DEPTH tasks in it; of several, the one holding fewest.
   */
  private pipelinable(task: Task): PythonWorker | undefined {
    if (task.isolation === undefined && this.size > 1) return undefined;
    let best: PythonWorker | undefined;
    let fewest = PIPELINE_DEPTH;
    for (const [worker, state] of this.busy)
      if (state.tasks >= 1 && state.tasks < fewest && worker.alive && this.all.has(worker) && worker.isolation === task.isolation) {
        best = worker;
        fewest = state.tasks;
      }
    return best;
  }

  /** The first task of a worker taken for it (an idle one of its key, or a fresh one). */
  private async begin(task: Task): Promise<void> {
    let worker: PythonWorker;
    this.beginning.push(task.isolation);
    try {
      worker = await this.take(task.isolation);
    } catch (error) {
      this.beginning.splice(this.beginning.indexOf(task.isolation), 1);
      this.taken--;
      task.reject(error as Error);
      this.pump();
      return;
    }
    this.beginning.splice(this.beginning.indexOf(task.isolation), 1);
    this.busy.set(worker, { tasks: 0, last: Promise.resolve(true) });
    await this.execute(task, worker);
  }

  /**
   * Sends `task` to `worker` at once and times it from when the worker begins it (when the task
   * before it there has ended). Resolves when the task is settled or handed back to the queue.
   */
  private async execute(task: Task, worker: PythonWorker): Promise<void> {
    const state = this.busy.get(worker)!;
    const previous = state.last;
    let healthy!: (ok: boolean) => void;
    state.last = new Promise<boolean>((resolve) => (healthy = resolve));
    state.tasks++;
    let result: Promise<unknown>;
    try {
      result = task.task(worker);
    } catch (error) {
      result = Promise.reject(error);
    }
    result.catch(() => {}); // raced below, or dropped when the task goes back to the queue
    this.pump(); // the next task may follow it into this worker now
    let ok = true;
    try {
      if (!(await previous)) {
        // the worker was lost before it began this task: it runs on another one, after the tasks sent
        // to the lost worker before it (put back first: at the queue's head, unless already taken again)
        ok = false;
        if (!this.stopped) {
          const at = state.returned ? this.pending.indexOf(state.returned) + 1 : 0;
          this.pending.splice(at, 0, task);
          state.returned = task;
        }
        return;
      }
      const [timeout, clear] = deadline(
        task.timeoutSeconds,
        () => new RecordTimeout(`exceeded the ${task.timeoutSeconds} s timeout; worker ${worker.pid} was stopped`),
      );
      try {
        task.resolve(await Promise.race([result, timeout]));
      } catch (error) {
        if (error instanceof RecordTimeout || error instanceof WorkerCrash) ok = false;
        task.reject(error as Error);
      } finally {
        clear();
      }
    } finally {
      if (!ok) this.discard(worker);
      healthy(ok);
      if (--state.tasks === 0) {
        this.busy.delete(worker);
        this.taken--;
        if (worker.alive && this.all.has(worker)) this.idle.push(worker);
      }
      this.pump();
    }
  }

  /** The hello of a checked worker of this pool (its interpreter's identity), starting one if needed. */
  async hello(): Promise<HelloResult> {
    return this.hellos[0] ?? this.submit(async (worker) => worker.admitted!, this.options.settings.helloTimeoutSeconds);
  }

  async close(): Promise<void> {
    if (this.pending.length || this.taken) await new Promise<void>((resolve) => this.drained.push(resolve));
    await this.spare; // a spare being forked is among the workers closed below
    const workers = [...this.all];
    this.all.clear();
    this.idle.length = 0;
    const template = await this.template?.catch(() => undefined);
    this.template = undefined;
    // the template forks no more: it and its forked workers end at once, side by side
    await Promise.all([...workers.map((w) => w.close()), template?.close()]);
  }

  /** Stops everything now (interrupts). */
  kill(): void {
    this.stopped = true;
    // a cleared task never runs: its caller is told now, not left waiting
    this.pending.length = 0;
    for (const reject of this.waiting) reject(new WorkerCrash('the worker pool was stopped'));
    this.waiting.clear();
    for (const worker of this.all) worker.kill();
    void this.template?.then(
      (t) => t.kill(),
      () => {},
    );
  }
}
