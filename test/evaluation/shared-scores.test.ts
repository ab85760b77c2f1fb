// Shared-estimator scores: the controls' estimators refitted on given observations. Refitted on a
// control's own observations, each gives that control's table and score to the bit (one implementation).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gradeSurface, referenceSurface } from '../../pipelines/analysis/grade.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import type { PythonWorker } from '../../pipelines/execution/python-worker.ts';
import { computeControl, fitEstimator, startControlsWorker } from '../../pipelines/evaluation/controls/worker.ts';
import { sharedScores } from '../../pipelines/evaluation/shared-scores.ts';

const settings = loadSettings({}, process.env);
let worker: PythonWorker;
beforeAll(async () => {
  worker = await startControlsWorker(settings);
});
afterAll(async () => {
  await worker?.close();
});

describe('shared-estimator scores', () => {
  it("refitted on a control's observations, each estimator gives the control's table and score", async () => {
    for (const condition of ['wine', 'spambase__d6']) {
      const surface = referenceSurface(settings, condition);
      const budgets = surface.dimensions === 4 ? [4, 8] : [8, 20];
      for (const [method, field] of [
        ['design_degree1', 'shared_degree1_score'],
        ['design_degree2', 'shared_degree2_score'],
        ['gp_effect_variance', 'shared_gp_score'],
      ] as const) {
        const results = await computeControl(worker, {
          width: surface.dimensions,
          utilities: surface.utilities,
          method,
          budgets,
          seed: 0,
          equivalences: [],
        });
        for (const control of results) {
          const own = gradeSurface(surface, control.prediction, { observed: control.observations.map(([m]) => m) });
          const shared = await sharedScores(worker, surface, control.observations, own.effect_recovery);
          expect(shared[field].prediction_table, `${condition} ${method} B=${control.budget}`).toEqual(own.prediction_table);
          expect(shared[field].effect_recovery).toBe(own.effect_recovery);
          const gain = { shared_degree1_score: 'degree1', shared_degree2_score: 'degree2', shared_gp_score: 'gp' } as const;
          expect(shared.recovery_gain_over_shared![gain[field]]).toBe(0);
        }
      }
    }
  });

  it('an estimator needs two distinct observations of the condition width', async () => {
    await expect(fitEstimator(worker, { width: 4, estimator: 'ridge_pair', observations: [['0000', 0.5]] })).rejects.toThrow(
      /at least two observations/,
    );
    await expect(
      fitEstimator(worker, {
        width: 4,
        estimator: 'gp',
        observations: [
          ['0000', 0.5],
          ['0000', 0.5],
        ],
      }),
    ).rejects.toThrow(/distinct masks of 4 options/);
    // the worker goes on serving after a refused request
    const ok = await fitEstimator(worker, {
      width: 4,
      estimator: 'ridge_main',
      observations: [
        ['0000', 0.2],
        ['1111', 0.8],
      ],
    });
    expect(ok.prediction).toHaveLength(16);
    expect(ok.prediction[0]).toBe(0.2);
    expect(ok.prediction[15]).toBe(0.8);
  });
});
