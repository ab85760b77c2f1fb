// Shared-estimator scores: the benchmark puts an agent's score beside the controls' estimators refitted
// on exactly the agent's observations (main- and pair-effect ridge, the plain GP), so that what the agent
// chose to buy and what it made of it can be told apart ("gains … over a GP fitted to the same
// observations"). The estimators are the controls' (workflows/evaluation/), fitted by a controls'
// worker on the observations in acquisition order (an episode's receipt, a record's list: the same order
// gives the same bits); each table is scored by grade, in the published agent-score form.
import { UserError } from '../core/errors.ts';
import type { Surface } from '../analysis/effects.ts';
import {
  type AgentScore,
  agentScore,
  differingFields,
  type RecordDifference,
  SHARED_GAIN_KEY,
  type SharedRequest,
} from '../analysis/grade-records.ts';
import { isObject, type Json } from '../analysis/strict-json.ts';
import { gradeSurface } from '../analysis/grade.ts';
import type { PythonWorker } from '../execution/python-worker.ts';
import { type EstimatorName, fitEstimator } from './controls/worker.ts';

/** The record fields of the three shared estimators, as the benchmark stores them. */
export const SHARED_FIELDS: Record<EstimatorName, string> = {
  ridge_main: 'shared_degree1_score',
  ridge_pair: 'shared_degree2_score',
  gp: 'shared_gp_score',
};

export type SharedScore = {
  estimator: EstimatorName;
  parameters: Record<string, unknown>;
} & AgentScore;

export interface SharedScores {
  shared_degree1_score: SharedScore;
  shared_degree2_score: SharedScore;
  shared_gp_score: SharedScore;
  /** The agent's effect_recovery minus each shared estimator's (given the agent's own recovery). */
  recovery_gain_over_shared?: { degree1: number; degree2: number; gp: number };
}

/**
 * The three shared-estimator scores of `observations` ([mask, utility] in acquisition order, the anchors
 * included) on `surface`, and the gains of `ownRecovery` over each.
 */
export async function sharedScores(
  worker: PythonWorker,
  surface: Surface,
  observations: readonly (readonly [string, number])[],
  ownRecovery?: number,
): Promise<SharedScores> {
  const scores = {} as Record<EstimatorName, SharedScore>;
  for (const estimator of Object.keys(SHARED_FIELDS) as EstimatorName[]) {
    const fitted = await fitEstimator(worker, { width: surface.dimensions, estimator, observations });
    const graded = gradeSurface(surface, fitted.prediction, { observed: observations.map(([mask]) => mask) });
    scores[estimator] = { estimator, parameters: fitted.parameters, ...agentScore(surface, graded) };
  }
  const result: SharedScores = {
    shared_degree1_score: scores.ridge_main,
    shared_degree2_score: scores.ridge_pair,
    shared_gp_score: scores.gp,
  };
  if (ownRecovery !== undefined)
    result.recovery_gain_over_shared = {
      degree1: ownRecovery - scores.ridge_main.effect_recovery,
      degree2: ownRecovery - scores.ridge_pair.effect_recovery,
      gp: ownRecovery - scores.gp.effect_recovery,
    };
  return result;
}

/** One record's refitted shared-estimator scores (`grade --records`). */
export interface RecordShared extends SharedScores {
  record: number;
  line: number;
  condition: string;
}

/**
 * How a stored shared-score field differs from the refitted one. The gains are wwref's own form: all
 * three, nothing else. A shared score object carries the fields of its form (a published agent record's
 * may be fewer than wwref's), but always the effect_recovery a summary reads, and, in wwref's form
 * (naming its `estimator`), every field; a stored number is the refitted effect_recovery.
 */
function storedDifferences(key: string, stored: Json, recomputed: Json) {
  if (key === SHARED_GAIN_KEY || !isObject(recomputed)) return differingFields(stored, recomputed, key);
  if (!isObject(stored)) return differingFields(stored, recomputed.effect_recovery, key);
  const required = Object.hasOwn(stored, 'estimator') ? Object.keys(recomputed) : ['effect_recovery'];
  const fields = [...new Set([...Object.keys(stored), ...required])];
  return fields.flatMap((field) =>
    differingFields(
      Object.hasOwn(stored, field) ? stored[field] : undefined,
      Object.hasOwn(recomputed, field) ? recomputed[field] : undefined,
      `${key}.${field}`,
    ),
  );
}

/**
 * The shared-estimator scores of stored records (`grade --records`): refitted on each record's
 * observations in its order, and compared with the ones it stores: a stored object field by field (the
 * fields it carries: a published agent record's, a cohort's, or its gains over them), a stored number
 * with the refitted effect_recovery. Differences go to `differ`.
 */
export async function sharedForRecords(
  worker: PythonWorker,
  requests: readonly SharedRequest[],
  surfaceOf: (condition: string) => Surface,
  differ: (difference: RecordDifference) => void,
): Promise<RecordShared[]> {
  const results: RecordShared[] = [];
  for (const request of requests) {
    const { record, line, condition } = request;
    // the estimators fit at least two observations (an agent's record always has the two anchors)
    if (request.observations.length < 2)
      throw new UserError(
        `record ${record} (line ${line}): ${request.observations.length} observation(s); the shared estimators need at least two (leave out --shared)`,
      );
    const shared = await sharedScores(worker, surfaceOf(condition), request.observations, request.own_recovery);
    results.push({ record, line, condition, ...shared });
    for (const [key, stored] of Object.entries(request.stored)) {
      const mine = shared[key as keyof SharedScores];
      const recomputed = JSON.parse(JSON.stringify(mine ?? null)) as Json;
      for (const d of storedDifferences(key, stored, recomputed)) differ({ record, line, condition, ...d });
    }
  }
  return results;
}
