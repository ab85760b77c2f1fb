// Grading a submitted prediction table against a reference surface: the benchmark's scorer, field by
// field, under its field names (README "Grading a prediction table" defines each).
//
// A prediction table maps every mask of the condition to a predicted utility in [0, 1]:
//   CSV  — a header with a `mask` column and one value column (`utility`, `prediction` or
//          `predicted_utility`), one row per mask; masks are written with their leading zeros.
//   JSON — an object {"0000": 0.41, …} or an array [{"mask": "0000", "utility": 0.41}, …].
// Input is strict: JSON by strict-json.ts (no repeated key however escaped, no NaN/Infinity),
// decimal numbers only, one value column, a bounded size, and a capped, summarised list of problems.
// Observations (masks the submitter measured, with or without their values) replace the predicted
// cells before scoring; an observed value that differs from the reference is an error.
import { extname } from 'node:path';
import { splitCsvLine } from '../core/tabular.ts';
import { UserError } from '../core/errors.ts';
import {
  ABSOLUTE_FLOOR,
  argmaxMask,
  conditionalEffects,
  groupByCondition,
  meanAbs,
  pairInteractions,
  surfaceFromRecords,
  type Surface,
} from './effects.ts';
import { ReferenceStore } from '../references/store.ts';
import { allMasks, maskIndex, maskString } from '../catalog/masks.ts';
import type { Settings } from '../core/settings.ts';
import { isObject, type Json, parseStrictJson, readBoundedText } from './strict-json.ts';

/** The strict-reconstruction tolerance of the benchmark: every effect error ≤ max(1e-12, 0.1 × true range). */
export const DEFAULT_TOLERANCE = 0.1;
/** A choice whose regret is at most this is near-optimal. */
export const NEAR_OPTIMAL_REGRET = 0.02;
/** A table or observation file larger than this is refused unread (a 64-mask table is about 2 KiB). */
export const MAX_TABLE_BYTES = 1 << 20;
/** At most this many problems are listed; the rest are counted by kind. */
export const MAX_LISTED_PROBLEMS = 20;
const VALUE_COLUMNS = ['utility', 'prediction', 'predicted_utility'];
const DECIMAL = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** Problems of one input, listed up to a cap and counted by kind beyond it. */
export class Problems {
  readonly listed: string[] = [];
  private readonly kinds = new Map<string, number>();
  count = 0;

  add(kind: string, message: string): void {
    this.count++;
    this.kinds.set(kind, (this.kinds.get(kind) ?? 0) + 1);
    if (this.listed.length < MAX_LISTED_PROBLEMS) this.listed.push(message);
  }

  /** Throws one UserError headed by `header` when there is any problem. */
  throwIfAny(header: string): void {
    if (!this.count) return;
    const items = this.listed.map((p) => `\n  - ${p}`);
    if (this.count > this.listed.length) {
      const kinds = [...this.kinds].map(([kind, n]) => `${n} ${kind}`).join(', ');
      items.push(`\n  - … ${this.count - this.listed.length} more problem(s) not listed (${this.count} in all: ${kinds})`);
    }
    throw new UserError(`${header} (${this.count} problem(s)):${items.join('')}`);
  }
}

/** One (mask, value) as written in the input, with where it was written. */
interface Entry {
  mask: string;
  value: Json | undefined;
  where: string;
}

