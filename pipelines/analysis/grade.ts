// Grading a submitted prediction table against a reference surface.
//
// A prediction table maps every mask of the condition to a predicted utility in [0, 1]:
//   CSV  — a header with a `mask` column and a `utility` column (aliases: `prediction`,
//          `predicted_utility`), one row per mask; masks are written with their leading zeros.
//   JSON — an object {"0000": 0.41, …} or an array [{"mask": "0000", "utility": 0.41}, …].
// With an observed list (masks the submitter measured), those cells are replaced by the reference
// utilities before scoring: measured cells are authoritative, only the rest is prediction.
// An observed list is a JSON array of masks or text with masks separated by commas/whitespace/lines
// (an optional `mask` header line is ignored).
import { readFileSync, statSync } from 'node:fs';
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

export const DEFAULT_TOLERANCE = 0.1;
const UTILITY_COLUMNS = ['utility', 'prediction', 'predicted_utility'];

/** One (mask, raw value) entry as written in the file, with where it was written. */
interface Entry {
  mask: string;
  value: unknown;
  where: string;
}

function readText(file: string, what: string): string {
  try {
    // a FIFO or a device would be waited on or read without end: only regular files are read
    const stats = statSync(file, { throwIfNoEntry: false });
    if (stats && !stats.isFile()) throw new UserError(`${what} ${file} is not a regular file`);
    return readFileSync(file, 'utf8');
  } catch (error) {
    if (error instanceof UserError) throw error;
    throw new UserError(`cannot read ${what} ${file}: ${(error as Error).message}`);
  }
}

function looksLikeJson(file: string, text: string): boolean {
  const ext = extname(file).toLowerCase();
  if (ext === '.json') return true;
  if (ext === '.csv') return false;
  return /^\s*[[{]/.test(text);
}

function csvEntries(file: string, text: string): Entry[] {
  const lines = text
    .split(/\r?\n/)
    .map((l, k) => ({ line: l, number: k + 1 }))
    .filter((l) => l.line.trim() !== '');
  const header = lines.shift();
  if (!header) throw new UserError(`prediction table ${file} is empty`);
  const names = splitCsvLine(header.line).map((h) => h.toLowerCase());
  const maskCol = names.indexOf('mask');
  const valueCol = names.findIndex((n) => UTILITY_COLUMNS.includes(n));
  if (maskCol < 0 || valueCol < 0) {
    throw new UserError(
      `prediction table ${file}: the CSV header needs a 'mask' column and a '${UTILITY_COLUMNS.join("'/'")}' column (got: ${header.line.trim()})`,
    );
  }
  return lines.map(({ line, number }) => {
    const cells = splitCsvLine(line);
    const raw = cells[valueCol] ?? '';
    // CSV values are text: an empty cell or nan/inf is read as the non-finite number it means.
    return {
      mask: cells[maskCol] ?? '',
      value: raw === '' ? Number.NaN : Number(raw.replace(/^([+-]?)inf$/i, '$1Infinity')),
      where: `line ${number}`,
    };
  });
}

function jsonEntries(file: string, text: string): Entry[] {
  // Python's json.dumps writes bare NaN/Infinity, which JSON.parse rejects: read them as strings so
  // the problem is reported as a non-finite value rather than as a syntax error.
  const patched = text.replace(/([:[,]\s*)(-?Infinity|NaN)(?=\s*[,}\]])/g, '$1"$2"');
  let json: unknown;
  try {
    json = JSON.parse(patched);
  } catch (error) {
    throw new UserError(`prediction table ${file} is not valid JSON: ${(error as Error).message}`);
  }
  if (Array.isArray(json)) {
    return json.map((row, k) => {
      if (typeof row !== 'object' || row === null || Array.isArray(row))
        throw new UserError(`prediction table ${file}: item ${k} is not an object {"mask": …, "utility": …}`);
      const r = row as Record<string, unknown>;
      const key = UTILITY_COLUMNS.find((c) => c in r);
      return { mask: String(r.mask ?? ''), value: key ? r[key] : undefined, where: `item ${k}` };
    });
  }
  if (typeof json !== 'object' || json === null)
    throw new UserError(`prediction table ${file}: expected an object mapping masks to utilities`);
  // JSON.parse keeps only the last of repeated keys; count the keys in the text to catch duplicates.
  // The table is a flat object whose values are numbers, so every "…": in it is a key.
  const counts = new Map<string, number>();
  for (const m of patched.matchAll(/"((?:[^"\\]|\\.)*)"\s*:/g)) counts.set(m[1]!, (counts.get(m[1]!) ?? 0) + 1);
  const entries: Entry[] = [];
  for (const [mask, value] of Object.entries(json)) {
    for (let k = 0; k < (counts.get(mask) ?? 1); k++) entries.push({ mask, value, where: `key "${mask}"` });
  }
  return entries;
}

