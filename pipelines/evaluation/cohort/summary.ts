// The cohort's summaries: one cell per (condition, budget) and one family-macro cell per (track,
// budget), each beside the numerical controls of the same conditions and budgets and the shared GP
// refitted on the agent's own observations, with the gains (agent − control, agent − shared GP).
// Undelivered episodes count with a recovery of 0. Family-macro is the controls' (controls/summary.ts:
// repeats within a source, sources within a family, families equally weighted); its intervals are
// source-bootstrap percentiles: the sources are drawn with replacement (a fixed seed), the macro
// average recomputed on each draw, agent and controls on the same draws (so a gain's interval is
// paired), and the 2.5th and 97.5th percentiles taken.
import { UserError } from '../../core/errors.ts';
import { familyMacro, groupBy, mean, sampleSd } from '../controls/summary.ts';
import type { StoredRecord } from '../controls/records.ts';
import type { PlannedEpisode } from './plan.ts';
import type { StoredResult } from './results.ts';

export const BOOTSTRAP_RESAMPLES = 2000;
export const BOOTSTRAP_SEED = 20260907;
const LEVEL = 0.95;

export interface CohortCell {
  condition: string;
  instance: string;
  family: string;
  track: string;
  budget: number;
  /** Episodes the cohort plans in this cell (its repeats). */
  planned: number;
  /** Episodes the cell holds (verified results lines). */
  episodes: number;
  delivered: number;
  /** The planned episodes it does not hold, and why. */
  left_out: LeftOut[];
  /** null: the cell holds no episode. */
  recovery_mean: number | null;
  recovery_sample_sd: number | null;
  mean_credits: number | null;
  shared_gp_recovery: number | null;
  gain_over_shared_gp: number | null;
  /** The controls' mean recovery in this cell, by method (seeds averaged). */
  controls: Record<string, number>;
  gain_over_controls: Record<string, number | null>;
}

export interface MacroControl {
  recovery: number;
  gain: number;
  gain_interval: [number, number];
}

export interface CohortMacroCell {
  track: string;
  budget: number;
  families: number;
  sources: number;
  episodes: number;
  delivered_rate: number;
  recovery: number;
  recovery_interval: [number, number];
  shared_gp_recovery: number;
  gain_over_shared_gp: number;
  gain_over_shared_gp_interval: [number, number];
  controls: Record<string, MacroControl>;
}

/** A small seeded generator (mulberry32): the same draws on every machine. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The q-quantile of sorted values, interpolated linearly between neighbours (NumPy's default). */
function quantile(sorted: readonly number[], q: number): number {
  const at = (sorted.length - 1) * q;
  const low = Math.floor(at);
  const high = Math.min(low + 1, sorted.length - 1);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (at - low);
}

/** A source's family and its mean over its repeats: what a family-macro average needs of it. */
export interface SourceMean {
  family: string;
  mean: number;
}

/** Each source's family and mean of `value` over its items (the first two steps of family-macro). */
export function sourceMeans<T extends { family: string; instance: string }>(
  items: readonly T[],
  value: (item: T) => number,
): Map<string, SourceMean> {
  return new Map(
    [...groupBy(items, (r) => r.instance)].map(([source, group]) => [source, { family: group[0]!.family, mean: mean(group.map(value)) }]),
  );
}

/**
 * The family-macro average of the drawn sources (a source drawn twice counts as two sources of its
 * family): the means of the sources within a family, then the families with equal weight.
 */
export function macroOfDraw(means: ReadonlyMap<string, SourceMean>, draw: readonly string[]): number {
  const families = new Map<string, number[]>();
  for (const source of draw) {
    const s = means.get(source);
    if (!s) continue;
    const list = families.get(s.family);
    if (list) list.push(s.mean);
    else families.set(s.family, [s.mean]);
  }
  return mean([...families.values()].map(mean));
}

/**
 * Percentile intervals of several statistics over the same source draws: each draw takes as many
 * sources as there are, with replacement.
 */
