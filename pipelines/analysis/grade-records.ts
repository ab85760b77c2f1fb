// Scoring stored records in bulk (`wwref grade --records FILE.jsonl`): every line is one submission,
// {condition and/or instance, observations, prediction_table (or score.prediction_table), score?, reference?}.
// Each is scored again against the references; its observations are checked against them and a stored score is compared key by key
// (every benchmark field must be there). A record carries no budget: its observations are not held to one.
// A malformed line is a user error (exit 2) naming it; a difference is reported, naming the record
// and the field, and makes the command exit 1.
import { closeSync, readSync } from 'node:fs';
import { openRegularFile } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import { maskIndex } from '../catalog/masks.ts';
import { ReferenceStore } from '../references/store.ts';
import type { Surface } from './effects.ts';
import {
  type GradeResult,
  gradeSurface,
  observationMismatches,
  observationsFromJson,
  predictionFromJson,
  referenceSurface,
} from './grade.ts';
import { isObject, type Json, parseStrictJson } from './strict-json.ts';

/** The shared-estimator scores an agent record may carry (refitted and compared by evaluation/shared-scores.ts). */
export const SHARED_SCORE_KEYS = ['shared_degree1_score', 'shared_degree2_score', 'shared_gp_score'] as const;

/** A records file larger than this is refused unread. */
export const MAX_RECORDS_BYTES = 256 << 20;
/** One record (one line) longer than this is refused: a 6-option record with a stored score is a few KiB. */
export const MAX_RECORD_BYTES = 4 << 20;
/** The differences kept for the outcome; beyond them only their number (`differences_total`). */
export const MAX_DIFFERENCES_KEPT = 10_000;
/** The keys grade reads in a record; other keys (a control record's method, seed, …) are kept, not read. */
const RECORD_KEYS = ['condition', 'instance', 'observations', 'prediction_table', 'score', 'reference', ...SHARED_SCORE_KEYS];

/** Why `key` cannot be one a record may carry unread: a known key misspelled (case, plural) or an object's prototype key. */
function keyProblem(key: string): string | undefined {
  if (['__proto__', 'constructor', 'prototype'].includes(key)) return `key ${JSON.stringify(key)} is an object's prototype key; refused`;
  const stem = (k: string) => k.toLowerCase().replace(/s$/, '');
  const meant = RECORD_KEYS.find((known) => known !== key && stem(known) === stem(key));
  return meant ? `key ${JSON.stringify(key)} is not ${JSON.stringify(meant)} (a misspelled key is refused, never ignored)` : undefined;
}
/** The benchmark's score fields: a stored score missing one of them differs from the recomputed one. */
export const BENCHMARK_FIELDS = [
  'effect_mae',
  'interaction_mae',
  'grid_mae',
  'effect_recovery',
  'support_regret',
  'selected_mask',
  'exact_optimal_choice',
  'near_optimal_choice',
  'strict_effect_reconstruction',
  'mean_absolute_true_edge_effect',
  'true_utility_range',
  'n_effect_contrasts',
  'n_interaction_contrasts',
  'prediction_table',
] as const;
/** Stored and recomputed numbers agree within this, relative to max(1, |x|): summation order differs between implementations. */
export const SCORE_TOLERANCE = 1e-12;

export interface RecordDifference {
  record: number;
  line: number;
  condition: string;
  field: string;
  /** Undefined: the field is absent on that side. */
  stored?: Json;
  recomputed?: Json;
}

export interface RecordsOutcome {
  records: number;
  /** Records that carried a stored score. */
  scores_compared: number;
  /** The first MAX_DIFFERENCES_KEPT differences. */
  differences: RecordDifference[];
  differences_total: number;
  /** The recomputed score of every record (none kept when they are passed to `onScore`). */
  scores: RecordScore[];
  /** Records whose shared-estimator scores are to be refitted: those carrying them, or every one with `shared`. */
  shared_requests: SharedRequest[];
}

/** What refitting a record's shared-estimator scores needs: its observations in its order, its own recovery, what it stores. */
export interface SharedRequest {
  record: number;
  line: number;
  condition: string;
  /** [mask, reference utility], in the record's order (the acquisition order). */
  observations: [string, number][];
  own_recovery: number;
  /** The shared-score fields the record carries. */
  stored: { [key: string]: Json };
}