function isJsonFile(file: string, text: string): boolean {
  const ext = extname(file).toLowerCase();
  if (ext === '.json') return true;
  if (ext === '.csv') return false;
  return /^\s*[[{]/.test(text);
}

/** A mask key's problem against the condition's width, or undefined when it is a mask of that width. */
function maskProblem(mask: string, dimensions: number): string | undefined {
  if (!/^[01]+$/.test(mask))
    return `unknown mask '${mask.length > 40 ? `${mask.slice(0, 40)}…` : mask}' (a mask is a string of ${dimensions} 0/1 characters)`;
  if (mask.length !== dimensions)
    return `mask '${mask}' has the wrong width: ${mask.length} characters, the condition has ${dimensions} options`;
  return undefined;
}

function csvEntries(text: string, what: string): Entry[] {
  const lines = text
    .split(/\r?\n/)
    .map((line, k) => ({ line, number: k + 1 }))
    .filter((l) => l.line.trim() !== '');
  const header = lines.shift();
  if (!header) throw new UserError(`${what} is empty`);
  const names = splitCsvLine(header.line).map((h) => h.trim().toLowerCase());
  const repeated = names.filter((n, k) => n !== '' && names.indexOf(n) !== k);
  if (repeated.length) throw new UserError(`${what}: the CSV header repeats column(s) ${[...new Set(repeated)].join(', ')}`);
  const valueColumns = names.filter((n) => VALUE_COLUMNS.includes(n));
  if (valueColumns.length > 1)
    throw new UserError(`${what}: the CSV header has several value columns (${valueColumns.join(', ')}); keep exactly one`);
  const maskCol = names.indexOf('mask');
  const valueCol = names.indexOf(valueColumns[0] ?? '');
  if (maskCol < 0 || valueCol < 0) {
    throw new UserError(
      `${what}: the CSV header needs a 'mask' column and one '${VALUE_COLUMNS.join("'/'")}' column (got: ${header.line.trim().slice(0, 200)})`,
    );
  }
  return lines.map(({ line, number }) => {
    const cells = splitCsvLine(line);
    const raw = (cells[valueCol] ?? '').trim();
    // CSV values are text: only a decimal number is a number (no 0x1, inf, nan or empty cell)
    return { mask: (cells[maskCol] ?? '').trim(), value: DECIMAL.test(raw) ? Number(raw) : raw, where: `line ${number}` };
  });
}

/** The entries of a JSON table: an object mask → value, or an array of {mask, <one value key>}. */
function jsonEntries(json: Json, what: string): Entry[] {
  if (Array.isArray(json)) {
    const used = new Set<string>();
    const entries = json.map((item, k): Entry => {
      if (!isObject(item)) throw new UserError(`${what}: item ${k} is not an object {"mask": …, "utility": …}`);
      const keys = Object.keys(item);
      const values = keys.filter((key) => VALUE_COLUMNS.includes(key));
      const others = keys.filter((key) => key !== 'mask' && !VALUE_COLUMNS.includes(key));
      if (values.length > 1) throw new UserError(`${what}: item ${k} has several value keys (${values.join(', ')}); keep exactly one`);
      if (others.length)
        throw new UserError(
          `${what}: item ${k} has unknown key(s) ${others.map((o) => JSON.stringify(o)).join(', ')} (an item is {"mask": …, "utility": …})`,
        );
      if (typeof item.mask !== 'string') throw new UserError(`${what}: item ${k} has no "mask" string`);
      if (values[0]) used.add(values[0]);
      return { mask: item.mask, value: values[0] ? item[values[0]] : undefined, where: `item ${k}` };
    });
    if (used.size > 1) throw new UserError(`${what}: the items mix value keys (${[...used].join(', ')}); use one`);
    return entries;
  }
  if (!isObject(json))
    throw new UserError(`${what}: expected an object mapping masks to utilities, or an array of {"mask", "utility"} items`);
  return Object.entries(json).map(([mask, value]) => ({
    mask,
    value,
    where: `key "${mask.length > 40 ? `${mask.slice(0, 40)}…` : mask}"`,
  }));
}

/**
 * A prediction table as utilities indexed by mask integer: exactly one decimal value in [0, 1] for
 * every mask of width `dimensions`. `json` is an already parsed table (a record's prediction_table).
 */
export function predictionFromJson(json: Json, dimensions: number, what: string): number[] {
  return predictionFromEntries(jsonEntries(json, what), dimensions, what);
}

function predictionFromEntries(entries: Entry[], dimensions: number, what: string): number[] {
  const size = 2 ** dimensions;
  // a table is its masks: far more entries is no table of this condition, refused without a list
  if (entries.length > 2 * size)
    throw new UserError(`${what} holds ${entries.length} entries; a ${dimensions}-option table has ${size} masks`);
  const values = new Array<number | undefined>(size).fill(undefined);
  const firstSeen = new Map<string, string>();
  const problems = new Problems();
  const present = new Set(entries.map((e) => e.mask));
  const missing = allMasks(dimensions).filter((m) => !present.has(m));
  if (missing.length)
    problems.add(
      'missing',
      `missing mask(s): ${missing.length > 8 ? `${missing.slice(0, 8).join(', ')}, … (${missing.length} in all)` : missing.join(', ')}`,
    );
  for (const { mask, value, where } of entries) {
    const bad = maskProblem(mask, dimensions);
    if (bad) {
      problems.add('bad mask(s)', `${where}: ${bad}`);
      continue;
    }
    const seen = firstSeen.get(mask);
    if (seen) {
      problems.add('duplicate mask(s)', `${where}: duplicate mask ${mask} (also at ${seen})`);
      continue;
    }
    firstSeen.set(mask, where);
    if (typeof value !== 'number')
      problems.add(
        'non-numbers',
        `${where}: the value of mask ${mask} is not a decimal number (${value === undefined ? 'missing' : JSON.stringify(value).slice(0, 40)})`,
      );
    else if (!Number.isFinite(value)) problems.add('non-finite values', `${where}: non-finite value ${value} for mask ${mask}`);
    else if (value < 0 || value > 1)
      problems.add('out-of-range values', `${where}: value ${value} for mask ${mask} is out of range [0, 1]`);
    else values[maskIndex(mask, dimensions)] = value;
  }
  problems.throwIfAny(`${what} is invalid for a ${dimensions}-option condition (${size} masks)`);
  return values as number[];
}

/** Reads and validates a prediction table file (CSV or JSON). */
export function readPredictionTable(file: string, dimensions: number): number[] {
  const what = `prediction table ${file}`;
  const text = readBoundedText(file, 'prediction table', MAX_TABLE_BYTES);
  if (isJsonFile(file, text)) return predictionFromJson(parseStrictJson(text, what), dimensions, what);
  return predictionFromEntries(csvEntries(text, what), dimensions, what);
}

/** A measured mask, with the utility the submitter was given when it says so. */
export interface Observation {
  mask: string;
  utility?: number;
}

/**
 * Observations as JSON: an array of masks, an object mask → utility, or an array of {mask, utility}.
 * Every mask once, of the condition's width; a utility is a finite number.
 */
export function observationsFromJson(json: Json, dimensions: number, what: string): Observation[] {
  let entries: Entry[];
  if (Array.isArray(json) && json.every((m) => typeof m === 'string'))
    entries = json.map((mask, k) => ({ mask: mask as string, value: undefined, where: `item ${k}` }));
  else if (Array.isArray(json)) {
    entries = json.map((item, k) => {
      if (!isObject(item) || typeof item.mask !== 'string' || Object.keys(item).some((key) => key !== 'mask' && key !== 'utility')) {
        throw new UserError(`${what}: item ${k} is not a mask or an object {"mask": …, "utility": …}`);
      }
      return { mask: item.mask, value: item.utility, where: `item ${k}` };
    });
  } else if (isObject(json)) entries = Object.entries(json).map(([mask, value]) => ({ mask, value, where: `key "${mask}"` }));
  else throw new UserError(`${what}: expected masks, an object mask → utility or an array of {"mask", "utility"}`);
  if (entries.length > 2 ** dimensions)
    throw new UserError(`${what} holds ${entries.length} observations; a ${dimensions}-option condition has ${2 ** dimensions} masks`);
  const problems = new Problems();
  const seen = new Set<string>();
  const observations: Observation[] = [];
  for (const { mask, value, where } of entries) {
    const bad = maskProblem(mask, dimensions);
    if (bad) problems.add('bad mask(s)', `${where}: ${bad}`);
    else if (seen.has(mask)) problems.add('duplicate mask(s)', `${where}: duplicate mask ${mask}`);
    else if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value)))
      problems.add('non-numbers', `${where}: the utility of mask ${mask} is not a number`);
    else observations.push(value === undefined ? { mask } : { mask, utility: value as number });
    seen.add(mask);
  }
  problems.throwIfAny(`${what} is invalid`);
  return observations;
}

