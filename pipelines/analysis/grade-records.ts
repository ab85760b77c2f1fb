// Scoring stored records in bulk (`wwref grade --records FILE.jsonl`): every line is one submission,
// {condition and/or instance, observations, prediction_table (or score.prediction_table), score?, reference?}.
// Each is scored again against the references; its observations are checked against them and a stored score is compared key by key
// (every benchmark field must be there). A record carries no budget: its observations are not held to one.
// A malformed line is a user error (exit 2) naming it; a difference is reported, naming the record
// and the field, and makes the command exit 1.
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
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
import { isObject, type Json, parseStrictJson, readBoundedText } from './strict-json.ts';

/** A records file larger than this is refused unread. */
export const MAX_RECORDS_BYTES = 256 << 20;
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
  differences: RecordDifference[];
  /** The recomputed score of every record. */
  scores: { record: number; line: number; condition: string; score: GradeResult }[];
}

function sameValue(stored: Json, recomputed: Json): boolean {
  if (typeof stored === 'number' && typeof recomputed === 'number') {
    return stored === recomputed || Math.abs(stored - recomputed) <= SCORE_TOLERANCE * Math.max(1, Math.abs(stored), Math.abs(recomputed));
  }
  return JSON.stringify(stored) === JSON.stringify(recomputed);
}

/** Field by field (a table or an array element by element): the paths where `stored` and `recomputed` differ. */
function differingFields(
  stored: Json | undefined,
  recomputed: Json | undefined,
  path: string,
): { field: string; stored?: Json; recomputed?: Json }[] {
  if (stored === undefined || recomputed === undefined) return [{ field: path, stored, recomputed }];
  if (isObject(stored) && isObject(recomputed)) {
    const keys = [...new Set([...Object.keys(stored), ...Object.keys(recomputed)])];
    return keys.flatMap((key) => differingFields(stored[key], recomputed[key], `${path}.${key}`));
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

/** Scores every line of `file`; see the header. */
export function gradeRecords(settings: Settings, file: string, referencesDir = settings.paths.references): RecordsOutcome {
  const text = readBoundedText(file, 'records file', MAX_RECORDS_BYTES);
  const store = new ReferenceStore(referencesDir, settings.paths);
  const manifest = store.requireManifest();
  const surfaces = new Map<string, Surface>();
  const surface = (condition: string) => {
    if (!surfaces.has(condition)) surfaces.set(condition, referenceSurface(settings, condition, referencesDir));
    return surfaces.get(condition)!;
  };
  const outcome: RecordsOutcome = { records: 0, scores_compared: 0, differences: [], scores: [] };
  const lines = text.split('\n');
  lines.forEach((raw, k) => {
    if (raw.trim() === '') return;
    const record = ++outcome.records;
    const where = `records file ${file}, record ${record} (line ${k + 1})`;
    const json = parseStrictJson(raw, where);
    if (!isObject(json)) throw new UserError(`${where}: expected an object {condition|instance, observations, prediction_table, score}`);
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
    try {
      reference = surface(condition);
      const predicted = predictionFromJson(predictionTable(json) ?? null, reference.dimensions, 'prediction_table');
      const observations = observationsFromJson(json.observations ?? [], reference.dimensions, 'observations');
      for (const wrong of observationMismatches(reference, observations)) {
        outcome.differences.push({
          record,
          line: k + 1,
          condition,
          field: `observations.${wrong.mask}`,
          stored: wrong.observed,
          recomputed: wrong.reference,
        });
      }
      result = gradeSurface(reference, predicted, { observed: observations.map((o) => o.mask) });
    } catch (error) {
      if (error instanceof UserError) throw new UserError(`${where}: ${error.message}`);
      throw error;
    }
    outcome.scores.push({ record, line: k + 1, condition, score: result });
    // a record that names the reference it was computed from (control records) is held to it
    if (json.reference !== undefined) {
      if (!isObject(json.reference)) throw new UserError(`${where}: "reference" is not an object`);
      const entry = manifest.conditions[condition]!;
      for (const field of ['table_sha256', 'plan_sha256'] as const) {
        if (json.reference[field] !== entry[field])
          outcome.differences.push({
            record,
            line: k + 1,
            condition,
            field: `reference.${field}`,
            stored: json.reference[field],
            recomputed: entry[field],
          });
      }
    }
    if (json.score === undefined) return;
    if (!isObject(json.score)) throw new UserError(`${where}: "score" is not an object`);
    outcome.scores_compared++;
    // the fields the stored score carries and every benchmark field, each compared whole (a table mask by mask)
    const recomputed = JSON.parse(JSON.stringify(result)) as { [key: string]: Json };
    const storedScore = json.score;
    const missing = BENCHMARK_FIELDS.filter((key) => !Object.hasOwn(storedScore, key));
    for (const [key, stored] of [...Object.entries(storedScore), ...missing.map((key) => [key, undefined] as const)]) {
      for (const d of differingFields(stored, recomputed[key], `score.${key}`))
        outcome.differences.push({ record, line: k + 1, condition, ...d });
    }
  });
  if (!outcome.records) throw new UserError(`records file ${file} holds no record`);
  return outcome;
}

/** One line per difference, for stderr. */
export function differenceLines(outcome: RecordsOutcome): string[] {
  const show = (x: Json | undefined) => (x === undefined ? 'absent' : JSON.stringify(x));
  return outcome.differences.map(
    (d) => `record ${d.record} (line ${d.line}, ${d.condition}): ${d.field}: stored ${show(d.stored)}, recomputed ${show(d.recomputed)}`,
  );
}
