// The Executor seam: what the jobs (rebuild, replay, add-source) need from whatever runs records —
// the local process pool (local-executor.ts) or another engine. Requests are plain data that name
// the prepared input by source and content hashes, never by a local path; failures arrive as one
// typed error family. Scheduling, hashing, verification and writing stay with the jobs.
import { DEFAULT_HELLO_TIMEOUT_SECONDS, type Settings } from '../core/settings.ts';
import type { FamilyName } from '../catalog/families.ts';
import { UserError } from '../core/errors.ts';
import type { NumericalProfile } from '../core/profiles.ts';
import type { HelloResult, RunResult, TruthResult } from './protocol.ts';

/** How long a forked worker may take to connect (a fresh worker's hello: `settings.helloTimeoutSeconds`). */
export const HELLO_TIMEOUT_SECONDS = DEFAULT_HELLO_TIMEOUT_SECONDS;
/** Reading a condition's held-out truth. */
export const TRUTH_TIMEOUT_SECONDS = 300;
/** Preparing one source (acquisition excluded). */
export const PREPARE_TIMEOUT_SECONDS = 1800;

/** A prepared input: the source and the sha256 of each of its files (arrays.npz, metadata.json.gz). */
export interface PreparedInput {
  source: string;
  files: Readonly<Record<string, string>>;
}

export interface RecordRequest {
  family: FamilyName;
  input: PreparedInput;
  mask: string;
  /** Let the family reuse its expensive per-input stage across masks (bit-identical; see README). */
  reuseSharedStage?: boolean;
  /**
   * Local executor: requests with different isolation keys never share a worker process, the first
   * request of a key gets a fresh one (replay uses the condition, so nothing a process holds crosses
   * conditions). Dask's workers are long-lived and ignore it (README, "Growing past one machine").
   */
  isolation?: string;
}

export interface TruthRequest {
  family: FamilyName;
  input: PreparedInput;
  isolation?: string;
}

export interface RunOptions {
  timeoutSeconds: number;
}

export interface ExecutorOptions {
  /** The process's settings: the runtime and its interpreter, the profile, where prepared inputs are. */
  settings: Settings;
  /** Worker processes, each with one computation thread. */
  workers: number;
  /** Numerical profile of every worker (default: the settings'). */
  profile?: NumericalProfile;
  /** Versions every worker must report (default: the runtime's pins). */
  expectedVersions?: Readonly<Record<string, string>>;
  /** Accept workers whose versions differ (the job then compares with tolerances and says so). */
  allowVersionDrift?: boolean;
  /** Extra environment of the worker processes (a test's double, an experiment's variable). */
  env?: Readonly<Record<string, string>>;
}

export interface Executor {
  /** What runs the records, e.g. "local". */
  readonly kind: string;
  readonly profile: NumericalProfile;
  /** The hello of every worker started so far (at least one), each checked before it got work. */
  describe(): Promise<HelloResult[]>;
  truth(request: TruthRequest, options: RunOptions): Promise<TruthResult['truth']>;
  run(request: RecordRequest, options: RunOptions): Promise<RunResult>;
  /** Stops everything now: pending requests fail. */
  cancel(): void;
  /** Finishes what is pending, then releases every worker. */
  close(): Promise<void>;
}

/** Why a record could not be executed; the jobs record it and go on. */
export class ExecutionError extends Error {
  override name = 'ExecutionError';
}

/** The record exceeded its timeout; the worker that ran it was stopped and is replaced. */
export class RecordTimeout extends ExecutionError {
  override name = 'RecordTimeout';
}

/** The worker process died or was killed before it answered. */
export class WorkerCrash extends ExecutionError {
  override name = 'WorkerCrash';
}

/** The workflow raised in Python (the request's own error); the worker goes on. */
export class WorkerError extends ExecutionError {
  override name = 'WorkerError';
  constructor(
    readonly type: string,
    message: string,
    readonly traceback: string,
  ) {
    super(message);
  }
}

/**
 * The engine that runs records is gone (a lost Dask scheduler, a dead bridge): the job stops, the
 * journal keeps every finished record, and the same command resumes.
 */
export class ExecutorLost extends UserError {
  override name = 'ExecutorLost';
  constructor(message: string) {
    super(`${message}; finished records are kept in the journal, and the same command (with either executor) resumes`);
  }
}

/** A worker whose runtime (numerical profile, versions) is not the requested one: refused before any work. */
export class RuntimeRefused extends UserError {
  override name = 'RuntimeRefused';
}

/** An interpreter that did not start a wwref worker at all (exited, stayed silent, answered something else). */
export class RuntimeDidNotStart extends RuntimeRefused {
  override name = 'RuntimeDidNotStart';
}
