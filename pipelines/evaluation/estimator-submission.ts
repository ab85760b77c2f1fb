// A submission by estimator: the agent names `ridge_main`, `ridge_pair` or `gp` and the evaluator fits
// it on the episode's observations with the controls' one implementation (controls/worker.ts, in the
// pinned runtime), then submits its table with the estimator's name and chosen parameters. The fit runs
// outside the episode's lock; the submission stands only if the observations did not change meanwhile.
// The process's worker is shared by every submission of a server: one found dead (killed, crashed) is
// replaced, once per submission, so a dead worker never refuses the submissions after it.
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import { allMasks } from '../catalog/masks.ts';
import { predictionFromJson } from '../analysis/grade.ts';
import type { Json } from '../analysis/strict-json.ts';
import { WorkerCrash } from '../execution/executor.ts';
import type { PythonWorker } from '../execution/python-worker.ts';
import { ESTIMATORS, type EstimatorName, type FitResult, fitEstimator, startControlsWorker } from './controls/worker.ts';
import { readEpisode, submitPrediction } from './episode.ts';

/** One worker per process, started at the first estimator submission (a server may take several episodes' submissions). */
let shared: Promise<PythonWorker> | undefined;

/** The process's worker: started when there is none, or when the one there has ended. */
async function estimatorWorker(settings: Settings): Promise<PythonWorker> {
  for (let attempt = 1; ; attempt++) {
    shared ??= startControlsWorker(settings).catch((error: unknown) => {
      shared = undefined;
      throw error;
    });
    const pending = shared;
    const worker = await pending;
    if (worker.alive) return worker;
    if (shared === pending) shared = undefined; // ended: the next turn starts another (whoever sees it first)
    if (attempt === 2) throw new UserError("the estimator could not be fitted: the controls' worker ended as soon as it started");
  }
}

/**
 * The fit on the process's worker; when the worker dies under it, on a new one, once (a second death
 * is refused in one line). A worker given by the caller is used as it is.
 */
async function fitOnWorker(settings: Settings, request: Parameters<typeof fitEstimator>[1], given?: PythonWorker): Promise<FitResult> {
  if (given) return fitEstimator(given, request);
  for (let attempt = 1; ; attempt++) {
    const worker = await estimatorWorker(settings);
    try {
      return await fitEstimator(worker, request);
    } catch (error) {
      if (!(error instanceof WorkerCrash)) throw error;
      if (attempt === 2)
        throw new UserError(`the estimator could not be fitted: the controls' worker ended twice (${error.message.split('\n')[0]})`);
    }
  }
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
  const fitted = await fitOnWorker(settings, { width: state.dimensions, estimator, observations }, worker);
  // read by the rules of a submitted table (every mask, finite, in [0, 1]): a worker's table outside them is
  // refused here, never committed (a log holding it would be one the rules could not produce)
  const table = (dimensions: number) => Object.fromEntries(allMasks(dimensions).map((mask, k) => [mask, fitted.prediction[k] ?? null]));
  return submitPrediction(
    settings,
    dir,
    (dimensions) => predictionFromJson(table(dimensions), dimensions, `the table fitted by ${estimator}`),
    {
      name: estimator,
      parameters: fitted.parameters as Record<string, Json>,
      observations: observations.map(([mask]) => mask),
    },
  );
}
