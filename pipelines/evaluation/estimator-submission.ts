// A submission by estimator: the agent names `ridge_main`, `ridge_pair` or `gp` and the evaluator fits
// it on the episode's observations with the controls' one implementation (controls/worker.ts, in the
// pinned runtime), then submits its table with the estimator's name and chosen parameters. The fit runs
// outside the episode's lock; the submission stands only if the observations did not change meanwhile.
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import type { Json } from '../analysis/strict-json.ts';
import type { PythonWorker } from '../execution/python-worker.ts';
import { ESTIMATORS, type EstimatorName, fitEstimator, startControlsWorker } from './controls/worker.ts';
import { readEpisode, submitPrediction } from './episode.ts';

/** One worker per process, started at the first estimator submission (a server may take several episodes' submissions). */
let shared: Promise<PythonWorker> | undefined;

function estimatorWorker(settings: Settings): Promise<PythonWorker> {
  shared ??= startControlsWorker(settings).catch((error: unknown) => {
    shared = undefined;
    throw error;
  });
  return shared;
}

/** Stops the process's estimator worker, if one was started (a server closing). */
export async function closeEstimatorWorker(): Promise<void> {
  const worker = shared;
  shared = undefined;
  if (worker) await (await worker.catch(() => undefined))?.close();
}

export function isEstimator(name: unknown): name is EstimatorName {
  return typeof name === 'string' && (ESTIMATORS as readonly string[]).includes(name);
}

/** Fits `estimator` on the episode's observations and submits its table (closing the episode). */
export async function submitEstimator(settings: Settings, dir: string, estimator: string, worker?: PythonWorker) {
  if (!isEstimator(estimator)) throw new UserError(`estimator must be one of ${ESTIMATORS.join(', ')}, not ${JSON.stringify(estimator)}`);
  const state = readEpisode(dir); // a closed or overdue episode is refused, and logged, by the submission itself
  const observations = state.observations.map((o) => [o.mask, o.utility] as const);
  const fitted = await fitEstimator(worker ?? (await estimatorWorker(settings)), { width: state.dimensions, estimator, observations });
  return submitPrediction(settings, dir, () => fitted.prediction, {
    name: estimator,
    parameters: fitted.parameters as Record<string, Json>,
    observations: observations.map(([mask]) => mask),
  });
}
