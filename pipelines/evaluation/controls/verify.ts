// Control records are used only when wwref computes them again. Records read for a summary (`controls
// summary --records`, `cohort run --controls DIR`, a finished run's records.jsonl read again) are
// recomputed on the references: the method's purchases are deterministic and its fits bit-identical, so
// every task is computed once more and each record must be what that gives (its purchases and their
// order, its table, its method's fields, grade's score within the tolerance of grade --records).
// A record that names another reference is refused naming both tables; one that names none is refused
// where the records must be wwref's own (a run folder). Second copies of one cell entry are kept once,
// and said. Anything else is refused in one line naming the file and line of the first such record.
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { UserError } from '../../core/errors.ts';
import type { Settings } from '../../core/settings.ts';
import { differingFields } from '../../analysis/grade-records.ts';
import { isObject, type Json, readStrictJsonFile } from '../../analysis/strict-json.ts';
import { loadCatalog } from '../../references/store.ts';
import { computeTasks, type Prepared, prepareConditions } from './compute.ts';
import { type ControlTask, DEFAULT_SEEDS, gridMethods, type MethodName, taskKey } from './grid.ts';
import type { CatalogCondition } from '../../catalog/catalog.ts';
import { recordIdentity, recordName, recordText, type StoredRecord } from './records.ts';
import { RECORDS_FILE, RUN_FILE } from './resume.ts';
import type { LeftOut } from './summary.ts';

export interface VerifiedRecords {
  records: StoredRecord[];
  /** By recordIdentity: the copies left out of that cell entry. */
  left_out: Map<string, LeftOut[]>;
  /** The reference every record was recomputed on, by condition. */
  references: Record<string, { table_sha256: string; plan_sha256: string }>;
}

export interface VerifyOptions {
  workers: number;
  /** The records must name the reference they were computed on (wwref's own records do). */
  requireReference: boolean;
  /** Second copies of one cell entry: kept once and said (default), or refused. */
  duplicates?: 'keep-once' | 'refuse';
  quiet?: boolean;
  log?: (line: string) => void;
}

const short = (sha: unknown) => (typeof sha === 'string' ? sha.slice(0, 12) : JSON.stringify(sha ?? null));
const show = (value: Json | undefined) => (value === undefined ? 'absent' : JSON.stringify(value).slice(0, 80));

/** Why a record's `reference` is not the one the references hold now (undefined: it is). */
function referenceProblem(record: StoredRecord, prepared: Prepared, required: boolean): string | undefined {
  const stored = (record as { reference?: Json }).reference;
  const now = prepared.context.reference;
  if (stored === undefined)
    return required ? `names no reference (a control record of a run names the reference table it was computed on)` : undefined;
  if (!isObject(stored) || stored.table_sha256 !== now.table_sha256 || stored.plan_sha256 !== now.plan_sha256)
    return (
      `was computed on reference table ${short(isObject(stored) ? stored.table_sha256 : stored)} (plan ${short(isObject(stored) ? stored.plan_sha256 : undefined)}), ` +
      `not on the references' table ${short(now.table_sha256)} (plan ${short(now.plan_sha256)}) of ${record.condition}`
    );
  return undefined;
}

/** The masks of a record line's "observations" object in the order written (undefined: not readable). */
export function writtenOrder(text: string): string[] | undefined {
  const body = /"observations"\s*:\s*\{([^{}]*)\}/.exec(text)?.[1];
  return body === undefined ? undefined : [...body.matchAll(/"([01]+)"\s*:/g)].map((m) => m[1]!);
}

/** Published records name the fitted GP's parameters `parameters`; wwref's `final_parameters`. */
const ALIASES: Record<string, string> = { parameters: 'final_parameters' };
/** The fields a record in the benchmark's form must carry (its method's fields it may leave out). */
const BENCHMARK_FORM = ['instance', 'family', 'method', 'budget', 'actual_credits', 'observations', 'score'];