export function sourceBootstrap(
  sources: readonly string[],
  statistics: readonly ((draw: readonly string[]) => number)[],
  resamples = BOOTSTRAP_RESAMPLES,
  seed = BOOTSTRAP_SEED,
): [number, number][] {
  const random = generator(seed);
  const values: number[][] = statistics.map(() => []);
  for (let r = 0; r < resamples; r++) {
    const draw = sources.map(() => sources[Math.floor(random() * sources.length)]!);
    for (const [k, stat] of statistics.entries()) values[k]!.push(stat(draw));
  }
  const tail = (1 - LEVEL) / 2;
  return values.map((v) => {
    const sorted = [...v].sort((a, b) => a - b);
    return [quantile(sorted, tail), quantile(sorted, 1 - tail)];
  });
}

const sharedGp = (r: StoredResult) => r.shared_gp_score.effect_recovery;

/** An episode of the plan that the summaries do not hold, and why. */
export interface LeftOut {
  episode: string;
  reason: string;
}

const short = (sha: string) => `${sha.slice(0, 12)}…`;

/** Refuses a cell whose episodes or controls were computed on more than one reference table, naming both. */
function checkOneReference(
  cell: string,
  planned: PlannedEpisode['condition']['reference'],
  results: readonly StoredResult[],
  controls: readonly StoredRecord[],
): void {
  const other = results.find((r) => r.reference.table_sha256 !== planned.table_sha256 || r.reference.plan_sha256 !== planned.plan_sha256);
  if (other)
    throw new UserError(
      `the cell ${cell} would mix two reference tables: ${other.episode} on ${short(other.reference.table_sha256)}, the cohort's ${short(planned.table_sha256)}; refused`,
    );
  for (const record of controls) {
    const reference = (record as { reference?: { table_sha256?: unknown } }).reference;
    if (reference !== undefined && reference.table_sha256 !== planned.table_sha256)
      throw new UserError(
        `the cell ${cell} would mix two reference tables: its ${record.method} controls on ${short(String(reference.table_sha256))}, the agent's episodes on ${short(planned.table_sha256)}; refused`,
      );
  }
}

/**
 * One cell per planned (condition, budget), ordered by condition and budget: how many episodes were
 * planned and are held, which were left out and why; a cell without any episode has no recovery (null).
 */
export function cohortCells(
  planned: readonly PlannedEpisode[],
  results: readonly StoredResult[],
  controls: readonly StoredRecord[],
  leftOut: readonly LeftOut[] = [],
): CohortCell[] {
  const key = (condition: string, budget: number) => JSON.stringify([condition, budget]);
  const controlsOf = groupBy(controls, (r) => key(r.condition, r.budget));
  const resultsOf = groupBy(results, (r) => key(r.condition, r.budget));
  const out = new Set(leftOut.map((l) => l.episode));
  return [...groupBy(planned, (p) => key(p.condition.id, p.budget)).entries()]
    .map(([cellKey, plans]): CohortCell => {
      const { condition: c, budget } = plans[0]!;
      const group = resultsOf.get(cellKey) ?? [];
      const mine = controlsOf.get(cellKey) ?? [];
      checkOneReference(`${c.id} B=${budget}`, c.reference, group, mine);
      const byMethod = groupBy(mine, (r) => r.method);
      const control = Object.fromEntries([...byMethod].map(([m, rs]) => [m, mean(rs.map((r) => r.score.effect_recovery))]));
      const held = group.length > 0;
      const recovery = held ? mean(group.map((r) => r.effect_recovery)) : null;
      const gp = held ? mean(group.map(sharedGp)) : null;
      return {
        condition: c.id,
        instance: c.instance,
        family: c.family,
        track: c.track,
        budget,
        planned: plans.length,
        episodes: group.length,
        delivered: group.filter((r) => r.artifact_valid).length,
        left_out: leftOut.filter((l) => out.has(l.episode) && plans.some((p) => p.id === l.episode)),
        recovery_mean: recovery,
        recovery_sample_sd: held ? sampleSd(group.map((r) => r.effect_recovery)) : null,
        mean_credits: held ? mean(group.map((r) => r.credits_spent)) : null,
        shared_gp_recovery: gp,
        gain_over_shared_gp: recovery === null || gp === null ? null : recovery - gp,
        controls: control,
        gain_over_controls: Object.fromEntries(Object.entries(control).map(([m, v]) => [m, recovery === null ? null : recovery - v])),
      };
    })
    .sort((a, b) => (a.condition < b.condition ? -1 : a.condition > b.condition ? 1 : a.budget - b.budget));
}

