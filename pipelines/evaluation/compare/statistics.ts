// Comparing methods (agents' cohorts, controls, published agent records) on the cells they share.
// A comparison cell is one (track, budget): its conditions are those every method has at least one
// row of at that budget; rows of other conditions are listed as not shared, never averaged in. In a
// cell each method's value is its family-macro effect recovery (repeats within a source, sources
// within a family, families equally weighted: controls/summary.ts), and every interval comes from one
// source bootstrap (cohort/summary.ts) whose draws are the same for every method and every pair, so a
// difference's interval is paired: two identical methods differ by exactly 0 on every draw.
import { familyMacro, groupBy } from '../controls/summary.ts';
import { BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, macroOfDraw, sourceBootstrap, sourceMeans } from '../cohort/summary.ts';

/** One scored run of a method: an agent's episode, a control's record (one seed), a published agent record. */
export interface MethodRow {
  condition: string;
  instance: string;
  family: string;
  track: string;
  budget: number;
  /** Effect recovery (an undelivered episode: 0, the benchmark's undelivered score). */
  recovery: number;
  delivered: boolean;
}

export type MethodKind = 'cohort' | 'control' | 'published';

export interface Method {
  name: string;
  kind: MethodKind;
  /** Where its rows were read (a cohort folder, a controls folder, a records file). */
  from: string;
  rows: MethodRow[];
}

export interface MethodInCell {
  recovery: number;
  interval: [number, number];
  /** 1 = best in the cell; methods with equal recovery share the better rank. */
  rank: number;
  rows: number;
  delivered_rate: number;
}

export interface PairDifference {
  a: string;
  b: string;
  /** a − b, family-macro. */
  difference: number;
  interval: [number, number];
}

export interface ComparisonCell {
  track: string;
  budget: number;
  conditions: string[];
  sources: number;
  families: number;
  methods: Record<string, MethodInCell>;
  differences: PairDifference[];
  /** Method names, best first. */
  ranking: string[];
}

export interface NotShared {
  method: string;
  condition: string;
  budget: number;
  rows: number;
  /** Which methods have no row of this condition and budget. */
  missing_from: string[];
}

export interface ConditionRow {
  condition: string;
  instance: string;
  family: string;
  track: string;
  budget: number;
  /** Each method's mean recovery over its rows of this condition and budget (shared cells only). */
  recovery: Record<string, number>;
  rows: Record<string, number>;
}

export interface Comparison {
  methods: { name: string; kind: MethodKind; from: string; rows: number }[];
  cells: ComparisonCell[];
  not_shared: NotShared[];
  /** Mean rank over the cells, best first (ties keep the methods' order). */
  ranking: { method: string; mean_rank: number; cells: number }[];
  conditions: ConditionRow[];
  bootstrap: { unit: 'source'; resamples: number; seed: number; interval: string };
}

const cellKey = (r: { condition: string; budget: number }) => JSON.stringify([r.condition, r.budget]);
const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Ranks of `values` (higher is better), ties sharing the better rank: [0.5, 0.7, 0.5] → [2, 1, 2]. */
function ranks(values: readonly number[]): number[] {
  return values.map((v) => 1 + values.filter((w) => w > v).length);
}

/** The comparison cell of one (track, budget) over `conditions`, every method restricted to them. */
function comparisonCell(methods: readonly Method[], track: string, budget: number, conditions: readonly string[]): ComparisonCell {
  const shared = new Set(conditions);
  const rowsOf = methods.map((m) => m.rows.filter((r) => r.budget === budget && shared.has(r.condition)));
  const all = rowsOf.flat();
  const sources = [...new Set(all.map((r) => r.instance))].sort(byText);
  const means = rowsOf.map((rows) => sourceMeans(rows, (r) => r.recovery));
  const pairs: [number, number][] = [];
  for (let i = 0; i < methods.length; i++) for (let j = i + 1; j < methods.length; j++) pairs.push([i, j]);
  const intervals = sourceBootstrap(sources, [
    ...means.map((m) => (draw: readonly string[]) => macroOfDraw(m, draw)),
    ...pairs.map(
      ([i, j]) =>
        (draw: readonly string[]) =>
          macroOfDraw(means[i]!, draw) - macroOfDraw(means[j]!, draw),
    ),
  ]);
  const recovery = rowsOf.map((rows) => familyMacro(rows, (r) => r.recovery));
  const rank = ranks(recovery);
  return {
    track,
    budget,
    conditions: [...conditions],
    sources: sources.length,
    families: new Set(all.map((r) => r.family)).size,
    methods: Object.fromEntries(
      methods.map((m, k) => [
        m.name,
        {
          recovery: recovery[k]!,
          interval: intervals[k]!,
          rank: rank[k]!,
          rows: rowsOf[k]!.length,
          delivered_rate: rowsOf[k]!.filter((r) => r.delivered).length / rowsOf[k]!.length,
        },
      ]),
    ),
    differences: pairs.map(([i, j], k) => ({
      a: methods[i]!.name,
      b: methods[j]!.name,
      difference: recovery[i]! - recovery[j]!,
      interval: intervals[methods.length + k]!,
    })),
    ranking: methods
      .map((m, k) => ({ name: m.name, rank: rank[k]! }))
      .sort((x, y) => x.rank - y.rank)
      .map((x) => x.name),
  };
}

