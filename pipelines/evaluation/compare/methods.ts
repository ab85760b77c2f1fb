// What `wwref cohort compare` compares, read into methods (statistics.ts): each cohort folder is one
// method (its results lines that the cohort's own check vouches for: cohort/results.ts), each control
// method of a controls folder is one (its records recomputed first: controls/verify.ts), and each model of a
// published agent-record file is one (every record scored again by `grade --records`' grader; the
// recovery compared is the recomputed one, and a record whose stored score differs is left out,
// said). Names are unique as shown: a second method of the same shown name gets its folder's or file's name beside it.
import { basename, join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import type { Settings } from '../../core/settings.ts';
import { gradeRecords } from '../../analysis/grade-records.ts';
import { isObject, parseStrictJson, readBoundedText } from '../../analysis/strict-json.ts';
import { loadCatalog } from '../../references/store.ts';
import { trackOf } from '../controls/grid.ts';
import { catalogLookup } from '../controls/job.ts';
import { MAX_RECORDS_FILE_BYTES, readControlRecords, type StoredRecord } from '../controls/records.ts';
import { checkCompleteRun, verifyControlRecords } from '../controls/verify.ts';
import { RECORDS_FILE } from '../controls/resume.ts';
import type { Method, MethodRow } from './statistics.ts';
import { printable } from './tables.ts';

export interface LeftOut {
  from: string;
  what: string;
  why: string;
}

/** A run of a method as a comparison reads it. */
export function methodRow(
  r: { condition: string; instance: string; family: string; track: string; budget: number },
  recovery: number,
  delivered: boolean,
): MethodRow {
  return { condition: r.condition, instance: r.instance, family: r.family, track: r.track, budget: r.budget, recovery, delivered };
}

/** Control records as methods, one per control method (each seed of the random design a run of it). */
export function controlsAsMethods(records: readonly StoredRecord[], from: string): Method[] {
  const byMethod = new Map<string, MethodRow[]>();
  for (const r of records) byMethod.set(r.method, [...(byMethod.get(r.method) ?? []), methodRow(r, r.score.effect_recovery, true)]);
  return [...byMethod].map(([name, rows]) => ({ name, kind: 'control', from, rows }));
}

/** A cohort's name as a method: its `cohort` label, else its `agent` or `model` label, else `fallback` (its folder's name). */
export function cohortMethodName(labels: Readonly<Record<string, string>>, fallback: string): string {
  return labels.cohort ?? labels.agent ?? labels.model ?? fallback;
}

/**
 * The control methods of a finished `wwref controls run` folder, one method each: refused unless it
 * holds every control method at the default seeds in each cell it has and each cell in `needed` (the
 * compared cohorts'; controls/verify.ts checkCompleteRun); every record recomputed on the references first (controls/verify.ts; one that recomputation does not give, or
 * of another reference table, is refused), a second copy of one record left out and said.
 */
export async function controlMethods(
  settings: Settings,
  dir: string,
  leftOut: LeftOut[],
  log: (line: string) => void,
  needed: readonly { condition: string; budget: number }[] = [],
): Promise<Method[]> {
  const file = join(dir, RECORDS_FILE);
  const catalog = loadCatalog(settings);
  const read = readControlRecords(file, catalogLookup(catalog));
  // every control method at the default seeds in every cell it holds and every cell a compared cohort has
  const cells = [...needed, ...read].flatMap(({ condition, budget }) => {
    const known = catalog.conditions.get(condition);
    return known ? [{ condition: known, budget }] : [];
  });
  checkCompleteRun(dir, read, cells);
  const verified = await verifyControlRecords(settings, read, { workers: 1, requireReference: true, log });
  for (const left of [...verified.left_out.values()].flat()) leftOut.push({ from: file, what: left.record, why: left.why });
  return controlsAsMethods(verified.records, dir);
}

/** The records of a published agent-record file: a JSON array (results/agent_results.json) or one record a line. */
function publishedRecords(file: string): Record<string, unknown>[] {
  const text = readBoundedText(file, 'published agent-record file', MAX_RECORDS_FILE_BYTES);
  const json = text.trimStart().startsWith('[')
    ? parseStrictJson(text, `published agent-record file ${file}`)
    : text
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l, k) => parseStrictJson(l, `published agent-record file ${file}, line ${k + 1}`));
  if (!Array.isArray(json) || !json.length || !json.every(isObject))
    throw new UserError(`published agent-record file ${file}: expected agent records (a JSON array of objects, or one object a line)`);
  // what names a record's method and cell: the benchmark's form has each (a model that is no text would be named "[object Object]")
  for (const [k, r] of json.entries()) {
    const whole = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 0;
    const problem =
      typeof r.model !== 'string' || r.model.trim() === ''
        ? '"model" is no name'
        : r.cohort !== undefined && typeof r.cohort !== 'string'
          ? '"cohort" is no name'
          : !whole(r.budget)
            ? '"budget" is no whole number'
            : !whole(r.repeat)
              ? '"repeat" is no whole number'
              : undefined;
    if (problem) throw new UserError(`published agent-record file ${file}, record ${k + 1}: ${problem}`);
  }
  return json as Record<string, unknown>[];
}