/** One family-macro cell per (track, budget), with source-bootstrap intervals. */
export function cohortMacroCells(results: readonly StoredResult[], controls: readonly StoredRecord[]): CohortMacroCell[] {
  const cells: CohortMacroCell[] = [];
  for (const group of groupBy(results, (r) => JSON.stringify([r.track, r.budget])).values()) {
    const { track, budget } = group[0]!;
    const conditions = new Set(group.map((r) => r.condition));
    const mine = controls.filter((r) => r.budget === budget && conditions.has(r.condition));
    const methods = [...new Set(mine.map((r) => r.method))].sort();
    const sources = [...new Set(group.map((r) => r.instance))].sort();
    const agent = sourceMeans(group, (r) => r.effect_recovery);
    const gpMeans = sourceMeans(group, sharedGp);
    const controlMeans = methods.map((m) =>
      sourceMeans(
        mine.filter((r) => r.method === m),
        (r) => r.score.effect_recovery,
      ),
    );
    const intervals = sourceBootstrap(sources, [
      (draw) => macroOfDraw(agent, draw),
      (draw) => macroOfDraw(agent, draw) - macroOfDraw(gpMeans, draw),
      ...controlMeans.map((means) => (draw: readonly string[]) => macroOfDraw(agent, draw) - macroOfDraw(means, draw)),
    ]);
    const recovery = familyMacro(group, (r) => r.effect_recovery);
    const gp = familyMacro(group, sharedGp);
    cells.push({
      track,
      budget,
      families: new Set(group.map((r) => r.family)).size,
      sources: sources.length,
      episodes: group.length,
      delivered_rate: group.filter((r) => r.artifact_valid).length / group.length,
      recovery,
      recovery_interval: intervals[0]!,
      shared_gp_recovery: gp,
      gain_over_shared_gp: recovery - gp,
      gain_over_shared_gp_interval: intervals[1]!,
      controls: Object.fromEntries(
        methods.map((m, k) => {
          const control = familyMacro(
            mine.filter((r) => r.method === m),
            (r) => r.score.effect_recovery,
          );
          return [m, { recovery: control, gain: recovery - control, gain_interval: intervals[2 + k]! }];
        }),
      ),
    });
  }
  return cells.sort((a, b) => (a.track < b.track ? -1 : a.track > b.track ? 1 : a.budget - b.budget));
}

/** Cells as flat CSV rows: one column per control and per gain. */
export function flatCells(cells: readonly (CohortCell | CohortMacroCell)[]): Record<string, unknown>[] {
  return cells.map((cell) => {
    const row: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(cell)) {
      if (key === 'controls') {
        for (const [method, c] of Object.entries(value as Record<string, number | MacroControl>)) {
          if (typeof c === 'number') row[`control_${method}`] = c;
          else {
            row[`control_${method}`] = c.recovery;
            row[`gain_over_${method}`] = c.gain;
            row[`gain_over_${method}_low`] = c.gain_interval[0];
            row[`gain_over_${method}_high`] = c.gain_interval[1];
          }
        }
      } else if (key === 'left_out') {
        const list = value as LeftOut[];
        row.left_out = list.length;
        row.left_out_episodes = list.map((l) => `${l.episode}: ${l.reason}`).join('; ');
      } else if (key === 'gain_over_controls') {
        for (const [method, g] of Object.entries(value as Record<string, number | null>)) row[`gain_over_${method}`] = g;
      } else if (Array.isArray(value)) {
        row[`${key.replace(/_interval$/, '')}_low`] = value[0];
        row[`${key.replace(/_interval$/, '')}_high`] = value[1];
      } else row[key] = value;
    }
    return row;
  });
}
