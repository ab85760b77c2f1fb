// The sandbox's plain-Python helpers (wwref_helpers.py), run INSIDE the sandbox, against the NumPy
// reference of the numerical-controls specification (test/support/controls_reference.py) run by the
// pinned runtime: tables within 1e-12, the same chosen penalty, the same designed masks, over random
// surfaces of 4 and 6 options and many budgets.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { runPython } from '../../pipelines/execution/launcher.ts';
import { runCalculation } from '../../pipelines/evaluation/sandbox/calculation.ts';
import { seededRandom } from '../support/random.ts';

interface TableCase {
  width: number;
  degree: number;
  observations: [number, number][];
}
interface DesignCase {
  width: number;
  degree: number;
  chosen: number[];
  count: number;
}
interface SequenceCase {
  width: number;
  degree: number;
  chosen: number[];
  sequence: number[];
}
interface OrderCase {
  width: number;
  method: string;
  budget: number;
}
type Case = TableCase | DesignCase | SequenceCase | OrderCase;
interface TableResult {
  alpha: number;
  observed_loo_mse: number;
  losses: number[];
  table: number[];
}

function reference(cases: Case[]): ({ design: number[] } | TableResult)[] {
  const script = join(ROOT, 'test', 'support', 'controls_reference.py');
  const result = runPython(loadSettings({}, process.env), [script], { input: JSON.stringify({ cases }) });
  return JSON.parse(String(result.stdout)).results;
}

/** The same cases through wwref_helpers inside the sandbox (the cases are the evidence). */
async function inSandbox(cases: Case[]): Promise<({ design: number[] } | TableResult)[]> {
  const code = `
import json
import wwref_helpers as h
out = []
for case in evidence["cases"]:
    w, d = case["width"], case["degree"]
    if "observations" in case:
        obs = [(h.mask_string(k, w), v) for k, v in case["observations"]]
        r = h.ridge_table(obs, d)
        out.append({"alpha": r["alpha"], "observed_loo_mse": r["observed_loo_mse"],
                    "losses": [r["loo_losses"][repr(a)] for a in h.PENALTIES],
                    "table": [r["predictions"][h.mask_string(k, w)] for k in range(2 ** w)]})
    else:
        chosen = [h.mask_string(k, w) for k in case["chosen"]]
        out.append({"design": [h.mask_index(m) for m in h.greedy_design(w, d, chosen, case["count"])]})
print(json.dumps({"results": out}))
`;
  const receipt = await runCalculation({
    code,
    evidence: { cases },
    limits: { cpuSeconds: 600, wallSeconds: 900, outputBytes: 8 * 1024 * 1024 },
  });
  expect(receipt.stderr).toBe('');
  expect(receipt.status).toBe('ok');
  return JSON.parse(receipt.stdout).results;
}

/** A surface with main and pair effects plus noise (clipped), or plain uniform noise. */
function surface(width: number, random: ReturnType<typeof seededRandom>): number[] {
  const structured = random.next() < 0.7;
  const main = Array.from({ length: width }, () => random.normal() * 0.1);
  const pair = Array.from({ length: width * width }, () => (random.next() < 0.4 ? random.normal() * 0.05 : 0));
  return Array.from({ length: 2 ** width }, (_, k) => {
    if (!structured) return random.next();
    const coded = Array.from({ length: width }, (_, i) => ((k >> (width - 1 - i)) & 1 ? 1 : -1));
    let u = 0.6 + random.normal() * 0.02;
    for (let i = 0; i < width; i++) {
      u += main[i]! * coded[i]!;
      for (let j = i + 1; j < width; j++) u += pair[i * width + j]! * coded[i]! * coded[j]!;
    }
    return Math.min(1, Math.max(0, u));
  });
}

/** Anchors first, then `budget` other masks in a seeded random order. */
function order(width: number, budget: number, random: ReturnType<typeof seededRandom>): number[] {
  const rest = Array.from({ length: 2 ** width - 2 }, (_, i) => i + 1);
  for (let i = rest.length - 1; i > 0; i--) {
    const j = random.int(0, i);
    [rest[i], rest[j]] = [rest[j]!, rest[i]!];
  }
  return [0, 2 ** width - 1, ...rest.slice(0, budget)];
}