/** The first way `stored` differs from the record recomputation gives (`expected`), or undefined. */
export function recordDifference(stored: { [key: string]: Json }, text: string, expected: { [key: string]: Json }): string | undefined {
  // wwref's own records (they name their reference) carry every field; the benchmark's may leave out the method's
  const required = Object.hasOwn(stored, 'reference') ? Object.keys(expected) : BENCHMARK_FORM;
  const absent = required.find(
    (key) => !Object.hasOwn(stored, key) && !Object.keys(ALIASES).some((a) => ALIASES[a] === key && Object.hasOwn(stored, a)),
  );
  if (absent) return `it has no "${absent}"`;
  for (const [key, value] of Object.entries(stored)) {
    if (key === 'seed' && expected.method !== 'random_degree2') continue; // a deterministic method buys the same under any seed
    if (key === 'reference') continue; // checked on its own, naming both tables
    const name = ALIASES[key] ?? key;
    if (!Object.hasOwn(expected, name)) return `it carries "${key}", which a ${String(expected.method)} record does not have`;
    const again = expected[name]!;
    if (key === 'score') {
      // grade's numbers within grade --records' tolerance (another implementation sums in another order)
      const d = differingFields(value, again, 'score')[0];
      if (d) return `its ${d.field} is ${show(d.stored)}; recomputed on the reference it is ${show(d.recomputed)}`;
      continue;
    }
    if (key === 'observations' && isObject(value) && isObject(again)) {
      const masks = [...new Set([...Object.keys(value), ...Object.keys(again)])];
      const wrong = masks.find((m) => !Object.hasOwn(value, m) || !Object.hasOwn(again, m) || !Object.is(value[m], again[m]));
      if (wrong)
        return `its observation of ${wrong} is ${show(value[wrong])}; the method's purchases on the reference give ${show(again[wrong])}`;
      continue;
    }
    if (!isDeepStrictEqual(value, again)) {
      const d = differingFields(value, again, key).find((x) => !isDeepStrictEqual(x.stored, x.recomputed)) ?? {
        field: key,
        stored: value,
        recomputed: again,
      };
      return `its ${d.field} is ${show(d.stored)}; recomputed it is ${show(d.recomputed)}`;
    }
  }
  const order = expected.acquisition_order as string[];
  const written = writtenOrder(text);
  if (!written || !isDeepStrictEqual(written, order))
    return `its purchases are written in the order ${written ? written.join(' ') : '(unreadable)'}; the method buys them in the order ${order.join(' ')}`;
  return undefined;
}

/** The tasks that recompute `records`: one per (condition, method, seed of the random design), with every budget the records name. */
function tasksOf(records: readonly StoredRecord[]): ControlTask[] {
  const tasks = new Map<string, ControlTask>();
  for (const r of records) {
    const task = {
      condition: r.condition,
      method: r.method as MethodName,
      seed: r.method === 'random_degree2' ? r.seed! : null,
      budgets: [],
    };
    const key = taskKey(task);
    const known = tasks.get(key) ?? task;
    if (!known.budgets.includes(r.budget)) known.budgets.push(r.budget);
    tasks.set(key, known);
  }
  for (const task of tasks.values()) task.budgets.sort((a, b) => a - b);
  return [...tasks.values()];
}

/** `records` that recomputation on the references gives, each cell entry once (see the header); anything else refused. */
export async function verifyControlRecords(
  settings: Settings,
  records: readonly StoredRecord[],
  options: VerifyOptions,
): Promise<VerifiedRecords> {
  const conditions = [...new Set(records.map((r) => r.condition))];
  const byId = new Map(prepareConditions(settings, loadCatalog(settings), conditions).map((p) => [p.condition.id, p]));
  for (const r of records) {
    const problem = referenceProblem(r, byId.get(r.condition)!, options.requireReference);
    if (problem) throw new UserError(`${r.read_from}: the record of ${recordName(r)} ${problem}`);
  }
  const recomputed = new Map<string, { [key: string]: Json }>();
  await computeTasks(
    settings,
    tasksOf(records),
    byId,
    { workers: options.workers, quiet: options.quiet ?? true, log: options.log ?? (() => {}), kept: 'nothing was written' },
    (task, lines) => {
      for (const line of lines) {
        const json = JSON.parse(line) as { [key: string]: Json };
        recomputed.set(`${taskKey(task)}\u0000${json.budget}`, json);
      }
    },
  );
  const wrong: string[] = [];
  for (const r of records) {
    const task = { condition: r.condition, method: r.method, seed: r.method === 'random_degree2' ? r.seed! : null };
    const expected = recomputed.get(`${taskKey(task)}\u0000${r.budget}`)!;
    // a record naming only its instance was completed with its catalog condition and track: the ones recomputation names
    const { read_from: _from, ...stored } = r as StoredRecord & { [key: string]: Json };
    const problem = recordDifference(stored as { [key: string]: Json }, recordText(r) ?? '', expected);
    if (problem) wrong.push(`${r.read_from}: the record of ${recordName(r)} is not what wwref computes: ${problem}`);
  }
  if (wrong.length)
    throw new UserError(
      `${wrong[0]}${wrong.length > 1 ? ` (and ${wrong.length - 1} more record(s) like it)` : ''}; a control record is used only as recomputation gives it`,
    );
  const references = Object.fromEntries([...byId].map(([id, p]) => [id, p.context.reference]));
  const verified = { ...keptOnce(records, options.duplicates ?? 'keep-once'), references };
  if (options.requireReference) checkSeeds(verified.records);
  return verified;
}