/** Every method's rows of conditions and budgets some other method lacks. */
function notShared(methods: readonly Method[], sharedKeys: ReadonlySet<string>): NotShared[] {
  const haveOf = methods.map((m) => new Set(m.rows.map(cellKey)));
  const out: NotShared[] = [];
  for (const [k, m] of methods.entries())
    for (const [key, rows] of groupBy(m.rows, cellKey))
      if (!sharedKeys.has(key))
        out.push({
          method: m.name,
          condition: rows[0]!.condition,
          budget: rows[0]!.budget,
          rows: rows.length,
          missing_from: methods.filter((_, j) => j !== k && !haveOf[j]!.has(key)).map((o) => o.name),
        });
  return out.sort((a, b) => byText(a.method, b.method) || byText(a.condition, b.condition) || a.budget - b.budget);
}

/** The per-condition table of the shared cells (the report's drill-down). */
function conditionRows(methods: readonly Method[], sharedKeys: ReadonlySet<string>): ConditionRow[] {
  const rows: ConditionRow[] = [];
  for (const key of [...sharedKeys].sort()) {
    const ofMethods = methods.map((m) => m.rows.filter((r) => cellKey(r) === key));
    const first = ofMethods[0]![0]!;
    rows.push({
      condition: first.condition,
      instance: first.instance,
      family: first.family,
      track: first.track,
      budget: first.budget,
      recovery: Object.fromEntries(
        methods.map((m, k) => [m.name, ofMethods[k]!.reduce((a, r) => a + r.recovery, 0) / ofMethods[k]!.length]),
      ),
      rows: Object.fromEntries(methods.map((m, k) => [m.name, ofMethods[k]!.length])),
    });
  }
  return rows.sort((a, b) => byText(a.condition, b.condition) || a.budget - b.budget);
}

/** Compares `methods` (at least two, distinct names) on the cells they share. */
export function compareMethods(methods: readonly Method[]): Comparison {
  const keySets = methods.map((m) => new Set(m.rows.map(cellKey)));
  const sharedKeys = new Set([...keySets[0]!].filter((key) => keySets.every((s) => s.has(key))));
  const sharedRows = methods[0]!.rows.filter((r) => sharedKeys.has(cellKey(r)));
  const cells = [...groupBy(sharedRows, (r) => JSON.stringify([r.track, r.budget])).values()]
    .map((rows) => {
      const conditions = [...new Set(rows.map((r) => r.condition))].sort(byText);
      return comparisonCell(methods, rows[0]!.track, rows[0]!.budget, conditions);
    })
    .sort((a, b) => byText(a.track, b.track) || a.budget - b.budget);
  const ranking = methods
    .map((m) => {
      const got = cells.map((c) => c.methods[m.name]!.rank);
      return { method: m.name, mean_rank: got.reduce((a, b) => a + b, 0) / Math.max(1, got.length), cells: got.length };
    })
    .sort((a, b) => a.mean_rank - b.mean_rank);
  return {
    methods: methods.map((m) => ({ name: m.name, kind: m.kind, from: m.from, rows: m.rows.length })),
    cells,
    not_shared: notShared(methods, sharedKeys),
    ranking,
    conditions: conditionRows(methods, sharedKeys),
    bootstrap: { unit: 'source', resamples: BOOTSTRAP_RESAMPLES, seed: BOOTSTRAP_SEED, interval: 'percentile 2.5 to 97.5' },
  };
}