function asNumber(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'string' && /^[+-]?(NaN|Infinity)$/.test(value)) return Number(value);
  return undefined;
}

function listProblems(problems: string[]): string {
  return problems.map((p) => `\n  - ${p}`).join('');
}

function abbreviate(items: string[], max = 8): string {
  return items.length > max ? `${items.slice(0, max).join(', ')}, … (${items.length} in all)` : items.join(', ');
}

/** Problems of one mask string against the condition's width, or undefined when it is valid. */
function maskProblem(mask: string, dimensions: number): string | undefined {
  if (!/^[01]+$/.test(mask)) return `unknown mask '${mask}' (a mask is a string of ${dimensions} 0/1 characters)`;
  if (mask.length !== dimensions)
    return `mask '${mask}' has the wrong width: ${mask.length} characters, the condition has ${dimensions} options`;
  return undefined;
}

/**
 * Reads and validates a prediction table: exactly one finite value in [0, 1] for every mask of width
 * `dimensions`. Every problem found is listed in one UserError.
 */
export function readPredictionTable(file: string, dimensions: number): number[] {
  const text = readText(file, 'prediction table');
  const entries = looksLikeJson(file, text) ? jsonEntries(file, text) : csvEntries(file, text);
  const size = 2 ** dimensions;
  const values = new Array<number | undefined>(size).fill(undefined);
  const firstSeen = new Map<string, string>();
  const problems: string[] = [];
  for (const { mask, value, where } of entries) {
    const bad = maskProblem(mask, dimensions);
    if (bad) {
      problems.push(`${where}: ${bad}`);
      continue;
    }
    const seen = firstSeen.get(mask);
    if (seen) {
      problems.push(`${where}: duplicate mask ${mask} (also at ${seen})`);
      continue;
    }
    firstSeen.set(mask, where);
    const x = asNumber(value);
    if (x === undefined) problems.push(`${where}: the value of mask ${mask} is not a number (${JSON.stringify(value) ?? 'missing'})`);
    else if (!Number.isFinite(x)) problems.push(`${where}: non-finite value ${x} for mask ${mask}`);
    else if (x < 0 || x > 1) problems.push(`${where}: value ${x} for mask ${mask} is out of range [0, 1]`);
    else values[maskIndex(mask, dimensions)] = x;
  }
  const missing = allMasks(dimensions).filter((m) => !firstSeen.has(m));
  if (missing.length) problems.unshift(`missing mask(s): ${abbreviate(missing)}`);
  if (problems.length) {
    throw new UserError(
      `prediction table ${file} is invalid for a ${dimensions}-option condition (${size} masks):${listProblems(problems)}`,
    );
  }
  return values as number[];
}

/** Reads a list of observed masks (JSON array, or masks separated by commas, spaces or lines). */
export function readObservedMasks(file: string, dimensions: number): string[] {
  const text = readText(file, 'observed list');
  let items: string[];
  if (looksLikeJson(file, text)) {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw new UserError(`observed list ${file} is not valid JSON: ${(error as Error).message}`);
    }
    if (!Array.isArray(json) || !json.every((m) => typeof m === 'string'))
      throw new UserError(`observed list ${file}: expected a JSON array of mask strings`);
    items = json;
  } else {
    items = text
      .split(/[\s,]+/)
      .map((s) => s.replace(/^"|"$/g, ''))
      .filter((s) => s !== '' && s.toLowerCase() !== 'mask');
  }
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const mask of items) {
    const bad = maskProblem(mask, dimensions);
    if (bad) problems.push(bad);
    else if (seen.has(mask)) problems.push(`duplicate mask ${mask}`);
    seen.add(mask);
  }
  if (problems.length) throw new UserError(`observed list ${file} is invalid:${listProblems(problems)}`);
  return items;
}

/** Comma-separated tolerances, e.g. "0.05,0.1"; each must be a finite number > 0. */
export function parseTolerances(text: string | undefined): number[] {
  if (text === undefined || text.trim() === '') return [];
  return text.split(',').map((part) => {
    const tau = Number(part.trim());
    if (part.trim() === '' || !Number.isFinite(tau) || tau <= 0)
      throw new UserError(`--tolerances: '${part.trim()}' is not a positive number`);
    return tau;
  });
}

export interface StrictScore {
  tau: number;
  /** max(1e-12, τ × response range). */
  threshold: number;
  /** Every |Δ_pred − Δ_ref| ≤ threshold. */
  passed: boolean;
}

