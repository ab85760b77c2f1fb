// The controls' methods on hand-made surfaces, computed by a real controls' worker of the pinned
// runtime (workflows/evaluation/): the rules of the spec that a surface can make visible — ties in
// the design and in the hyperparameter choices, nested acquisitions, the code-aware early stop.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../pipelines/core/settings.ts';
import type { PythonWorker } from '../../pipelines/execution/python-worker.ts';
import { computeControl, type ControlRequest, startControlsWorker } from '../../pipelines/evaluation/controls/worker.ts';
import type { WorkerResult } from '../../pipelines/evaluation/controls/records.ts';

let worker: PythonWorker;
beforeAll(async () => {
  worker = await startControlsWorker(loadSettings({}, process.env));
});
afterAll(async () => {
  await worker?.close();
});

const bit = (k: number, d: number, option: number) => (k >> (d - 1 - option)) & 1;
const weight = (k: number) => k.toString(2).replaceAll('0', '').length;
/** A surface with no symmetry: every mask a different value in [0.1, 0.9]. */
const irregular = (d: number, salt: number) => Array.from({ length: 2 ** d }, (_, k) => 0.1 + 0.8 * (((k * 37 + salt * 11) % 61) / 60));
const masksOf = (r: WorkerResult) => r.observations.map(([mask]) => mask);
const run = (request: Partial<ControlRequest> & Pick<ControlRequest, 'width' | 'utilities' | 'method' | 'budgets'>) =>
  computeControl(worker, { seed: 0, equivalences: [], ...request });

describe('greedy variance designs', () => {
  it('never look at utilities, are nested across budgets, buy distinct non-anchor masks, and break ties by the lowest index', async () => {
    for (const [width, method] of [
      [4, 'design_degree1'],
      [4, 'design_degree2'],
      [6, 'design_degree1'],
      [6, 'design_degree2'],
    ] as const) {
      const budgets = width === 4 ? [0, 4, 8, 14] : [0, 8, 20, 62];
      const a = await run({ width, utilities: irregular(width, 1), method, budgets });
      const b = await run({ width, utilities: irregular(width, 2), method, budgets });
      expect(a.map(masksOf)).toEqual(b.map(masksOf));
      const longest = masksOf(a.at(-1)!);
      expect(longest.slice(0, 2)).toEqual(['0'.repeat(width), '1'.repeat(width)]);
      expect(new Set(longest).size).toBe(longest.length);
      for (const r of a) {
        expect(r.actual_credits).toBe(r.budget);
        expect(masksOf(r)).toEqual(longest.slice(0, r.budget + 2));
      }
      // from the two anchors every mask of one weight scores the same (options are symmetric): the
      // first purchase is the lowest index of its weight, the one whose lowest bits are set
      const first = Number.parseInt(longest[2]!, 2);
      expect(first, `${method} on ${width} options`).toBe(2 ** weight(first) - 1);
    }
  });
});

describe('penalty and hyperparameter ties', () => {
  it('on a flat surface every penalty and every (lengthscale, nugget) fits exactly: ties go to the largest', async () => {
    const flat = Array.from({ length: 16 }, () => 0.5);
    for (const method of ['design_degree1', 'design_degree2', 'random_degree2'] as const) {
      for (const r of await run({ width: 4, utilities: flat, method, budgets: [0, 4, 8] })) {
        expect(r.alpha).toBe(10);
        expect(Object.values(r.loo_losses!)).toEqual([0, 0, 0, 0, 0]);
        expect(r.prediction).toEqual(flat);
      }
    }
    for (const method of ['gp_grid_variance', 'gp_effect_variance'] as const) {
      const [r] = await run({ width: 4, utilities: flat, method, budgets: [8] });
      expect(r!.final_parameters).toMatchObject({ lengthscale: 8, nugget: 0.3 });
      expect(r!.trajectory!.map((t) => [t.lengthscale, t.nugget])).toEqual(Array.from({ length: 8 }, () => [8, 0.3]));
      expect(r!.prediction.every((v) => Math.abs(v - 0.5) < 1e-12)).toBe(true);
    }
  });
});

describe('the random design', () => {
  it('buys the first B masks of one seeded order: nested across budgets, the same on every call, another order for another seed', async () => {
    const budgets = [0, 4, 8, 20, 62];
    const one = await run({ width: 6, utilities: irregular(6, 3), method: 'random_degree2', budgets, seed: 4 });
    const again = await run({ width: 6, utilities: irregular(6, 5), method: 'random_degree2', budgets, seed: 4 });
    const other = await run({ width: 6, utilities: irregular(6, 3), method: 'random_degree2', budgets, seed: 5 });
    expect(one.map(masksOf)).toEqual(again.map(masksOf));
    expect(masksOf(one.at(-1)!)).not.toEqual(masksOf(other.at(-1)!));
    const all = masksOf(one.at(-1)!);
    expect(new Set(all).size).toBe(64);
    for (const r of one) expect(masksOf(r)).toEqual(all.slice(0, r.budget + 2));
  });
});

describe('GP acquisitions', () => {
  it('record one trajectory step per purchase, in the order bought, with the parameters chosen before it', async () => {
    for (const method of ['gp_grid_variance', 'gp_effect_variance'] as const) {
      const results = await run({ width: 6, utilities: irregular(6, 7), method, budgets: [0, 8, 20] });
      const longest = results.at(-1)!;
      for (const r of results) {
        expect(r.trajectory!.map((t) => t.mask)).toEqual(masksOf(r).slice(2));
        expect(r.trajectory).toEqual(longest.trajectory!.slice(0, r.budget));
      }
      // the parameters chosen before the 9th purchase are the final ones of budget 8
      const eighth = longest.trajectory![8]!;
      expect(results[1]!.final_parameters).toEqual({
        lengthscale: eighth.lengthscale,
        nugget: eighth.nugget,
        observed_loo_mse: eighth.observed_loo_mse,
      });
    }
  });
});

describe('code-aware methods', () => {
  // F has no effect when A = 0, E none when B = 0 (as the astronaut__d6 plan declares)
  const equivalences: ControlRequest['equivalences'] = [
    { option: 'F', inactive_when: { A: 0 } },
    { option: 'E', inactive_when: { B: 0 } },
  ];
  const representative = (k: number) => {
    let m = k;
    if (bit(k, 6, 0) === 0) m &= ~1; // F := 0
    if (bit(k, 6, 1) === 0) m &= ~2; // E := 0
    return m;
  };
  const base = irregular(6, 9);
  const utilities = base.map((_, k) => base[representative(k)]!);
  const canonical = utilities.filter((_, k) => representative(k) === k).length;

  it('buy only canonical masks, stop when every one is known, and fill each equivalent mask with its observed value', async () => {
    for (const method of ['gp_code_effect_variance', 'code_canonical_design_degree1', 'code_canonical_design_degree2'] as const) {
      const [small, all] = await run({ width: 6, utilities, method, budgets: [8, 62], equivalences });
      expect(small!.actual_credits).toBe(8);
      expect(all!.budget).toBe(62);
      expect(all!.actual_credits, method).toBe(canonical - 2);
      for (const mask of masksOf(all!)) expect(representative(Number.parseInt(mask, 2))).toBe(Number.parseInt(mask, 2));
      expect(Object.keys(all!.code_inferred_observations!).length).toBe(64);
      expect(all!.prediction).toEqual(utilities);
      // a plain method buys equivalent masks as well, and runs its whole budget
      const [plain] = await run({ width: 6, utilities, method: 'gp_effect_variance', budgets: [62] });
      expect(plain!.actual_credits).toBe(62);
    }
  });
});
