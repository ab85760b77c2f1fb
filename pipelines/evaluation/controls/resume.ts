// What an earlier run left in a controls output folder, and what of it a new run may keep. A folder is
// a run's when it holds that run's `run.json`; a run resumes only its own grid, references, code and
// profile. Nothing in `records.jsonl.partial` is taken as written: a line is kept only when it is a
// whole record of a task of this grid, for one of its budgets, once, naming this reference, with
// observations that are the reference's utilities in the episode's rules and a score that grade gives
// again to the letter; a task is kept only when every one of its budgets is. These are the cheap checks:
// the run (job.ts) then recomputes the kept tasks and keeps only lines that recomputation gives.
import { existsSync, readdirSync } from 'node:fs';
import { readRegularFile } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import { canonicalJson } from '../../core/hashing.ts';
import { BENCHMARK_FIELDS } from '../../analysis/grade-records.ts';
import { isObject, type Json, parseStrictJson } from '../../analysis/strict-json.ts';
import { gradeSurface, predictionFromJson } from '../../analysis/grade.ts';
import type { Surface } from '../../analysis/effects.ts';
import { LOCK_FILE } from '../../references/lock.ts';
import { type ControlTask, taskKey } from './grid.ts';
import { MAX_RECORDS_FILE_BYTES } from './records.ts';

/** A run file is a few kB. */
const RUN_FILE_MAX_BYTES = 1 << 20;

export const RECORDS_FILE = 'records.jsonl';
export const PARTIAL_FILE = 'records.jsonl.partial';
export const RUN_FILE = 'run.json';

export interface RunIdentity {
  controls_version: number;
  tasks_sha256: string;
  references: Record<string, { table_sha256: string; plan_sha256: string }>;
  controls_code_sha256: string;
  numerical_profile: string;
}

/** What differs between an earlier run's identity and this one's, in words. */
function identityChanges(earlier: Partial<RunIdentity>, now: RunIdentity): string[] {
  const changes: string[] = [];
  if (earlier.tasks_sha256 !== now.tasks_sha256) changes.push('the grid (conditions, methods, budgets or seeds)');
  const moved = Object.keys(now.references).filter(
    (c) => canonicalJson(earlier.references?.[c] ?? null) !== canonicalJson(now.references[c]),
  );
  if (moved.length && earlier.tasks_sha256 === now.tasks_sha256)
    changes.push(`the reference table or plan of ${moved.slice(0, 5).join(', ')}${moved.length > 5 ? ', …' : ''}`);
  if (earlier.controls_code_sha256 !== now.controls_code_sha256) changes.push("the controls' code (workflows/evaluation/)");
  if (earlier.numerical_profile !== now.numerical_profile) changes.push('the numerical profile');
  if (earlier.controls_version !== now.controls_version) changes.push('the record format');
  return changes;
}

/**
 * Refuses (UserError) a folder this run must not write into: another run's (naming what differs), or
 * one that holds files of its own. Returns whether an earlier run of this identity left it.
 */
export function checkRunFolder(out: string, identity: RunIdentity): boolean {
  if (!existsSync(out)) return false;
  const runFile = `${out}/${RUN_FILE}`;
  if (!existsSync(runFile)) {
    const present = readdirSync(out).filter((f) => f !== LOCK_FILE);
    if (present.length)
      throw new UserError(
        `--out ${out} holds files of its own (${present.slice(0, 3).join(', ')}${present.length > 3 ? ', …' : ''}) and no controls run; name a new or empty folder`,
      );
    return false;
  }
  let earlier: { identity?: Partial<RunIdentity> } | undefined;
  try {
    // a regular file of bounded size only: a FIFO or a device is refused, never waited on or read forever
    earlier = JSON.parse(readRegularFile(runFile, 'controls run file', RUN_FILE_MAX_BYTES).toString('utf8')) as typeof earlier;
  } catch (error) {
    if (error instanceof UserError) throw error;
    earlier = undefined;
  }
  if (!earlier?.identity) throw new UserError(`--out ${out}: its ${RUN_FILE} is not a controls run's; name another folder`);
  const changes = identityChanges(earlier.identity, identity);
  if (changes.length)
    throw new UserError(
      `--out ${out} holds the controls of another run: ${changes.join(', ')} changed since; name another folder, or remove that one to start afresh`,
    );
  return true;
}