describe('wwref_helpers in the sandbox agree with the NumPy reference', () => {
  it('ridge tables (degree 1 and 2): the same penalty; every table value and the chosen loss within 1e-12 (1e-9 at penalty 1e-5)', async () => {
    const random = seededRandom(30);
    const cases: TableCase[] = [];
    for (const [width, budgets] of [
      [4, [0, 1, 2, 4, 8, 14]],
      [6, [0, 4, 8, 14, 20, 32, 62]],
    ] as const) {
      for (const budget of budgets)
        for (const degree of [1, 2])
          for (let surfaces = 0; surfaces < 3; surfaces++) {
            const u = surface(width, random);
            cases.push({ width, degree, observations: order(width, budget, random).map((k) => [k, u[k]!]) });
          }
    }
    // ties among the leave-one-out losses: a flat surface gives the same loss to every penalty
    cases.push({ width: 4, degree: 2, observations: order(4, 6, random).map((k) => [k, 0.5]) });
    const [expected, actual] = [reference(cases), await inSandbox(cases)];
    expect(actual).toHaveLength(cases.length);
    cases.forEach((c, i) => {
      const want = expected[i] as TableResult;
      const got = actual[i] as TableResult;
      const label = `case ${i}: ${c.width} options, degree ${c.degree}, ${c.observations.length} observations`;
      expect(got.alpha, label).toBe(want.alpha);
      // losses relative to their size: an unchosen penalty's loss can be large
      got.losses.forEach((loss, a) => {
        expect(Math.abs(loss - want.losses[a]!), label).toBeLessThanOrEqual(1e-10 * Math.max(1, Math.abs(want.losses[a]!)));
      });
      expect(got.table).toHaveLength(2 ** c.width);
      const diff = Math.max(...got.table.map((v, k) => Math.abs(v - want.table[k]!)));
      // Where the smallest penalty (1e-5) is chosen (few observations, many columns) the system's
      // condition number reaches about 1e7 and amplifies both sides' rounding (measured up to 2e-10):
      // 1e-9 there.
      const tolerance = got.alpha === 1e-5 ? 1e-9 : 1e-12;
      expect(diff, label).toBeLessThanOrEqual(tolerance);
      expect(Math.abs(got.observed_loo_mse - want.observed_loo_mse), label).toBeLessThanOrEqual(tolerance);
    });
    // the comparison compared something: several penalties chosen, most cases held to 1e-12
    expect(new Set(actual.map((r) => (r as TableResult).alpha)).size).toBeGreaterThan(2);
    expect(actual.filter((r) => (r as TableResult).alpha !== 1e-5).length).toBeGreaterThan(cases.length / 2);
  });

  it("ridge tables on the published grid's observation orders (greedy designs, seeded random orders): the same penalty, within 1e-12 (1e-9 at penalty 1e-5)", async () => {
    const random = seededRandom(32);
    const grid: OrderCase[] = [];
    for (const [width, budgets] of [
      [4, [0, 4, 8, 14]],
      [6, [0, 4, 8, 14, 20, 32, 62]],
    ] as const)
      for (const budget of budgets)
        for (const method of ['design_degree1', 'design_degree2', 'random_degree2:0', 'random_degree2:7', 'random_degree2:19'])
          grid.push({ width, method, budget });
    const orders = (reference(grid) as unknown as { order: number[] }[]).map((r) => r.order);
    const cases: TableCase[] = grid.map((g, i) => {
      const u = surface(g.width, random);
      return { width: g.width, degree: g.method === 'design_degree1' ? 1 : 2, observations: orders[i]!.map((k) => [k, u[k]!]) };
    });
    const [expected, actual] = [reference(cases), await inSandbox(cases)];
    cases.forEach((c, i) => {
      const want = expected[i] as TableResult;
      const got = actual[i] as TableResult;
      const label = `${grid[i]!.method}, ${c.width} options, budget ${grid[i]!.budget}`;
      expect(got.alpha, label).toBe(want.alpha);
      const tolerance = got.alpha === 1e-5 ? 1e-9 : 1e-12;
      expect(Math.max(...got.table.map((v, k) => Math.abs(v - want.table[k]!))), label).toBeLessThanOrEqual(tolerance);
      expect(Math.abs(got.observed_loo_mse - want.observed_loo_mse), label).toBeLessThanOrEqual(tolerance);
    });
  });

  it('greedy variance designs: degree 1 the very masks NumPy buys; degree 2 every purchase the lowest-index maximiser of NumPy scores', async () => {
    const random = seededRandom(31);
    const cases: DesignCase[] = [];
    for (const degree of [1, 2]) {
      cases.push({ width: 4, degree, chosen: [0, 15], count: 14 });
      cases.push({ width: 6, degree, chosen: [0, 63], count: 62 });
      for (let r = 0; r < 4; r++) {
        const width = random.pick([4, 6]);
        const chosen = order(width, random.int(0, 6), random);
        cases.push({ width, degree, chosen, count: random.int(1, 2 ** width - chosen.length) });
      }
    }
    const [expected, actual] = [reference(cases), await inSandbox(cases)];
    const designs = actual.map((r) => (r as { design: number[] }).design);
    // Degree 1: the very masks NumPy buys.
    cases.forEach((c, i) => {
      if (c.degree === 1) expect(designs[i], `case ${i}`).toEqual((expected[i] as { design: number[] }).design);
    });
    // Degree 2: masks equal by symmetry get scores that differ by rounding noise larger than the
    // 10-decimal rounding (scores reach 1e3), so NumPy's pick among them follows its BLAS's noise. The
    // helper's every pick must be a maximiser of NumPy's own scores along the helper's design (to 1e-9
    // relative), the lowest index among them.
    const checks = reference(
      cases.map((c, i) => ({ width: c.width, degree: c.degree, chosen: c.chosen, sequence: designs[i]! })),
    ) as unknown as { steps: { score: number; top: number; near: number[] }[] }[];
    cases.forEach((c, i) => {
      expect(designs[i], `case ${i}`).toHaveLength(Math.min(c.count, 2 ** c.width - c.chosen.length));
      checks[i]!.steps.forEach((step, t) => {
        expect(step.near[0], `case ${i}, purchase ${t}`).toBe(designs[i]![t]);
      });
    });
    // every exhaustive design bought every other mask exactly once
    for (const i of [1, 7]) expect([...designs[i]!].sort((a, b) => a - b)).toEqual(Array.from({ length: 62 }, (_, k) => k + 1));
  });
});
