// The Dask executor: records run on the workers of a Dask cluster. A bridge process
// (workflows/cluster/bridge.py, the pinned runtime under the numerical profile) speaks our protocol
// here and Dask's client API to the scheduler, with many records in flight. Before any work, the
// bridge's code and versions are checked, the scheduler's address is tried (an address where no
// scheduler answers is one line naming what is there) and every worker is admitted by admission.ts;
// refused workers are named and retired from the cluster. The bridge reports the workers that join
// later, and admission.ts admits them only with an admitted worker's identity (joinProblems).
// Prepared inputs travel by content (read and hash-checked here, scattered once, checked again by
// each worker). Timeouts are enforced by the bridge (the worker is restarted); a lost scheduler stops
// the job with ExecutorLost, the journal keeping every finished record.
import * as z from 'zod';
import { UserError } from '../../core/errors.ts';
import { admissionProblems, interpreterProblems, joinProblems, type AdmissionRules } from '../admission.ts';
import {
  ExecutorLost,
  RecordTimeout,
  RuntimeRefused,
  WorkerCrash,
  WorkerError,
  type Executor,
  type ExecutorOptions,
  type RecordRequest,
  type RunOptions,
  type TruthRequest,
} from '../executor.ts';
import { pinnedVersions, workflowsSha256 } from '../identity.ts';
import type { NumericalProfile } from '../../core/profiles.ts';
import { HelloResult, InterpreterIdentity, type RunResult, type TruthResult } from '../protocol.ts';
import { LocalInputs } from '../inputs.ts';
import { PythonWorker } from '../python-worker.ts';
import type { LocalCluster } from './cluster.ts';

/** How long to wait for the first worker to connect to the scheduler. */
const WORKERS_WAIT_SECONDS = 60;

// Each worker's identity is read on its own: one that cannot be read (another wwref) is refused alone.
const Workers = z.strictObject({ workers: z.record(z.string(), z.unknown()) });
const Connected = z.strictObject({ scheduler: z.string() });
const Admitted = z.strictObject({ admitted: z.array(z.string()) });
const Described = z.strictObject({ admitted: z.array(HelloResult) });

export interface DaskExecutorOptions extends Omit<ExecutorOptions, 'workers'> {
  /** Address of the scheduler, e.g. tcp://127.0.0.1:8786. */
  scheduler: string;
  /** Where prepared inputs are found (default prepared/). */
  inputRoots?: string[];
  /** Where refusals and cluster notes are reported (default stderr). */
  log?: (line: string) => void;
  /** dask-local: the cluster started for the job, stopped after the bridge (close) or with it (cancel). */
  cluster?: LocalCluster;
}

export class DaskExecutor implements Executor {
  readonly kind = 'dask';
  readonly profile: NumericalProfile;
  private readonly bridge: PythonWorker;
  private readonly rules: AdmissionRules;
  private readonly ready: Promise<void>;
  private readonly inputs: LocalInputs;
  private readonly log: (line: string) => void;
  /** Every worker admitted so far, the ones that left included: a worker joining later must have one's identity. */
  private readonly admitted: HelloResult[] = [];
  /** Workers refused so far: address -> why. */
  readonly refused = new Map<string, string>();

  constructor(private readonly options: DaskExecutorOptions) {
    this.profile = options.profile ?? options.settings.profile;
    this.rules = {
      profile: this.profile,
      expectedVersions: options.expectedVersions ?? pinnedVersions(options.settings.runtime),
      allowVersionDrift: options.allowVersionDrift,
      codeSha256: workflowsSha256(),
    };
    this.inputs = new LocalInputs(options.inputRoots?.length ? options.inputRoots : [options.settings.paths.prepared]);
    this.log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    this.bridge = PythonWorker.spawn(options.settings, { profile: this.profile, env: options.env }, 'workflows.cluster.bridge', [
      '--scheduler',
      options.scheduler,
    ]);
    this.ready = this.admit();
    this.ready.catch(() => {}); // awaited by every call
  }

  /**
   * Checks the bridge's code and versions, connects it to the scheduler, then admits the cluster's
   * workers; refuses the job when none is admitted. From then on, workers that join are admitted or
   * retired as they come.
   */
  private async admit(): Promise<void> {
    const own = await this.lost(this.bridge.call(InterpreterIdentity, { op: 'hello' }));
    const problems = interpreterProblems(own, this.rules);
    if (problems.length) throw new RuntimeRefused(`the Dask bridge on this machine was refused: ${problems.join('; ')}`);
    await this.lost(this.bridge.call(Connected, { op: 'connect' }));
    const { workers } = await this.lost(this.bridge.call(Workers, { op: 'workers', wait_seconds: WORKERS_WAIT_SECONDS }));
    const refused = await this.judge(workers, (hello) => admissionProblems(hello, this.rules));
    if (!this.admitted.length)
      throw new RuntimeRefused(
        `no worker of the Dask scheduler ${this.options.scheduler} was admitted: ` +
          `${[...refused].map(([address, why]) => `${address}: ${why}`).join('; ')}`,
      );
    void this.admitJoining();
  }

