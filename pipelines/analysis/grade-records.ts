// Scoring stored records in bulk (`wwref grade --records FILE.jsonl`): every line is one submission,
// {condition and/or instance, observations, prediction_table (or score.prediction_table), score?, reference?},
// a control record, a cohort's results line or a published agent record. Each is scored again against
// the references; its observations are checked against them (in their order: a list, or an object with
// its `acquisition_order`, the order the shared estimators are refitted in) and a stored score is
// compared key by key (every field of its form must be there: grade's benchmark fields, or the
// published agent-score fields). An undelivered agent record (`artifact_valid: false`) has no table:
// its score must be the published undelivered form. A record's `credits_spent` and `effect_recovery`
// are checked too. A record carries no budget: its observations are not held to one.
// A malformed line is a user error (exit 2) naming it; a difference is reported, naming the record
// and the field, and makes the command exit 1.
import { closeSync, readSync } from 'node:fs';
import { openRegularFile } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import { allMasks, maskIndex, optionBit, optionLetter } from '../catalog/masks.ts';
import { ReferenceStore } from '../references/store.ts';
import { meanAbs, type Surface } from './effects.ts';
import {
  type GradeResult,
  gradeSurface,
  type Observation,
  observationMismatches,
  observationsFromJson,
  predictionFromJson,
  referenceSurface,
} from './grade.ts';
import { isObject, type Json, parseStrictJson } from './strict-json.ts';

/** The shared-estimator scores an agent record may carry (refitted and compared by evaluation/shared-scores.ts). */
export const SHARED_SCORE_KEYS = ['shared_degree1_score', 'shared_degree2_score', 'shared_gp_score'] as const;
/** A cohort's gains of the agent over the shared estimators (refitted and compared with them). */
export const SHARED_GAIN_KEY = 'recovery_gain_over_shared';

/** A records file larger than this is refused unread. */
export const MAX_RECORDS_BYTES = 256 << 20;
/** One record (one line) longer than this is refused: a 6-option record with a stored score is a few KiB. */
export const MAX_RECORD_BYTES = 4 << 20;
/** The differences kept for the outcome; beyond them only their number (`differences_total`). */
export const MAX_DIFFERENCES_KEPT = 10_000;
/** The keys grade reads in a record; other keys (a control record's method, seed, …) are kept, not read. */
const RECORD_KEYS = [
  'condition',
  'instance',
  'observations',
  'acquisition_order',
  'prediction_table',
  'score',
  'reference',
  'artifact_valid',
  'credits_spent',
  'effect_recovery',
  SHARED_GAIN_KEY,
  ...SHARED_SCORE_KEYS,
];

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
export type BenchmarkField = (typeof BENCHMARK_FIELDS)[number];

/**
 * The fields of a published agent record's score (results/agent_results.json), in its order: a stored
 * score that carries any field of this form beyond grade's must carry them all. It leaves out two of
 * grade's fields (selected_mask, in per_support instead, and exact_optimal_choice).
 */
export const AGENT_SCORE_FIELDS = [
  'effect_error',
  'interaction_error',
  'effect_mae',
  'interaction_mae',
  'grid_mae',
  'support_regret',
  'unobserved_grid_mae',
  'n_effect_contrasts',
  'n_interaction_contrasts',
  'n_grid_cells',
  'n_observed_cells',
  'n_support',
  'n_components',
  'canonicalization_corrections',
  'per_support',
  'effect_recovery',
  'mean_absolute_true_edge_effect',
  'true_utility_range',
  'strict_effect_reconstruction',
  'near_optimal_choice',
  'prediction_table',
] as const;
/** The score of an undelivered agent record, as the benchmark publishes it. */
export const UNDELIVERED_SCORE = { effect_recovery: 0, strict_effect_reconstruction: false } as const;
export type UndeliveredRecordScore = typeof UNDELIVERED_SCORE;

/** One support's scores in a published agent score (the benchmark's tasks have one support, `task`). */
export interface SupportScore {
  effect_error: number;
  interaction_error: number;
  grid_mae: number;
  support_regret: number;
  selected_mask: string;
  /** Each option's effect in the reference on the all-off background: u(option alone) − u(none). */
  base_effects: Record<string, number>;
  /** Each option's effect in the reference on the all-on background: u(all) − u(all but the option). */
  full_effects: Record<string, number>;
}