export interface GradeResult {
  condition: string;
  dimensions: number;
  masks: number;
  observed: string[];
  /** E_t: mean |Δ_pred − Δ_ref| over all conditional effects. */
  effect_mae: number;
  /** A_t of the reference. */
  mean_abs_effect: number;
  /** R_t = max(0, 1 − E_t/A_t); on a flat reference (A_t ≤ 1e-12): 1 if E_t ≤ 1e-12 else 0. */
  recovery: number;
  max_effect_error: number;
  pair_interaction_mae: number;
  grid_mae: number;
  response_range: number;
  selected_mask: string;
  selected_reference_utility: number;
  reference_optimum: string;
  reference_optimum_utility: number;
  /** u(reference optimum) − u(selected mask), in reference utilities. */
  regret: number;
  exact_optimum: boolean;
  strict: StrictScore[];
}

export function recoveryScore(effectMae: number, meanAbsEffect: number): number {
  if (meanAbsEffect <= ABSOLUTE_FLOOR) return effectMae <= ABSOLUTE_FLOOR ? 1 : 0;
  return Math.max(0, 1 - effectMae / meanAbsEffect);
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
  const observed = [...(options.observed ?? [])];
  const values = [...predicted];
  for (const mask of observed) {
    const k = maskIndex(mask, dimensions);
    values[k] = u[k]!;
  }
  const prediction: Surface = { ...reference, utilities: values };

  const refEffects = conditionalEffects(reference).map((e) => e.effect);
  const errors = conditionalEffects(prediction).map((e, k) => Math.abs(e.effect - refEffects[k]!));
  const refPairs = pairInteractions(reference).map((p) => p.interaction);
  const pairErrors = pairInteractions(prediction).map((p, k) => p.interaction - refPairs[k]!);
  const effectMae = meanAbs(errors);
  const meanAbsEffect = meanAbs(refEffects);
  const range = Math.max(...u) - Math.min(...u);
  const maxError = Math.max(0, ...errors);

  const selected = argmaxMask(values);
  const optimum = argmaxMask(u);
  // τ = 0.1 always, plus every requested tolerance, each once, ascending.
  const taus = [...new Set([DEFAULT_TOLERANCE, ...(options.tolerances ?? [])])].sort((a, b) => a - b);
  return {
    condition: reference.condition,
    dimensions,
    masks: u.length,
    observed,
    effect_mae: effectMae,
    mean_abs_effect: meanAbsEffect,
    recovery: recoveryScore(effectMae, meanAbsEffect),
    max_effect_error: maxError,
    pair_interaction_mae: meanAbs(pairErrors),
    grid_mae: meanAbs(values.map((v, k) => v - u[k]!)),
    response_range: range,
    selected_mask: maskString(selected, dimensions),
    selected_reference_utility: u[selected]!,
    reference_optimum: maskString(optimum, dimensions),
    reference_optimum_utility: u[optimum]!,
    regret: u[optimum]! - u[selected]!,
    exact_optimum: selected === optimum,
    strict: taus.map((tau) => {
      const threshold = Math.max(ABSOLUTE_FLOOR, tau * range);
      return { tau, threshold, passed: errors.every((e) => e <= threshold) };
    }),
  };
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
  const [records] = groupByCondition(
    new ReferenceStore(options.referencesDir ?? settings.paths.references, settings.paths).records([options.condition]),
  );
  if (!records) throw new UserError(`reference table of condition '${options.condition}' has no records`);
  const reference = surfaceFromRecords(records);
  const predicted = readPredictionTable(options.table, reference.dimensions);
  const observed = options.observed ? readObservedMasks(options.observed, reference.dimensions) : [];
  return { table: options.table, ...gradeSurface(reference, predicted, { observed, tolerances: options.tolerances }) };
}

/** The readable summary `wwref grade` writes on stderr. */
export function gradeSummaryLines(r: GradeResult): string[] {
  const f = (x: number) => x.toPrecision(6);
  return [
    `${r.condition}: ${r.masks} masks${r.observed.length ? `, ${r.observed.length} observed cell(s) replaced by the reference` : ''}`,
    `  effect MAE E_t ${f(r.effect_mae)}  (A_t ${f(r.mean_abs_effect)})  recovery R_t ${f(r.recovery)}`,
    `  pair-interaction MAE ${f(r.pair_interaction_mae)}  grid MAE ${f(r.grid_mae)}  max effect error ${f(r.max_effect_error)}`,
    `  selected ${r.selected_mask} (reference optimum ${r.reference_optimum})  regret ${f(r.regret)}  exact optimum ${r.exact_optimum ? 'yes' : 'no'}`,
    ...r.strict.map((s) => `  strict reconstruction at τ=${s.tau} (threshold ${f(s.threshold)}): ${s.passed ? 'PASS' : 'fail'}`),
  ];
}