/** Reads observations: JSON (see observationsFromJson), or masks separated by commas, spaces or lines. */
export function readObservations(file: string, dimensions: number): Observation[] {
  const what = `observed list ${file}`;
  const text = readBoundedText(file, 'observed list', MAX_TABLE_BYTES);
  if (isJsonFile(file, text)) return observationsFromJson(parseStrictJson(text, what), dimensions, what);
  const masks = text
    .split(/[\s,]+/)
    .map((s) => s.replace(/^"|"$/g, ''))
    .filter((s) => s !== '' && s.toLowerCase() !== 'mask');
  return observationsFromJson(masks, dimensions, what);
}

/** Each observation whose utility differs from the reference, as `mask: observed x, reference y`. */
export function observationMismatches(
  reference: Surface,
  observations: readonly Observation[],
): { mask: string; observed: number; reference: number }[] {
  return observations.flatMap(({ mask, utility }) => {
    const truth = reference.utilities[maskIndex(mask, reference.dimensions)]!;
    return utility === undefined || utility === truth ? [] : [{ mask, observed: utility, reference: truth }];
  });
}

/** Comma-separated tolerances, e.g. "0.05,0.1"; each must be a finite number > 0. */
export function parseTolerances(text: string | undefined): number[] {
  if (text === undefined || text.trim() === '') return [];
  return text.split(',').map((part) => {
    const tau = Number(part.trim());
    if (!DECIMAL.test(part.trim()) || !Number.isFinite(tau) || tau <= 0)
      throw new UserError(`--tolerances: '${part.trim()}' is not a positive number`);
    return tau;
  });
}