/** A delivered record's score: grade's benchmark fields and every field of the published agent scores. */
export type AgentScore = Pick<GradeResult, BenchmarkField> & {
  /** effect_mae / 2. */
  effect_error: number;
  /** interaction_mae / 4. */
  interaction_error: number;
  /** Mean |pred − true| over the masks not observed (0 when every mask is observed). */
  unobserved_grid_mae: number;
  n_grid_cells: number;
  n_observed_cells: number;
  n_support: 1;
  n_components: number;
  canonicalization_corrections: Json[];
  per_support: { task: SupportScore };
};

/** Each option's effect (letter → utility difference) in `reference`, on the all-off or the all-on background. */
function backgroundEffects(reference: Surface, on: boolean): Record<string, number> {
  const { dimensions: d, utilities: u } = reference;
  const all = 2 ** d - 1;
  return Object.fromEntries(
    Array.from({ length: d }, (_, option) => {
      const bit = optionBit(option, d);
      const effect = on ? u[all]! - u[all ^ bit]! : u[bit]! - u[0]!;
      return [optionLetter(option), effect];
    }),
  );
}

/** `graded` (a table of `reference` graded) in the published agent-score form, grade's fields beside (see AgentScore). */
export function agentScore(reference: Surface, graded: GradeResult): AgentScore {
  const d = reference.dimensions;
  const observed = new Set(graded.observed);
  const unobserved = allMasks(d)
    .filter((mask) => !observed.has(mask))
    .map((mask) => graded.prediction_table[mask]! - reference.utilities[maskIndex(mask, d)]!);
  const effectError = graded.effect_mae / 2;
  const interactionError = graded.interaction_mae / 4;
  return {
    effect_error: effectError,
    interaction_error: interactionError,
    effect_mae: graded.effect_mae,
    interaction_mae: graded.interaction_mae,
    grid_mae: graded.grid_mae,
    support_regret: graded.support_regret,
    selected_mask: graded.selected_mask,
    unobserved_grid_mae: meanAbs(unobserved),
    n_effect_contrasts: graded.n_effect_contrasts,
    n_interaction_contrasts: graded.n_interaction_contrasts,
    n_grid_cells: 2 ** d,
    n_observed_cells: observed.size,
    n_support: 1,
    n_components: d,
    canonicalization_corrections: [],
    per_support: {
      task: {
        effect_error: effectError,
        interaction_error: interactionError,
        grid_mae: graded.grid_mae,
        support_regret: graded.support_regret,
        selected_mask: graded.selected_mask,
        base_effects: backgroundEffects(reference, false),
        full_effects: backgroundEffects(reference, true),
      },
    },
    effect_recovery: graded.effect_recovery,
    mean_absolute_true_edge_effect: graded.mean_absolute_true_edge_effect,
    true_utility_range: graded.true_utility_range,
    strict_effect_reconstruction: graded.strict_effect_reconstruction,
    exact_optimal_choice: graded.exact_optimal_choice,
    near_optimal_choice: graded.near_optimal_choice,
    prediction_table: graded.prediction_table,
  };
}

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
  /** The shared-score fields the record carries (and its gains over them). */
  stored: { [key: string]: Json };
}

