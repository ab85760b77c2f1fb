// The controls' worker process (workflows/evaluation/worker.py): started from the pinned runtime under
// the numerical profile and admitted by the rules record workers are admitted by (profile, versions,
// one thread, workflow code) before it computes anything; its two operations, a control task and an
// estimator fitted on given observations.
import * as z from 'zod';
import type { Settings } from '../../core/settings.ts';
import { admissionProblems } from '../../execution/admission.ts';
import { RuntimeRefused } from '../../execution/executor.ts';
import { pinnedVersions, workflowsSha256 } from '../../execution/identity.ts';
import { PythonWorker } from '../../execution/python-worker.ts';
import type { MethodName } from './grid.ts';
import { WorkerResult } from './records.ts';

/** A started and admitted controls' worker (workflows/evaluation/worker.py), or RuntimeRefused. */
export async function startControlsWorker(settings: Settings): Promise<PythonWorker> {
  const worker = PythonWorker.spawn(settings, {}, 'workflows.evaluation.worker');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new RuntimeRefused(`the controls' worker did not answer within ${settings.helloTimeoutSeconds} s`)),
      settings.helloTimeoutSeconds * 1000,
    );
  });
  try {
    const hello = await Promise.race([worker.hello(), late]).catch((error: unknown) => {
      const said = worker.stderrTail().trim().split('\n').filter(Boolean).at(-1);
      throw new RuntimeRefused(
        `the Python runtime did not start the controls' worker: ${(error as Error).message.split('\n')[0]}` +
          `${said ? ` (its last words: ${said.slice(0, 300)})` : ''}; run 'npm run setup' to bring the runtime up to date`,
      );
    });
    const problems = admissionProblems(hello, {
      profile: settings.profile,
      expectedVersions: pinnedVersions(settings.runtime),
      codeSha256: workflowsSha256(),
    });
    if (problems.length) throw new RuntimeRefused(`the controls' worker was refused before it computed anything: ${problems.join('; ')}`);
    return worker;
  } catch (error) {
    worker.kill();
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** What the worker needs of one task: the surface (utilities by mask index), the method, budgets, seed, equivalences. */
export interface ControlRequest {
  width: number;
  utilities: readonly number[];
  method: MethodName;
  budgets: readonly number[];
  seed: number;
  equivalences: readonly { option: string; inactive_when: Record<string, number> }[];
}

/** One task computed by a controls' worker: one result per budget, ascending. */
export function computeControl(worker: PythonWorker, request: ControlRequest): Promise<WorkerResult[]> {
  return worker.call(z.array(WorkerResult), { op: 'controls', task: { ...request } });
}

/** The estimators an agent may name, fitted on observations (workflows/evaluation/estimators.py). */
export const ESTIMATORS = ['ridge_main', 'ridge_pair', 'gp'] as const;
export type EstimatorName = (typeof ESTIMATORS)[number];

export const FitResult = z.strictObject({
  estimator: z.enum(ESTIMATORS),
  /** Every mask's value, by index: clipped to [0, 1], observed masks at their utilities. */
  prediction: z.array(z.number()),
  parameters: z.record(z.string(), z.unknown()),
});
export type FitResult = z.infer<typeof FitResult>;

/** `estimator` fitted on `observations` ([mask, utility] in acquisition order) by a controls' worker. */
export function fitEstimator(
  worker: PythonWorker,
  request: { width: number; estimator: EstimatorName; observations: readonly (readonly [string, number])[] },
): Promise<FitResult> {
  return worker.call(FitResult, { op: 'fit', task: { ...request, observations: request.observations.map(([m, u]) => [m, u]) } });
}