/** Why a record line is not a verified record of `task` at one of its budgets (undefined: it is). */
function lineProblem(record: Record<string, Json>, task: ControlTask, surface: Surface, reference: unknown): string | undefined {
  const budget = record.budget;
  if (typeof budget !== 'number' || !task.budgets.includes(budget)) return 'a budget outside the grid';
  if (canonicalJson(record.reference ?? null) !== canonicalJson(reference)) return 'another reference';
  if (!isObject(record.observations) || !isObject(record.score)) return 'no observations or score';
  const observed = Object.entries(record.observations);
  const width = surface.dimensions;
  const order = Array.isArray(record.acquisition_order) ? record.acquisition_order : [];
  if (
    order[0] !== '0'.repeat(width) ||
    order[1] !== '1'.repeat(width) ||
    canonicalJson([...order].sort()) !== canonicalJson(observed.map(([mask]) => mask).sort())
  )
    return 'observations that are not its acquisition order, anchors first';
  if (record.actual_credits !== observed.length - 2 || observed.length - 2 > budget) return 'credits that are not its purchases';
  for (const [mask, utility] of observed) {
    if (!/^[01]+$/.test(mask) || mask.length !== width || utility !== surface.utilities[Number.parseInt(mask, 2)])
      return `observation ${mask.slice(0, 8)} that is not the reference's`;
  }
  const predicted = predictionFromJson(record.score.prediction_table ?? null, width, 'prediction_table');
  const score = gradeSurface(surface, predicted, { observed: observed.map(([mask]) => mask) });
  for (const field of BENCHMARK_FIELDS) {
    const again = field === 'prediction_table' ? score.prediction_table : score[field];
    if (canonicalJson(record.score[field] ?? null) !== canonicalJson(again as Json)) return `a score whose ${field} grade does not give`;
  }
  return undefined;
}

export interface KeptRecords {
  /** The verified lines of finished tasks, task by task. */
  lines: string[];
  /** Keys (taskKey) of the tasks kept whole. */
  done: Set<string>;
  /** Lines left out, counted by why. */
  dropped: Map<string, number>;
}

/** The finished tasks of an interrupted run of this grid (see the header). */
export function keptRecords(
  partial: string,
  tasks: readonly ControlTask[],
  surfaceOf: (condition: string) => { surface: Surface; reference: unknown },
): KeptRecords {
  const kept: KeptRecords = { lines: [], done: new Set(), dropped: new Map() };
  if (!existsSync(partial)) return kept;
  const drop = (why: string) => kept.dropped.set(why, (kept.dropped.get(why) ?? 0) + 1);
  const wanted = new Map(tasks.map((t) => [taskKey(t), t]));
  const byTask = new Map<string, Map<number, string>>();
  const lines = readRegularFile(partial, 'control records file', MAX_RECORDS_FILE_BYTES).toString('utf8').split('\n');
  for (const [k, line] of lines.entries()) {
    if (line.trim() === '') continue;
    let record: Json;
    try {
      // strict: a NaN, an Infinity or a number beyond float64 is no record (never a crash further on)
      record = parseStrictJson(line, `line ${k + 1}`);
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      drop(`a line that is not whole, strict JSON (line ${k + 1})`);
      continue;
    }
    if (!isObject(record)) {
      drop('not a record');
      continue;
    }
    const seed = typeof record.seed === 'number' ? record.seed : null;
    const task = wanted.get(taskKey({ condition: String(record.condition), method: String(record.method), seed }));
    if (!task) {
      drop('not a task of this grid');
      continue;
    }
    const { surface, reference } = surfaceOf(task.condition);
    let problem: string | undefined;
    try {
      problem = lineProblem(record, task, surface, reference);
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      problem = 'an invalid prediction table';
    }
    if (problem) {
      drop(problem);
      continue;
    }
    const budgets = byTask.get(taskKey(task)) ?? new Map<number, string>();
    if (budgets.has(record.budget as number)) drop('a repeated record');
    else budgets.set(record.budget as number, line);
    byTask.set(taskKey(task), budgets);
  }
  for (const task of tasks) {
    const budgets = byTask.get(taskKey(task));
    if (!budgets || !task.budgets.every((b) => budgets.has(b))) continue;
    kept.done.add(taskKey(task));
    kept.lines.push(...task.budgets.map((b) => budgets.get(b)!));
  }
  return kept;
}