/** Each cell entry once: a second copy is left out and said, or refused. */
function keptOnce(records: readonly StoredRecord[], duplicates: 'keep-once' | 'refuse'): Omit<VerifiedRecords, 'references'> {
  const first = new Map<string, StoredRecord>();
  const left_out = new Map<string, LeftOut[]>();
  for (const r of records) {
    const key = recordIdentity(r);
    const kept = first.get(key);
    if (!kept) {
      first.set(key, r);
      continue;
    }
    if (duplicates === 'refuse')
      throw new UserError(
        `${r.read_from}: a second copy of the record of ${recordName(r)} (the first: ${kept.read_from}); a summary counts each once`,
      );
    left_out.set(key, [...(left_out.get(key) ?? []), { record: r.read_from, why: `a second copy of ${kept.read_from}` }]);
  }
  return { records: [...first.values()], left_out };
}

/**
 * Refuses a run's records whose random designs are not seeds 0 … n − 1 in every cell, the same n
 * everywhere (a run draws them so): records of a chosen few seeds would make the random design's mean
 * what the choice made it, each record still what recomputation gives.
 */
function checkSeeds(records: readonly StoredRecord[]): void {
  const seeds = new Map<string, number[]>();
  for (const r of records)
    if (r.method === 'random_degree2') {
      const cell = `${r.condition} at budget ${r.budget}`;
      seeds.set(cell, [...(seeds.get(cell) ?? []), r.seed!]);
    }
  let first: [string, number] | undefined;
  for (const [cell, list] of seeds) {
    const sorted = [...list].sort((a, b) => a - b);
    if (sorted.some((seed, k) => seed !== k))
      throw new UserError(
        `the random design's records of ${cell} are seeds ${sorted.slice(0, 8).join(', ')}${sorted.length > 8 ? ', …' : ''}, not 0 to ${sorted.length - 1}: not a run's draws (some left out?); use the run's records.jsonl as it wrote it`,
      );
    first ??= [cell, sorted.length];
    if (sorted.length !== first[1])
      throw new UserError(
        `the random design has ${sorted.length} seed(s) in ${cell} but ${first[1]} in ${first[0]}: not one run's draws; use the run's records.jsonl as it wrote it`,
      );
  }
}

/** A (condition, budget) cell a summary needs controls for. */
export interface NeededCell {
  condition: CatalogCondition;
  budget: number;
}

/**
 * Refuses, in one line naming what is missing, the records of a `controls run` folder that do not hold
 * every control method its grid runs (`controls run`'s default, or `--grid published` as its run.json
 * says) at the default seeds (the random design at seeds 0 … 19, as the summaries and a cohort's own
 * controls have them) in every cell in `cells`. What must be there is derived from the cells and the
 * methods, never from a count run.json stores: a folder cut down (seeds, a method left out) with its
 * run.json edited to match is refused like any other.
 */
export function checkCompleteRun(dir: string, records: readonly StoredRecord[], cells: readonly NeededCell[]): void {
  const file = join(dir, RUN_FILE);
  const run = readStrictJsonFile(file, 'controls run file', 1 << 20);
  if (!isObject(run) || !isObject(run.identity)) throw new UserError(`${file} is no controls run's (it has no identity)`);
  const grid = run.grid === 'published' ? 'published' : undefined;
  const held = new Set(
    records.map((r) => `${r.condition}\u0000${r.budget}\u0000${r.method}\u0000${r.method === 'random_degree2' ? r.seed : ''}`),
  );
  const missing: string[] = [];
  const seen = new Set<string>();
  for (const { condition, budget } of cells) {
    const cell = `${condition.id} B=${budget}`;
    if (seen.has(cell)) continue;
    seen.add(cell);
    for (const method of gridMethods(condition, grid)) {
      const seeds = method === 'random_degree2' ? Array.from({ length: DEFAULT_SEEDS }, (_, s) => s) : [''];
      const absent = seeds.filter((seed) => !held.has(`${condition.id}\u0000${budget}\u0000${method}\u0000${seed}`));
      if (!absent.length) continue;
      const which =
        method !== 'random_degree2'
          ? ''
          : absent.length === 1
            ? ` seed ${absent[0]}`
            : ` seeds ${absent[0]} … ${absent.at(-1)} (${absent.length})`;
      missing.push(`${cell} ${method}${which}`);
    }
    const extra = records.find(
      (r) => r.condition === condition.id && r.budget === budget && r.method === 'random_degree2' && r.seed! >= DEFAULT_SEEDS,
    );
    if (extra) missing.push(`${cell}: random_degree2 seed ${extra.seed} beyond the default ${DEFAULT_SEEDS} seeds`);
  }
  if (missing.length)
    throw new UserError(
      `${join(dir, RECORDS_FILE)} is not a complete controls run of the cells needed (every method of its grid, the random design at seeds 0 … ${DEFAULT_SEEDS - 1}): ${missing.slice(0, 3).join('; ')}${missing.length > 3 ? `; and ${missing.length - 3} more` : ''}; run 'wwref controls run' on these conditions and budgets with its default methods and seeds`,
    );
}