export interface StrictScore {
  tau: number;
  /** max(1e-12, τ × true utility range). */
  threshold: number;
  /** Every |Δ_pred − Δ_true| ≤ threshold. */
  passed: boolean;
}

/** The benchmark's score fields, then what helps a reader. */
export interface GradeResult {
  condition: string;
  dimensions: number;
  /** Masks whose predicted cells were replaced by their measured (= reference) values. */
  observed: string[];
  /** Mean |Δ_pred − Δ_true| over the d·2^(d−1) conditional effects. */
  effect_mae: number;
  /** Mean |J_pred − J_true| over the d(d−1)/2 pair interactions. */
  interaction_mae: number;
  /** Mean |pred − true| over the 2^d cells. */
  grid_mae: number;
  /** max(0, 1 − effect_mae / A); for A ≤ 1e-12: 1 if effect_mae ≤ 1e-12 else 0. */
  effect_recovery: number;
  /** True maximum − true utility of the selected mask. */
  support_regret: number;
  /** The predicted maximum; ties: fewer enabled options, then lexicographic order. */
  selected_mask: string;
  /** support_regret ≤ 1e-12. */
  exact_optimal_choice: boolean;
  /** support_regret ≤ 0.02. */
  near_optimal_choice: boolean;
  /** Every effect error ≤ max(1e-12, 0.1 × true range). */
  strict_effect_reconstruction: boolean;
  /** A = mean |Δ_true|. */
  mean_absolute_true_edge_effect: number;
  true_utility_range: number;
  n_effect_contrasts: number;
  n_interaction_contrasts: number;
  /** The table scored: mask → value, observed cells replaced. */
  prediction_table: Record<string, number>;
  true_maximum: number;
  selected_true_utility: number;
  /** Every mask within 1e-12 of the true maximum (any of them is an exact choice), and their count. */
  reference_optima: string[];
  n_reference_optima: number;
  max_effect_error: number;
  /** Strict reconstruction at τ = 0.1 and at every extra τ asked for, ascending. */
  strict_tolerances: StrictScore[];
}

export function recoveryScore(effectMae: number, amplitude: number): number {
  if (amplitude <= ABSOLUTE_FLOOR) return effectMae <= ABSOLUTE_FLOOR ? 1 : 0;
  return Math.max(0, 1 - effectMae / amplitude);
}

/** Scores predicted utilities (indexed by mask integer) against a reference surface. */
export function gradeSurface(
  reference: Surface,
  predicted: readonly number[],
  options: { observed?: readonly string[]; tolerances?: readonly number[] } = {},
): GradeResult {
  const { dimensions, utilities: u } = reference;
  if (predicted.length !== u.length)
    throw new UserError(`prediction has ${predicted.length} values, condition ${reference.condition} has ${u.length} masks`);
  const observed = [...new Set(options.observed ?? [])].sort();
  const values = [...predicted];
  for (const mask of observed) {
    const k = maskIndex(mask, dimensions);
    if (k < 0) throw new UserError(`observed mask '${mask}' is not a mask of condition ${reference.condition}`);
    values[k] = u[k]!;
  }
  const prediction: Surface = { ...reference, utilities: values };

  const trueEffects = conditionalEffects(reference).map((e) => e.effect);
  const errors = conditionalEffects(prediction).map((e, k) => Math.abs(e.effect - trueEffects[k]!));
  const truePairs = pairInteractions(reference).map((p) => p.interaction);
  const pairErrors = pairInteractions(prediction).map((p, k) => p.interaction - truePairs[k]!);
  const effectMae = meanAbs(errors);
  const amplitude = meanAbs(trueEffects);
  const trueMax = Math.max(...u);
  const range = trueMax - Math.min(...u);
  const selected = argmaxMask(values);
  const regret = trueMax - u[selected]!;
  const optima = allMasks(dimensions).filter((_, k) => trueMax - u[k]! <= ABSOLUTE_FLOOR);
  const strict = (tau: number): StrictScore => {
    const threshold = Math.max(ABSOLUTE_FLOOR, tau * range);
    return { tau, threshold, passed: errors.every((e) => e <= threshold) };
  };
  const taus = [...new Set([DEFAULT_TOLERANCE, ...(options.tolerances ?? [])])].sort((a, b) => a - b);
  return {
    condition: reference.condition,
    dimensions,
    observed,
    effect_mae: effectMae,
    interaction_mae: meanAbs(pairErrors),
    grid_mae: meanAbs(values.map((v, k) => v - u[k]!)),
    effect_recovery: recoveryScore(effectMae, amplitude),
    support_regret: regret,
    selected_mask: maskString(selected, dimensions),
    exact_optimal_choice: regret <= ABSOLUTE_FLOOR,
    near_optimal_choice: regret <= NEAR_OPTIMAL_REGRET,
    strict_effect_reconstruction: strict(DEFAULT_TOLERANCE).passed,
    mean_absolute_true_edge_effect: amplitude,
    true_utility_range: range,
    n_effect_contrasts: errors.length,
    n_interaction_contrasts: pairErrors.length,
    prediction_table: Object.fromEntries(values.map((v, k) => [maskString(k, dimensions), v])),
    true_maximum: trueMax,
    selected_true_utility: u[selected]!,
    reference_optima: optima,
    n_reference_optima: optima.length,
    max_effect_error: Math.max(0, ...errors),
    strict_tolerances: taus.map(strict),
  };
}

