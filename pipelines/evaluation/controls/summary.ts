// Summaries of control records (or of any records in the benchmark's form): one cell per (condition,
// method, budget) with the published cell's fields, and the family-macro average per (track, method,
// budget): records averaged within a source (the random design's seeds), sources within a family,
// then families with equal weight.
import { UserError } from '../../core/errors.ts';
import { csvFloat, csvQuote } from '../../core/tabular.ts';
import { recordIdentity, type StoredRecord } from './records.ts';

/** A record left out of a cell, and why (verify.ts). */
export interface LeftOut {
  record: string;
  why: string;
}

export interface SummaryCell {
  condition: string;
  method: string;
  budget: number;
  records: number;
  mean_credits: number;
  recovery_mean: number;
  /** n − 1 denominator; null for one record. */
  recovery_sample_sd: number | null;
  effect_mae: number;
  interaction_mae: number;
  grid_mae: number;
  support_regret: number;
  exact_count: number;
  strict_count: number;
  /** Records of this cell read but not counted (a second copy of one), each with why. */
  left_out: LeftOut[];
}

export interface MacroCell {
  track: string;
  method: string;
  budget: number;
  families: number;
  sources: number;
  records: number;
  recovery: number;
  exact_rate: number;
  strict_rate: number;
  effect_mae: number;
  support_regret: number;
}

export const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Sample standard deviation (n − 1), of the values shifted by the first: equal values give exactly 0. */
export function sampleSd(xs: readonly number[]): number | null {
  if (xs.length < 2) return null;
  const shifted = xs.map((x) => x - xs[0]!);
  const m = mean(shifted);
  return Math.sqrt(shifted.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
}

export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The reference table a record names (undefined: none, as the benchmark's records). */
const tableOf = (r: StoredRecord) => (r as { reference?: { table_sha256?: unknown } }).reference?.table_sha256;

/** Refuses (UserError) a cell whose records name two reference tables: numbers of two tables never make one mean. */
function checkOneReference(group: readonly StoredRecord[]): void {
  const first = group.find((r) => tableOf(r) !== undefined);
  const other = first && group.find((r) => tableOf(r) !== undefined && tableOf(r) !== tableOf(first));
  if (first && other)
    throw new UserError(
      `the records of ${first.condition} ${first.method} at budget ${first.budget} name two reference tables: ` +
        `${String(tableOf(first)).slice(0, 12)} (${first.read_from}) and ${String(tableOf(other)).slice(0, 12)} (${other.read_from}); a cell is of one table`,
    );
}

/**
 * One cell per (condition, method, budget), ordered by condition, budget and method; `leftOut` (by
 * recordIdentity) says which records of a cell were read and not counted, and why.
 */
export function summaryCells(
  records: readonly StoredRecord[],
  leftOut: ReadonlyMap<string, readonly LeftOut[]> = new Map(),
): SummaryCell[] {
  const cells = [...groupBy(records, (r) => JSON.stringify([r.condition, r.method, r.budget])).values()].map((group): SummaryCell => {
    checkOneReference(group);
    const { condition, method, budget } = group[0]!;
    const recovery = group.map((r) => r.score.effect_recovery);
    return {
      condition,
      method,
      budget,
      records: group.length,
      mean_credits: mean(group.map((r) => r.actual_credits)),
      recovery_mean: mean(recovery),
      recovery_sample_sd: sampleSd(recovery),
      effect_mae: mean(group.map((r) => r.score.effect_mae)),
      interaction_mae: mean(group.map((r) => r.score.interaction_mae)),
      grid_mae: mean(group.map((r) => r.score.grid_mae)),
      support_regret: mean(group.map((r) => r.score.support_regret)),
      exact_count: group.filter((r) => r.score.exact_optimal_choice).length,
      strict_count: group.filter((r) => r.score.strict_effect_reconstruction).length,
      left_out: group.flatMap((r) => leftOut.get(recordIdentity(r)) ?? []),
    };
  });
  return cells.sort((a, b) => byName(a.condition, b.condition) || a.budget - b.budget || byName(a.method, b.method));
}

/** The family-macro average of `value` over records: within a source, within a family, across families. */
export function familyMacro<T extends { family: string; instance: string }>(records: readonly T[], value: (r: T) => number): number {
  const families = [...groupBy(records, (r) => r.family).values()].map((ofFamily) =>
    mean([...groupBy(ofFamily, (r) => r.instance).values()].map((ofSource) => mean(ofSource.map(value)))),
  );
  return mean(families);
}

/** One macro cell per (track, method, budget), ordered by track, method and budget. */
export function macroCells(records: readonly StoredRecord[]): MacroCell[] {
  const cells = [...groupBy(records, (r) => JSON.stringify([r.track, r.method, r.budget])).values()].map((group): MacroCell => {
    const { track, method, budget } = group[0]!;
    for (const cell of groupBy(group, (r) => r.condition).values()) checkOneReference(cell);
    return {
      track,
      method,
      budget,
      families: new Set(group.map((r) => r.family)).size,
      sources: new Set(group.map((r) => r.instance)).size,
      records: group.length,
      recovery: familyMacro(group, (r) => r.score.effect_recovery),
      exact_rate: familyMacro(group, (r) => Number(r.score.exact_optimal_choice)),
      strict_rate: familyMacro(group, (r) => Number(r.score.strict_effect_reconstruction)),
      effect_mae: familyMacro(group, (r) => r.score.effect_mae),
      support_regret: familyMacro(group, (r) => r.score.support_regret),
    };
  });
  return cells.sort((a, b) => byName(a.track, b.track) || byName(a.method, b.method) || a.budget - b.budget);
}

/** Fields that hold whole numbers: written as integers, as summary.json and the published summary write them. */
const COUNTS = new Set(['budget', 'records', 'exact_count', 'strict_count', 'families', 'sources']);

/** Rows of objects as CSV (the first row's keys are the header); other numbers written to round-trip. */
export function cellsCsv(rows: readonly object[], moreCounts: readonly string[] = []): string {
  if (!rows.length) return '';
  const header = Object.keys(rows[0]!);
  const value = (field: string, v: unknown) =>
    v === null
      ? ''
      : typeof v === 'number'
        ? COUNTS.has(field) || moreCounts.includes(field)
          ? String(v)
          : csvFloat(v)
        : csvQuote(String(v));
  return `${[header.join(','), ...rows.map((row) => header.map((h) => value(h, (row as Record<string, unknown>)[h])).join(','))].join('\n')}\n`;
}
