// One record, one path: execute a configuration on an executor, hash its prediction here, recompute
// its metric independently, and return the reference record (status ok, or failed with the reason).
// rebuild and add-source store these records; replay compares them with the stored ones. A run
// resumed from a journal becomes a record through the same recordOfRun.
import type { FamilyName } from '../catalog/families.ts';
import { UserError } from '../core/errors.ts';
import { RecordTimeout, WorkerError, type Executor, type PreparedInput } from './executor.ts';
import type { RunResult } from './protocol.ts';
import type { ReferenceRecord } from './records.ts';
import { verifyRun, type Truth, type Verification } from './verification/verify.ts';

/** Everything that identifies one record and how to run it. */
export interface RecordTask {
  condition: string;
  source: string;
  family: FamilyName;
  dimensions: number;
  mask: string;
  planSha256: string;
  input: PreparedInput;
  timeoutSeconds: number;
  reuseSharedStage?: boolean;
  isolation?: string;
}

/** What names a record, without how it runs. */
export type RecordIdentity = Pick<RecordTask, 'condition' | 'source' | 'family' | 'dimensions' | 'mask' | 'planSha256'>;

/** The fields of a record that come from its task. */
function recordBase(task: RecordIdentity) {
  return {
    condition: task.condition,
    source: task.source,
    family: task.family,
    dimensions: task.dimensions,
    mask: task.mask,
    plan_sha256: task.planSha256,
  };
}

/**
 * The record of a run and its verification: the one place a record is built from a run, for a run
 * computed now (executeRecord) and for one resumed from a journal after reverifyRun (rebuild).
 */
export function recordOfRun(task: RecordIdentity, run: RunResult, check: Verification): ReferenceRecord {
  return {
    ...recordBase(task),
    status: check.problems.length ? 'failed' : 'ok',
    error: check.problems.length ? check.problems.join('; ') : null,
    utility: run.utility,
    native_metric: run.native_metric,
    native_value: run.native_value,
    independent_value: check.independentValue,
    normalization_scale: run.normalization_scale,
    prediction_sha256: check.sha256,
    warnings: run.warnings,
    wall_seconds: run.wall_seconds,
    prediction_wall_seconds: run.prediction_wall_seconds,
    metric_wall_seconds: run.metric_wall_seconds,
    extras: run.extras,
  };
}

/**
 * `truth` may still be on its way: it is awaited once the run has finished. `onRun` sees the raw run
 * (e.g. the host that computed it) before verification.
 */
export async function executeRecord(
  executor: Executor,
  task: RecordTask,
  truth: Truth | Promise<Truth>,
  onRun?: (run: RunResult) => void,
): Promise<ReferenceRecord> {
  try {
    const run = await executor.run(
      { family: task.family, input: task.input, mask: task.mask, reuseSharedStage: task.reuseSharedStage, isolation: task.isolation },
      { timeoutSeconds: task.timeoutSeconds },
    );
    onRun?.(run);
    return recordOfRun(task, run, verifyRun(task.family, run, await truth));
  } catch (error) {
    // A refused runtime or a changed input concerns every record: the job stops.
    if (error instanceof UserError) throw error;
    const kind =
      error instanceof RecordTimeout ? 'timeout' : error instanceof WorkerError ? `WorkerError (${error.type})` : (error as Error).name;
    return {
      ...recordBase(task),
      status: 'failed',
      error: `${kind}: ${(error as Error).message}`,
      utility: null,
      native_metric: null,
      native_value: null,
      independent_value: null,
      normalization_scale: null,
      prediction_sha256: null,
      warnings: [],
      wall_seconds: null,
      prediction_wall_seconds: null,
      metric_wall_seconds: null,
      extras: {},
    };
  }
}
