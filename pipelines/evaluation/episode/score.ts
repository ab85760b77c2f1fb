// The score of an episode that is over: its submission graded (`../../analysis/grade.ts`, every
// observation replacing its cell) or, ended without one or past its deadline, the benchmark's
// undelivered zeros; with what the score says of the delivery (budget, purchases, calls, labels, the
// estimator) and, unless asked not to, the shared-estimator scores of its observations
// (`../shared-scores.ts`, in a controls' worker: the caller's, or one of its own when it has none or
// it died).
import { UserError } from '../../core/errors.ts';
import type { Settings } from '../../core/settings.ts';
import { allMasks } from '../../catalog/masks.ts';
import type { PythonWorker } from '../../execution/python-worker.ts';
import { type GradeResult, gradeSurface } from '../../analysis/grade.ts';
import type { Json } from '../../analysis/strict-json.ts';
import type { SharedScores } from '../shared-scores.ts';
import { act } from './log.ts';
import { deadlineAt, sessionClock } from './state.ts';

/** What a score says of the episode beyond grade's fields. */
interface Delivery {
  /** False when the episode ended without a submission (or its deadline passed first): recovery 0, strict 0. */
  delivered: boolean;
  undelivered: boolean;
  /** A complete table was submitted (the benchmark's valid artifact). */
  artifact_valid: boolean;
  budget: number;
  purchased: number;
  calls_used: number;
  labels: Record<string, string>;
  submitted_at: string | null;
  ended: { at: string; reason: string } | null;
  /** The estimator the evaluator fitted for the submission (null: a table was submitted). */
  estimator: { name: string; parameters: Record<string, Json> } | null;
}

/** An undelivered episode's score: no table, the benchmark's zeros. */
export interface UndeliveredScore {
  effect_recovery: 0;
  strict_effect_reconstruction: false;
  exact_optimal_choice: false;
  near_optimal_choice: false;
  prediction_table: null;
  observed: string[];
}

export type EpisodeScore = (GradeResult | UndeliveredScore) & Delivery & Partial<SharedScores>;

export interface ScoreOptions {
  /** Add the shared-estimator scores (default true): started in a controls' worker unless `worker` is given. */
  shared?: boolean;
  worker?: PythonWorker;
}

/**
 * The score of an episode that is over: its submission (every observation replacing its cell), or,
 * ended without one or past its deadline, undelivered; with the shared-estimator scores of its
 * observations and the gains over them.
 */
export async function scoreEpisode(settings: Settings, dir: string, options: ScoreOptions = {}): Promise<EpisodeScore> {
  const { score, surface, observations } = await act(settings, dir, 'score', {}, (state, surface, at) => {
    const overdue = sessionClock(state, at).seconds_left === 0;
    if (!state.closed && !overdue) throw new UserError('the episode is still open: submit a prediction first');
    const observed = state.observations.map((o) => o.mask);
    const delivery: Delivery = {
      delivered: state.submission !== null,
      undelivered: state.submission === null,
      artifact_valid: state.submission !== null,
      budget: state.budget,
      purchased: state.observations.filter((o) => o.paid).length,
      calls_used: state.calls_used,
      labels: state.labels,
      submitted_at: state.submission?.at ?? null,
      ended: state.ended ?? (state.submission ? null : { at: deadlineAt(state), reason: 'the session deadline passed' }),
      estimator: state.submission?.estimator ?? null,
    };
    let graded: GradeResult | UndeliveredScore;
    if (state.submission) {
      const table = state.submission.prediction_table;
      graded = gradeSurface(
        surface,
        allMasks(state.dimensions).map((m) => table[m]!),
        { observed },
      );
    } else {
      graded = {
        effect_recovery: 0,
        strict_effect_reconstruction: false,
        exact_optimal_choice: false,
        near_optimal_choice: false,
        prediction_table: null,
        observed,
      };
    }
    const pairs = state.observations.map((o) => [o.mask, o.utility] as const);
    return { result: { score: { ...graded, ...delivery } as EpisodeScore, surface, observations: pairs } };
  });
  if (options.shared === false) return score;
  const { sharedScores } = await import('../shared-scores.ts');
  const { startControlsWorker } = await import('../controls/worker.ts');
  const { WorkerCrash } = await import('../../execution/executor.ts');
  const withShared = async (worker: PythonWorker) => ({
    ...score,
    ...(await sharedScores(worker, surface, observations, score.effect_recovery)),
  });
  // the caller's worker, while it lives; one that died (killed, crashed) is replaced for this score by a
  // worker of its own, once: a dead worker never makes the scores after it internal errors
  if (options.worker?.alive)
    try {
      return await withShared(options.worker);
    } catch (error) {
      if (!(error instanceof WorkerCrash)) throw error;
    }
  const worker = await startControlsWorker(settings);
  try {
    return await withShared(worker);
  } catch (error) {
    if (error instanceof WorkerCrash)
      throw new UserError(`the shared-estimator scores could not be fitted: the controls' worker ended (${error.message.split('\n')[0]})`);
    throw error;
  } finally {
    await worker.close();
  }
}