/** The reference surface of one condition, read through the store. */
export function referenceSurface(settings: Settings, condition: string, referencesDir?: string): Surface {
  const [records] = groupByCondition(new ReferenceStore(referencesDir ?? settings.paths.references, settings.paths).records([condition]));
  if (!records) throw new UserError(`reference table of condition '${condition}' has no records`);
  return surfaceFromRecords(records);
}

/** Scores a table against `reference` with observations, refusing an observation that is not the reference's value. */
export function gradeWithObservations(
  reference: Surface,
  predicted: readonly number[],
  observations: readonly Observation[],
  tolerances?: readonly number[],
): GradeResult {
  const wrong = observationMismatches(reference, observations);
  if (wrong.length) {
    const first = wrong[0]!;
    throw new UserError(
      `${wrong.length} observation(s) differ from the reference of ${reference.condition}: ` +
        `mask ${first.mask} observed ${first.observed}, reference ${first.reference}${
          wrong.length > 1
            ? ` (also ${wrong
                .slice(1, 6)
                .map((w) => w.mask)
                .join(', ')}${wrong.length > 6 ? ', …' : ''})`
            : ''
        }`,
    );
  }
  return gradeSurface(reference, predicted, { observed: observations.map((o) => o.mask), tolerances });
}

export interface GradeOptions {
  condition: string;
  table: string;
  observed?: string;
  tolerances?: readonly number[];
  referencesDir?: string;
}

/** `wwref grade`: the reference surface from the manifest's table, the prediction from a file. */
export function gradeFile(settings: Settings, options: GradeOptions): GradeResult & { table: string } {
  const reference = referenceSurface(settings, options.condition, options.referencesDir);
  const predicted = readPredictionTable(options.table, reference.dimensions);
  const observations = options.observed ? readObservations(options.observed, reference.dimensions) : [];
  return { table: options.table, ...gradeWithObservations(reference, predicted, observations, options.tolerances) };
}

/** The readable summary `wwref grade` writes on stderr. */
export function gradeSummaryLines(r: GradeResult): string[] {
  const f = (x: number) => x.toPrecision(6);
  const optima =
    r.n_reference_optima > 4
      ? `${r.reference_optima.slice(0, 4).join(', ')}, … (${r.n_reference_optima} tied)`
      : r.reference_optima.join(', ');
  return [
    `${r.condition}: ${2 ** r.dimensions} masks${r.observed.length ? `, ${r.observed.length} observed cell(s) replaced by the measured values` : ''}`,
    `  effect_mae ${f(r.effect_mae)}  (A ${f(r.mean_absolute_true_edge_effect)})  effect_recovery ${f(r.effect_recovery)}`,
    `  interaction_mae ${f(r.interaction_mae)}  grid_mae ${f(r.grid_mae)}  max effect error ${f(r.max_effect_error)}`,
    `  selected ${r.selected_mask} (reference optima ${optima})  support_regret ${f(r.support_regret)} ` +
      ` exact ${r.exact_optimal_choice ? 'yes' : 'no'}  near ${r.near_optimal_choice ? 'yes' : 'no'}`,
    ...r.strict_tolerances.map((s) => `  strict reconstruction at τ=${s.tau} (threshold ${f(s.threshold)}): ${s.passed ? 'PASS' : 'fail'}`),
  ];
}
