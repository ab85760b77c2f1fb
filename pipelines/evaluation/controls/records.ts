// Control records in the benchmark's form, one JSON line each: what was bought (in acquisition order),
// what the method chose, grade's score with the prediction table, and the reference it was computed
// from. Written with the masks in order (JSON objects put integer-like keys such as "1000" first, which
// would scramble the acquisition order), read back strictly for summaries.
import * as z from 'zod';
import { UserError } from '../../core/errors.ts';
import { BENCHMARK_FIELDS } from '../../analysis/grade-records.ts';
import type { GradeResult } from '../../analysis/grade.ts';
import { isObject, type Json, parseStrictJson, readBoundedText } from '../../analysis/strict-json.ts';
import { maskOrdered, Ordered, orderedJson } from '../ordered-json.ts';
import { METHODS, type Track, TRACK_BUDGETS } from './grid.ts';

/** What the worker returns for one budget of a task (workflows/evaluation/controls.py). */
export const WorkerResult = z.looseObject({
  budget: z.number().int().nonnegative(),
  actual_credits: z.number().int().nonnegative(),
  observations: z.array(z.tuple([z.string(), z.number()])),
  prediction: z.array(z.number()),
  degree: z.number().int().optional(),
  alpha: z.number().optional(),
  observed_loo_mse: z.number().optional(),
  loo_losses: z.record(z.string(), z.number()).optional(),
  trajectory: z.array(z.record(z.string(), z.unknown())).optional(),
  final_parameters: z.record(z.string(), z.number()).optional(),
  code_inferred_observations: z.record(z.string(), z.number()).optional(),
});
export type WorkerResult = z.infer<typeof WorkerResult>;

export interface RecordContext {
  condition: string;
  instance: string;
  family: string;
  track: Track;
  method: string;
  seed: number | null;
  reference: { table_sha256: string; plan_sha256: string };
}

/** One control record as a JSON line (without the newline). */
export function recordLine(context: RecordContext, result: WorkerResult, score: GradeResult): string {
  const method: Record<string, unknown> =
    result.trajectory !== undefined
      ? { trajectory: result.trajectory, final_parameters: result.final_parameters }
      : {
          degree: result.degree,
          alpha: result.alpha,
          observed_loo_mse: result.observed_loo_mse,
          loo_losses: result.loo_losses,
        };
  const inferred = result.code_inferred_observations;
  return orderedJson({
    condition: context.condition,
    instance: context.instance,
    family: context.family,
    track: context.track,
    method: context.method,
    seed: context.seed ?? undefined,
    budget: result.budget,
    actual_credits: result.actual_credits,
    observations: new Ordered(result.observations),
    // the same masks as a list: a JSON object's key order is lost where a reader puts integer-like keys first
    acquisition_order: result.observations.map(([mask]) => mask),
    ...method,
    code_inferred_observations: inferred === undefined ? undefined : new Ordered(Object.entries(inferred)),
    score: new Ordered(
      BENCHMARK_FIELDS.map((field) => [field, field === 'prediction_table' ? maskOrdered(score.prediction_table) : score[field]]),
    ),
    reference: context.reference,
  });
}

/**
 * What summaries read of a record (every field checked; other fields are carried, not read). Records
 * made elsewhere in the benchmark's form may name only the instance and leave out the track: they are
 * completed from the catalog (`completeRecord`).
 */
const StoredFields = z.looseObject({
  condition: z.string().optional(),
  instance: z.string(),
  family: z.string(),
  track: z.string().optional(),
  method: z.string(),
  seed: z.number().int().nonnegative().optional(),
  budget: z.number().int().nonnegative(),
  actual_credits: z.number().int().nonnegative(),
  score: z.looseObject({
    effect_recovery: z.number(),
    effect_mae: z.number(),
    interaction_mae: z.number(),
    grid_mae: z.number(),
    support_regret: z.number(),
    exact_optimal_choice: z.boolean(),
    strict_effect_reconstruction: z.boolean(),
  }),
});
export type StoredRecord = z.infer<typeof StoredFields> & { condition: string; track: string; read_from: string };

/** The catalog condition a record names, or its instance's condition of the record's mask width. */
export type ConditionLookup = (instance: string, width: number | undefined) => { id: string; track: string } | undefined;