export interface RecordScore {
  record: number;
  line: number;
  condition: string;
  score: GradeResult;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The lines of a records file, read in 1 MiB blocks (never whole): at most MAX_RECORDS_BYTES in all
 * and MAX_RECORD_BYTES a line, each decoded as UTF-8 on its own; a FIFO, device or link is refused unopened.
 */
function* recordLines(file: string): Generator<{ text: string; line: number }> {
  const { fd, size } = openRegularFile(file, 'records file');
  const tooLong = (line: number) => new UserError(`records file ${file}, line ${line} is over ${MAX_RECORD_BYTES} bytes; refused`);
  const decode = (bytes: Buffer, line: number) => {
    try {
      const text = UTF8.decode(bytes);
      return line === 1 && text.startsWith('\uFEFF') ? text.slice(1) : text;
    } catch {
      throw new UserError(`records file ${file}, line ${line} is not UTF-8 text`);
    }
  };
  try {
    if (size > MAX_RECORDS_BYTES)
      throw new UserError(`records file ${file} is ${size} bytes, more than the ${MAX_RECORDS_BYTES} allowed; refused`);
    const block = Buffer.allocUnsafe(1 << 20);
    let carry: Buffer[] = [];
    let carried = 0;
    let line = 0;
    let total = 0;
    for (;;) {
      const n = readSync(fd, block, 0, block.length, null);
      if (n === 0) break;
      total += n;
      if (total > MAX_RECORDS_BYTES)
        throw new UserError(`records file ${file} grew past the ${MAX_RECORDS_BYTES} bytes allowed while it was read; refused`);
      const data = block.subarray(0, n);
      let start = 0;
      for (let end = data.indexOf(0x0a); end >= 0; end = data.indexOf(0x0a, start)) {
        line++;
        if (end === start && !carried) {
          start = end + 1; // an empty line: nothing to decode
          continue;
        }
        const piece = data.subarray(start, end);
        if (carried + piece.length > MAX_RECORD_BYTES) throw tooLong(line);
        const bytes = carried ? Buffer.concat([...carry, piece]) : piece;
        carry = [];
        carried = 0;
        yield { text: decode(bytes, line), line };
        start = end + 1;
      }
      if (carried + n - start > MAX_RECORD_BYTES) throw tooLong(line + 1);
      carry.push(Buffer.from(data.subarray(start)));
      carried += n - start;
    }
    if (carried) yield { text: decode(Buffer.concat(carry), line + 1), line: line + 1 };
  } finally {
    closeSync(fd);
  }
}

function sameValue(stored: Json, recomputed: Json): boolean {
  if (typeof stored === 'number' && typeof recomputed === 'number') {
    return stored === recomputed || Math.abs(stored - recomputed) <= SCORE_TOLERANCE * Math.max(1, Math.abs(stored), Math.abs(recomputed));
  }
  return JSON.stringify(stored) === JSON.stringify(recomputed);
}

/** Field by field (a table or an array element by element): the paths where `stored` and `recomputed` differ. */
export function differingFields(
  stored: Json | undefined,
  recomputed: Json | undefined,
  path: string,
): { field: string; stored?: Json; recomputed?: Json }[] {
  if (stored === undefined || recomputed === undefined) return [{ field: path, stored, recomputed }];
  if (isObject(stored) && isObject(recomputed)) {
    const keys = [...new Set([...Object.keys(stored), ...Object.keys(recomputed)])];
    const own = (o: { [key: string]: Json }, key: string) => (Object.hasOwn(o, key) ? o[key] : undefined);
    return keys.flatMap((key) => differingFields(own(stored, key), own(recomputed, key), `${path}.${key}`));
  }
  if (Array.isArray(stored) && Array.isArray(recomputed) && stored.length === recomputed.length) {
    return stored.flatMap((item, k) => differingFields(item, recomputed[k], `${path}.${k}`));
  }
  return sameValue(stored, recomputed) ? [] : [{ field: path, stored, recomputed }];
}

/** The width of a prediction table's masks (its first key or item), to tell an instance's 4- and 6-option conditions apart. */
function tableWidth(table: Json | undefined): number | undefined {
  const first = Array.isArray(table)
    ? isObject(table[0])
      ? table[0].mask
      : undefined
    : isObject(table)
      ? Object.keys(table)[0]
      : undefined;
  return typeof first === 'string' ? first.length : undefined;
}

/** The table a record submits: its `prediction_table`, or its score's (the benchmark's control records). */
function predictionTable(json: { [key: string]: Json }): Json | undefined {
  if (json.prediction_table !== undefined) return json.prediction_table;
  return isObject(json.score) ? json.score.prediction_table : undefined;
}

/**
 * Scores every line of `file`, streamed in bounded memory; see the header. With `onScore`, each
 * recomputed score goes there as it is made and none is kept in the outcome.
 */
export function gradeRecords(
  settings: Settings,
  file: string,
  referencesDir = settings.paths.references,
  onScore?: (score: RecordScore) => void,
  options: { shared?: boolean } = {},
): RecordsOutcome {
  const store = new ReferenceStore(referencesDir, settings.paths);
  const manifest = store.requireManifest();
  const surfaces = new Map<string, Surface>();
  const surface = (condition: string) => {
    if (!surfaces.has(condition)) surfaces.set(condition, referenceSurface(settings, condition, referencesDir));
    return surfaces.get(condition)!;
  };
  const outcome: RecordsOutcome = {
    records: 0,
    scores_compared: 0,
    differences: [],
    differences_total: 0,
    scores: [],
    shared_requests: [],
  };
  const differ = (d: RecordDifference) => {
    outcome.differences_total++;
    if (outcome.differences.length < MAX_DIFFERENCES_KEPT) outcome.differences.push(d);
  };
  for (const { text: raw, line } of recordLines(file)) {
    if (raw.trim() === '') continue;
    const record = ++outcome.records;
    const where = `records file ${file}, record ${record} (line ${line})`;
    const json = parseStrictJson(raw, where);
    if (!isObject(json)) throw new UserError(`${where}: expected an object {condition|instance, observations, prediction_table, score}`);
    const problem = Object.keys(json).map(keyProblem).find(Boolean);
    if (problem) throw new UserError(`${where}: ${problem}`);
    let condition: string;
    if (typeof json.condition === 'string') {
      condition = json.condition;
      // a record may name both (control records do): the condition must be one of the instance's
      const entry = Object.hasOwn(manifest.conditions, condition) ? manifest.conditions[condition] : undefined;
      if (json.instance !== undefined && entry && json.instance !== entry.source)
        throw new UserError(
          `${where}: instance ${JSON.stringify(json.instance)} is not the source of condition '${condition}' (${entry.source})`,
        );
    } else if (typeof json.instance === 'string') {
      const instance = json.instance;
      const width = tableWidth(predictionTable(json));
      const matches = Object.entries(manifest.conditions).filter(
        ([, e]) => e.source === instance && (width === undefined || e.dimensions === width),
      );
      if (matches.length !== 1) {
        const none = `has no condition${width ? ` of ${width} options` : ''} in ${store.manifestPath}`;
        throw new UserError(`${where}: instance '${instance}' ${matches.length ? 'has several conditions of this width' : none}`);
      }
      condition = matches[0]![0];
    } else throw new UserError(`${where}: needs a "condition" or an "instance" string`);
    let reference: Surface;
    let result: GradeResult;
    let observations: ReturnType<typeof observationsFromJson>;
    try {
      reference = surface(condition);
      const predicted = predictionFromJson(predictionTable(json) ?? null, reference.dimensions, 'prediction_table');
      observations = observationsFromJson(json.observations ?? [], reference.dimensions, 'observations');
      for (const wrong of observationMismatches(reference, observations)) {
        differ({ record, line, condition, field: `observations.${wrong.mask}`, stored: wrong.observed, recomputed: wrong.reference });
      }
      result = gradeSurface(reference, predicted, { observed: observations.map((o) => o.mask) });
    } catch (error) {
      if (error instanceof UserError) throw new UserError(`${where}: ${error.message}`);
      throw error;
    }
    const stored = SHARED_SCORE_KEYS.filter((key) => Object.hasOwn(json, key));
    if (options.shared || stored.length) {
      const d = reference.dimensions;
      outcome.shared_requests.push({
        record,
        line,
        condition,
        observations: observations.map((o) => [o.mask, reference.utilities[maskIndex(o.mask, d)]!]),
        own_recovery: result.effect_recovery,
        stored: Object.fromEntries(stored.map((key) => [key, json[key]!])),
      });
    }
    const scored = { record, line, condition, score: result };
    if (onScore) onScore(scored);
    else outcome.scores.push(scored);
    // a record that names the reference it was computed from (control records) is held to it
    if (json.reference !== undefined) {
      if (!isObject(json.reference)) throw new UserError(`${where}: "reference" is not an object`);
      const entry = manifest.conditions[condition]!;
      for (const field of ['table_sha256', 'plan_sha256'] as const) {
        if (json.reference[field] !== entry[field])
          differ({ record, line, condition, field: `reference.${field}`, stored: json.reference[field], recomputed: entry[field] });
      }
    }
    if (json.score === undefined) continue;
    if (!isObject(json.score)) throw new UserError(`${where}: "score" is not an object`);
    outcome.scores_compared++;
    // the fields the stored score carries and every benchmark field, each compared whole (a table mask by mask)
    const recomputed = JSON.parse(JSON.stringify(result)) as { [key: string]: Json };
    const storedScore = json.score;
    const missing = BENCHMARK_FIELDS.filter((key) => !Object.hasOwn(storedScore, key));
    for (const [key, stored] of [...Object.entries(storedScore), ...missing.map((key) => [key, undefined] as const)]) {
      // an own key only: a stored "__proto__" or "constructor" is a field the scorer does not compute
      const mine = Object.hasOwn(recomputed, key) ? recomputed[key] : undefined;
      for (const d of differingFields(stored, mine, `score.${key}`)) differ({ record, line, condition, ...d });
    }
  }
  if (!outcome.records) throw new UserError(`records file ${file} holds no record`);
  return outcome;
}

/** One line per difference, for stderr. */
export function differenceLines(outcome: RecordsOutcome): string[] {
  const show = (x: Json | undefined) => (x === undefined ? 'absent' : JSON.stringify(x));
  const lines = outcome.differences.map(
    (d) => `record ${d.record} (line ${d.line}, ${d.condition}): ${d.field}: stored ${show(d.stored)}, recomputed ${show(d.recomputed)}`,
  );
  const omitted = outcome.differences_total - outcome.differences.length;
  return omitted ? [...lines, `… and ${omitted} more difference(s), not listed`] : lines;
}