/**
 * The models of a published agent-record file, one method each (named by `model`, and by `cohort`
 * too when one model comes in several cohorts). Every record is graded again against the references;
 * one whose stored fields differ from the regrade is left out (`leftOut`).
 */
export function publishedMethods(settings: Settings, file: string, leftOut: LeftOut[]): Method[] {
  const records = publishedRecords(file);
  // graded as `grade --records` grades a file of one record a line (the k-th record as line k)
  const lines = records.map((r, k) => ({ text: JSON.stringify(r), line: k + 1 }));
  const outcome = gradeRecords(settings, file, undefined, undefined, { lines });
  const differing = new Map<number, string>();
  for (const d of outcome.differences) if (!differing.has(d.record)) differing.set(d.record, d.field);
  if (outcome.differences_total > outcome.differences.length)
    throw new UserError(
      `published agent-record file ${file}: ${outcome.differences_total} stored fields differ from their regrade; not compared`,
    );
  const catalog = loadCatalog(settings);
  const conditions = catalog.conditions;
  const models = new Map<string, Set<string>>();
  for (const r of records) models.set(String(r.model), (models.get(String(r.model)) ?? new Set()).add(String(r.cohort)));
  const byName = new Map<string, MethodRow[]>();
  const seen = new Map<string, number>();
  for (const scored of outcome.scores) {
    const record = records[scored.record - 1]!;
    const what = `record ${scored.record} (${String(record.model)}, ${scored.condition}, B=${String(record.budget)}, repeat ${String(record.repeat)})`;
    const field = differing.get(scored.record);
    if (field !== undefined) {
      leftOut.push({ from: file, what, why: `its stored ${field} is not what grading it again gives` });
      continue;
    }
    // one run counts once: a second record of the same model, cohort, condition, budget and repeat is left out
    const identity = JSON.stringify([record.model, record.cohort ?? null, scored.condition, record.budget, record.repeat]);
    const first = seen.get(identity);
    if (first !== undefined) {
      leftOut.push({ from: file, what, why: `a second copy of record ${first}'s run (same model, cohort, condition, budget and repeat)` });
      continue;
    }
    seen.set(identity, scored.record);
    const condition = conditions.get(scored.condition)!;
    const name = models.get(String(record.model))!.size > 1 ? `${String(record.model)} (${String(record.cohort)})` : String(record.model);
    const rows = byName.get(name) ?? [];
    const cell = {
      condition: condition.id,
      instance: condition.source,
      family: condition.family,
      track: trackOf(condition),
      budget: record.budget as number,
    };
    rows.push(methodRow(cell, scored.score.effect_recovery, record.artifact_valid === true));
    byName.set(name, rows);
  }
  return [...byName].map(([name, rows]) => ({ name, kind: 'published', from: file, rows }));
}

/**
 * Unique names as they are shown: each name (and the folder or file beside it) with the characters a
 * table cannot show as themselves as '?' (tables.ts `printable`), then a name shown twice gets where it
 * was read beside it ("pair_ridge (cohort-b)"): two methods never look alike, whatever their names held.
 */
export function uniqueNames(methods: readonly Method[]): Method[] {
  const shown = methods.map((m) => printable(m.name));
  const count = new Map<string, number>();
  for (const name of shown) count.set(name, (count.get(name) ?? 0) + 1);
  const used = new Set<string>();
  return methods.map((m, k) => {
    const [base, from] = [shown[k]!, printable(basename(m.from))];
    let name = count.get(base)! > 1 ? `${base} (${from})` : base;
    for (let n = 2; used.has(name); n++) name = `${base} (${from} #${n})`;
    used.add(name);
    return { ...m, name };
  });
}