/** Largest records file a summary reads (the published grid's records take about 25 MB). */
export const MAX_RECORDS_FILE_BYTES = 256 << 20;

/** Each record's line as it was read (its observations' key order is the order they were bought in). */
const lineTexts = new WeakMap<StoredRecord, string>();
export const recordText = (record: StoredRecord): string | undefined => lineTexts.get(record);

/** Every record of a records file, each line checked (and completed by `lookup`); a malformed line is a UserError naming it. */
export function readControlRecords(file: string, lookup?: ConditionLookup): StoredRecord[] {
  const text = readBoundedText(file, 'control records file', MAX_RECORDS_FILE_BYTES);
  const records: StoredRecord[] = [];
  text.split('\n').forEach((line, k) => {
    if (line.trim() === '') return;
    const where = `control records file ${file}, line ${k + 1}`;
    // strict: NaN, Infinity and numbers beyond float64 are refused here, naming the line
    const json = parseStrictJson(line, where);
    if (!isObject(json)) throw new UserError(`${where}: expected a record object`);
    const record = checkedRecord(json, where, lookup);
    const stored: StoredRecord = { ...record, read_from: `${file} line ${k + 1}` };
    lineTexts.set(stored, line);
    records.push(stored);
  });
  if (!records.length) throw new UserError(`control records file ${file} holds no record`);
  return records;
}

/** A record's fields checked, its condition and track completed (see StoredFields). */
function checkedRecord(json: { [key: string]: Json }, where: string, lookup?: ConditionLookup) {
  const parsed = StoredFields.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`${where}: ${issue.path.join('.') || 'record'}: ${issue.message}`);
  }
  const record = parsed.data;
  const observations = isObject(json.observations) ? Object.keys(json.observations) : [];
  const width = observations[0]?.length;
  if (!width || observations.some((m) => !/^[01]+$/.test(m) || m.length !== width))
    throw new UserError(`${where}: "observations" must map masks of one width to utilities`);
  if (!(METHODS as readonly string[]).includes(record.method))
    throw new UserError(`${where}: unknown method '${record.method}' (methods: ${METHODS.join(', ')})`);
  if (record.method === 'random_degree2' && record.seed === undefined)
    throw new UserError(`${where}: a random_degree2 record names its "seed"`);
  if (record.budget > 2 ** width - 2)
    throw new UserError(`${where}: budget ${record.budget} is more than a ${width}-option condition has masks beyond the anchors`);
  if (record.track !== undefined && !Object.hasOwn(TRACK_BUDGETS, record.track))
    throw new UserError(`${where}: unknown track '${record.track}' (tracks: ${Object.keys(TRACK_BUDGETS).join(', ')})`);
  const found =
    record.condition !== undefined && record.track !== undefined ? undefined : lookup?.(record.condition ?? record.instance, width);
  const condition = record.condition ?? found?.id;
  const track = record.track ?? found?.track;
  if (condition === undefined || track === undefined)
    throw new UserError(
      `${where}: '${record.condition ?? record.instance}' has no condition of ${width} options in the catalog; give the record a "condition" and a "track"`,
    );
  return { ...record, condition, track };
}

/**
 * What makes a record one cell's entry: condition, method, budget and, for the random design only, the
 * seed (a deterministic method buys the same whatever seed a record names).
 */
export function recordIdentity(r: { condition: string; method: string; seed?: number; budget: number }): string {
  return JSON.stringify([r.condition, r.method, r.method === 'random_degree2' ? (r.seed ?? null) : null, r.budget]);
}

/** What a record says of itself in a message: condition, method, seed, budget. */
export function recordName(r: { condition: string; method: string; seed?: number; budget: number }): string {
  return `${r.condition} ${r.method}${r.method === 'random_degree2' ? ` seed ${r.seed}` : ''} at budget ${r.budget}`;
}

/** Refuses (UserError) two records of one cell entry (recordIdentity): a summary counts each once. */
export function checkDistinct(records: readonly StoredRecord[]): void {
  const seen = new Map<string, string>();
  for (const r of records) {
    const key = recordIdentity(r);
    const first = seen.get(key);
    if (first) throw new UserError(`the record of ${recordName(r)} appears twice: ${first} and ${r.read_from}`);
    seen.set(key, r.read_from);
  }
}