  /**
   * Admits the workers whose identity passes `problems`, retires the others, naming each on the log;
   * returns the refusals.
   */
  private async judge(workers: Record<string, unknown>, problems: (hello: HelloResult) => string[]): Promise<Map<string, string>> {
    const accepted = new Map<string, HelloResult>();
    const refused = new Map<string, string>();
    for (const [address, reported] of Object.entries(workers)) {
      const hello = HelloResult.safeParse(reported);
      if (!hello.success) {
        refused.set(
          address,
          `its identity cannot be read ` +
            `(${hello.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}); is it another version of wwref?`,
        );
        continue;
      }
      const why = problems(hello.data);
      if (why.length) refused.set(address, why.join('; '));
      else accepted.set(address, hello.data);
    }
    await this.lost(this.bridge.call(Admitted, { op: 'admit', workers: [...accepted.keys()], retire: [...refused.keys()] }));
    this.admitted.push(...accepted.values());
    for (const [address, why] of refused) {
      this.refused.set(address, why);
      this.log(`Dask worker ${address} refused and retired: ${why}`);
    }
    return refused;
  }

  /** Workers that connect while the job runs, until the bridge closes: each needs an admitted worker's identity. */
  private async admitJoining(): Promise<void> {
    try {
      for (;;) {
        const { workers } = await this.bridge.call(Workers, { op: 'joined' });
        await this.judge(workers, (hello) => joinProblems(hello, this.admitted, this.rules));
      }
    } catch (error) {
      // The bridge closed (the job's end, or its loss, which the job's own requests report).
      if (this.bridge.alive) this.log(`Dask workers that join are no longer admitted: ${(error as Error).message}`);
    }
  }

  /** The bridge's own failures, typed: its death or a lost scheduler end the job. */
  private async lost<T>(pending: Promise<T>): Promise<T> {
    try {
      return await pending;
    } catch (error) {
      if (error instanceof WorkerCrash) throw new ExecutorLost(`the Dask bridge process stopped: ${error.message}`);
      if (error instanceof WorkerError && error.type === 'SchedulerLost') throw new ExecutorLost(error.message);
      if (error instanceof WorkerError && error.type === 'SchedulerUnreachable') throw new UserError(error.message);
      if (error instanceof WorkerError && error.type === 'TimeoutError')
        throw new ExecutorLost(`${error.message}; start workers with 'wwref worker --scheduler ${this.options.scheduler}'`);
      throw error;
    }
  }

  /** A record's failure as the executor contract types it. */
  private async typed<T>(pending: Promise<T>): Promise<T> {
    try {
      return await this.lost(pending);
    } catch (error) {
      if (error instanceof WorkerError && error.type === 'RecordTimeout') throw new RecordTimeout(error.message);
      if (error instanceof WorkerError && error.type === 'WorkerCrash') throw new WorkerCrash(error.message);
      throw error;
    }
  }

  /** The bridge's process id (benchmarks read its CPU time). */
  get bridgePid(): number | undefined {
    return this.bridge.pid;
  }

  /** The connected admitted workers' identities; refusals (also of workers that joined later) are in `refused`. */
  async describe(): Promise<HelloResult[]> {
    await this.ready;
    return (await this.lost(this.bridge.call(Described, { op: 'describe' }))).admitted;
  }

  async truth(request: TruthRequest, options: RunOptions): Promise<TruthResult['truth']> {
    await this.ready;
    return (
      await this.typed(this.bridge.truth(request.family, this.inputs.resolve(request.input), { timeoutSeconds: options.timeoutSeconds }))
    ).truth;
  }

  async run(request: RecordRequest, options: RunOptions): Promise<RunResult> {
    await this.ready;
    const input = this.inputs.resolve(request.input);
    return this.typed(
      this.bridge.run(request.family, input, request.mask, {
        reuseSharedStage: request.reuseSharedStage,
        timeoutSeconds: options.timeoutSeconds,
      }),
    );
  }

  cancel(): void {
    this.bridge.kill();
    this.options.cluster?.kill();
  }

  async close(): Promise<void> {
    await this.ready.catch(() => {});
    await this.bridge.close();
    await this.options.cluster?.stop();
  }
}