export interface RecordScore {
  record: number;
  line: number;
  condition: string;
  /** A delivered record's score: the published agent form with grade's reader fields; an undelivered one's: the published form. */
  score: (AgentScore & GradeResult) | UndeliveredRecordScore;
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

/**
 * The width of a prediction table's masks or of observations (their first key or item), to tell an
 * instance's 4- and 6-option conditions apart; an item of an array without a "mask" string is refused, named.
 */
function maskWidth(value: Json | undefined, what: string): number | undefined {
  if (Array.isArray(value) && isObject(value[0]) && typeof value[0].mask !== 'string')
    throw new UserError(`${what}: item 0 has no "mask" string (an item is {"mask": …, "utility": …})`);
  const first = Array.isArray(value)
    ? isObject(value[0])
      ? value[0].mask
      : value[0]
    : isObject(value)
      ? Object.keys(value)[0]
      : undefined;
  return typeof first === 'string' ? first.length : undefined;
}

/** The table a record submits: its `prediction_table`, or its score's (the benchmark's control records). */
function predictionTable(json: { [key: string]: Json }): Json | undefined {
  if (json.prediction_table !== undefined) return json.prediction_table;
  return isObject(json.score) ? json.score.prediction_table : undefined;
}

/** The condition a record names, or its instance's condition of the width of its table (or, without one, of its observations). */
function recordCondition(json: { [key: string]: Json }, store: ReferenceStore, where: string): string {
  const manifest = store.requireManifest();
  if (typeof json.condition === 'string') {
    const condition = json.condition;
    // a record may name both (control records do): the condition must be one of the instance's
    const entry = Object.hasOwn(manifest.conditions, condition) ? manifest.conditions[condition] : undefined;
    if (json.instance !== undefined && entry && json.instance !== entry.source)
      throw new UserError(
        `${where}: instance ${JSON.stringify(json.instance)} is not the source of condition '${condition}' (${entry.source})`,
      );
    return condition;
  }
  if (typeof json.instance !== 'string') throw new UserError(`${where}: needs a "condition" or an "instance" string`);
  const instance = json.instance;
  const width = maskWidth(predictionTable(json), `${where}: prediction_table`) ?? maskWidth(json.observations, `${where}: observations`);
  const matches = Object.entries(manifest.conditions).filter(
    ([, e]) => e.source === instance && (width === undefined || e.dimensions === width),
  );
  if (matches.length !== 1) {
    const none = `has no condition${width ? ` of ${width} options` : ''} in ${store.manifestPath}`;
    throw new UserError(`${where}: instance '${instance}' ${matches.length ? 'has several conditions of this width' : none}`);
  }
  return matches[0]![0];
}

/**
 * A record's observations in its order: a list's own, an object's in its `acquisition_order` (a parsed
 * object puts integer-like masks such as "1000" first, so its key order is not the record's). A list
 * with an `acquisition_order` must agree with it (else a difference).
 */
function recordObservations(
  json: { [key: string]: Json },
  dimensions: number,
  differ: (d: Omit<RecordDifference, 'record' | 'line' | 'condition'>) => void,
): Observation[] {
  const observations = observationsFromJson(json.observations ?? [], dimensions, 'observations');
  const order = json.acquisition_order;
  if (order === undefined) return observations;
  const masks = observations.map((o) => o.mask);
  if (Array.isArray(json.observations)) {
    if (JSON.stringify(order) !== JSON.stringify(masks)) differ({ field: 'acquisition_order', stored: order, recomputed: masks });
    return observations;
  }
  const byMask = new Map(observations.map((o) => [o.mask, o]));
  const ordered = Array.isArray(order) ? order.map((mask) => (typeof mask === 'string' ? byMask.get(mask) : undefined)) : [];
  if (ordered.length !== observations.length || new Set(ordered).size !== ordered.length || ordered.includes(undefined))
    throw new UserError('"acquisition_order" is not the list of the observations\' masks, each once');
  return ordered as Observation[];
}

/** What a record's score is compared with: the recomputed score and the fields its form must carry. */
function expectedScore(
  stored: Json | undefined,
  recomputed: RecordScore['score'],
  undelivered: boolean,
): { score: { [key: string]: Json }; required: readonly string[] } {
  const score = JSON.parse(JSON.stringify(recomputed)) as { [key: string]: Json };
  if (undelivered) return { score, required: Object.keys(UNDELIVERED_SCORE) };
  // the published agent form leaves out two of grade's fields: a score in that form must carry all of its own
  const agentOnly = AGENT_SCORE_FIELDS.filter((f) => !(BENCHMARK_FIELDS as readonly string[]).includes(f));
  const agentForm = isObject(stored) && agentOnly.some((f) => Object.hasOwn(stored, f));
  return { score, required: agentForm ? AGENT_SCORE_FIELDS : BENCHMARK_FIELDS };
}

/** The differences between a stored score and the recomputed one: every field it carries and every field its form requires. */
function scoreDifferences(stored: { [key: string]: Json }, expected: ReturnType<typeof expectedScore>) {
  const missing = expected.required.filter((key) => !Object.hasOwn(stored, key));
  return [...Object.entries(stored), ...missing.map((key) => [key, undefined] as const)].flatMap(([key, value]) =>
    // an own key only: a stored "__proto__" or "constructor" is a field the scorer does not compute
    differingFields(value, Object.hasOwn(expected.score, key) ? expected.score[key] : undefined, `score.${key}`),
  );
}

/** A record's fields derived from its score and observations: the credits it spent (purchases beyond the anchors) and its own recovery. */
function derivedDifferences(json: { [key: string]: Json }, observations: readonly Observation[], dimensions: number, recovery: number) {
  const anchors = new Set(['0'.repeat(dimensions), '1'.repeat(dimensions)]);
  const spent = observations.filter((o) => !anchors.has(o.mask)).length;
  return [
    ...(json.credits_spent === undefined ? [] : differingFields(json.credits_spent, spent, 'credits_spent')),
    ...(json.effect_recovery === undefined ? [] : differingFields(json.effect_recovery, recovery, 'effect_recovery')),
  ];
}

/** One record scored: its condition, its score (compared with a stored one), its shared-estimator request. */
function gradeRecord(
  json: { [key: string]: Json },
  at: { record: number; line: number; where: string },
  context: { store: ReferenceStore; surface: (condition: string) => Surface; shared?: boolean },
  differ: (d: RecordDifference) => void,
): { scored: RecordScore; request?: SharedRequest; compared: boolean } {
  const { record, line, where } = at;
  const condition = recordCondition(json, context.store, where);
  const mark = (d: Omit<RecordDifference, 'record' | 'line' | 'condition'>) => differ({ record, line, condition, ...d });
  const undelivered = json.artifact_valid === false;
  let reference: Surface;
  let observations: Observation[];
  let score: RecordScore['score'];
  try {
    reference = context.surface(condition);
    observations = recordObservations(json, reference.dimensions, mark);
    for (const wrong of observationMismatches(reference, observations))
      mark({ field: `observations.${wrong.mask}`, stored: wrong.observed, recomputed: wrong.reference });
    if (undelivered) score = { ...UNDELIVERED_SCORE };
    else {
      const predicted = predictionFromJson(predictionTable(json) ?? null, reference.dimensions, 'prediction_table');
      const graded = gradeSurface(reference, predicted, { observed: observations.map((o) => o.mask) });
      score = { ...agentScore(reference, graded), ...graded };
    }
  } catch (error) {
    if (error instanceof UserError) throw new UserError(`${where}: ${error.message}`);
    throw error;
  }
  for (const d of derivedDifferences(json, observations, reference.dimensions, score.effect_recovery)) mark(d);
  let request: SharedRequest | undefined;
  const stored = [...SHARED_SCORE_KEYS, SHARED_GAIN_KEY].filter((key) => Object.hasOwn(json, key));
  if (context.shared || stored.length) {
    const d = reference.dimensions;
    request = {
      record,
      line,
      condition,
      observations: observations.map((o) => [o.mask, reference.utilities[maskIndex(o.mask, d)]!]),
      own_recovery: score.effect_recovery,
      stored: Object.fromEntries(stored.map((key) => [key, json[key]!])),
    };
  }
  // a record that names the reference it was computed from (control records, cohort results) is held to it
  if (json.reference !== undefined) {
    if (!isObject(json.reference)) throw new UserError(`${where}: "reference" is not an object`);
    const entry = context.store.requireManifest().conditions[condition]!;
    for (const field of ['table_sha256', 'plan_sha256'] as const)
      if (json.reference[field] !== entry[field])
        mark({ field: `reference.${field}`, stored: json.reference[field], recomputed: entry[field] });
  }
  const scored = { record, line, condition, score };
  if (json.score === undefined) return { scored, request, compared: false };
  if (!isObject(json.score)) throw new UserError(`${where}: "score" is not an object`);
  for (const d of scoreDifferences(json.score, expectedScore(json.score, score, undelivered))) mark(d);
  return { scored, request, compared: true };
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
  options: { shared?: boolean; lines?: Iterable<{ text: string; line: number }> } = {},
): RecordsOutcome {
  const store = new ReferenceStore(referencesDir, settings.paths);
  store.requireManifest();
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
  // `lines`: records already read (cohort compare's published records, a JSON array), `file` naming them
  for (const { text: raw, line } of options.lines ?? recordLines(file)) {
    if (raw.trim() === '') continue;
    const record = ++outcome.records;
    const where = `records file ${file}, record ${record} (line ${line})`;
    const json = parseStrictJson(raw, where);
    if (!isObject(json)) throw new UserError(`${where}: expected an object {condition|instance, observations, prediction_table, score}`);
    const problem = Object.keys(json).map(keyProblem).find(Boolean);
    if (problem) throw new UserError(`${where}: ${problem}`);
    const { scored, request, compared } = gradeRecord(json, { record, line, where }, { store, surface, shared: options.shared }, differ);
    if (request) outcome.shared_requests.push(request);
    if (onScore) onScore(scored);
    else outcome.scores.push(scored);
    if (compared) outcome.scores_compared++;
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
