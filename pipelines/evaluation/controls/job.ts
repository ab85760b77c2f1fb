// `wwref controls run`: the numerical controls on reference surfaces. The grid (grid.ts) becomes tasks;
// admitted workers of the pinned runtime (workflows/evaluation/worker.py, checked like record workers:
// profile, versions, one thread, code) compute each task's purchases and tables for all its budgets;
// here each table is scored by grade and written as a record. Records are appended task by task to
// OUT/records.jsonl.partial, so an interrupted run keeps them and the same command resumes; the
// complete file is renamed to OUT/records.jsonl only when every task is in it, then the summaries
// are written (each file atomically). What an earlier run left is kept only when recomputation gives
// it to the letter (the purchases are deterministic and the fits bit-identical: recomputing is cheap);
// a failed append (a full disk) is cut back by appendNoFollow, so the resume file never holds half a record.
import { existsSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { appendNoFollow, writeFileAtomic, writeJsonAtomic } from '../../core/fsutil.ts';
import { digest, sha256Hex } from '../../core/hashing.ts';
import { ROOT } from '../../core/paths.ts';
import type { Settings } from '../../core/settings.ts';
import { Catalog, type CatalogCondition } from '../../catalog/catalog.ts';
import { loadCatalog } from '../../references/store.ts';
import { computeTasks, type PoolOptions, type Prepared, prepareConditions } from './compute.ts';
import { type ControlTask, type MethodName, planGrid, taskKey, trackOf } from './grid.ts';
import { checkDistinct, type ConditionLookup, readControlRecords } from './records.ts';
import { checkRunFolder, type KeptRecords, keptRecords, PARTIAL_FILE, RECORDS_FILE, RUN_FILE, type RunIdentity } from './resume.ts';
import { lockFolder } from '../../references/lock.ts';
import { writeSummaries, type SummaryFiles } from './outputs.ts';

export interface ControlsOptions {
  /** Condition ids (default: every condition with references in the settings' reference folder). */
  conditions?: readonly string[];
  methods?: readonly MethodName[];
  budgets?: readonly number[];
  seeds?: number;
  grid?: 'published';
  /** The output folder, already checked (cli/output-path.ts). */
  out: string;
  workers: number;
  log: (line: string) => void;
  quiet?: boolean;
  /** Draw the recovery figure (default true). */
  figures?: boolean;
}

export interface ControlsOutcome {
  out: string;
  records: number;
  tasks: number;
  /** Tasks whose records an earlier, interrupted run of the same grid had written. */
  reused_tasks: number;
  skipped: string[];
  seconds: number;
  files: SummaryFiles & { records: string };
}

/** The digest of the controls' Python (workflows/evaluation/): it is not part of the references' code digest. */
export function controlsCodeSha256(): string {
  const folder = join(ROOT, 'workflows', 'evaluation');
  const files = readdirSync(folder)
    .filter((f) => f.endsWith('.py'))
    .sort();
  return digest(Object.fromEntries(files.map((f) => [`workflows/evaluation/${f}`, sha256Hex(readFileSync(join(folder, f)))])));
}

/** A relative cost, to start the longest tasks first. */
function cost(task: ControlTask, dimensions: number): number {
  const most = Math.max(...task.budgets);
  return task.method.startsWith('gp_') ? most * 2 ** dimensions : most;
}

/** The condition of a record that names its instance (and a mask width), as the benchmark's records do. */
export function catalogLookup(catalog: Catalog): ConditionLookup {
  const conditions = [...catalog.conditions.values()];
  const fits = (c: CatalogCondition, width: number | undefined) => width === undefined || c.dimensions === width;
  return (name, width) => {
    // a condition id of the record's width; else the instance's condition of that width (a six-option
    // record of a paired source names the instance, e.g. "wine" for wine__d6)
    const byId = catalog.conditions.get(name);
    const match = byId && fits(byId, width) ? [byId] : conditions.filter((c) => c.source === name && fits(c, width));
    return match.length === 1 ? { id: match[0]!.id, track: trackOf(match[0]!) } : undefined;
  };
}

export async function runControls(settings: Settings, options: ControlsOptions): Promise<ControlsOutcome> {
  const started = Date.now();
  const catalog = loadCatalog(settings);
  const published = new Set(Catalog.loadPublished(settings.paths.sources).conditions.keys());
  // the published grid covers the published conditions: by default those, not sources added beside them
  const prepared = prepareConditions(
    settings,
    catalog,
    options.conditions ?? [],
    (id) => options.grid !== 'published' || published.has(id),
  );
  const byId = new Map(prepared.map((p) => [p.condition.id, p]));
  const grid = planGrid({
    conditions: prepared.map((p) => p.condition),
    grid: options.grid,
    methods: options.methods,
    budgets: options.budgets,
    seeds: options.seeds,
    published,
  });
  for (const line of grid.skipped) options.log(`controls: ${line}`);
  if (!grid.tasks.length) throw new UserError('no control to run: the methods asked for do not apply to the conditions asked for');

  const out = options.out;
  const identity: RunIdentity = {
    controls_version: 1,
    tasks_sha256: digest(grid.tasks),
    references: Object.fromEntries(prepared.map((p) => [p.condition.id, p.context.reference])),
    controls_code_sha256: controlsCodeSha256(),
    numerical_profile: settings.profile.name,
  };
  const recordsFile = join(out, RECORDS_FILE);
  const partial = join(out, PARTIAL_FILE);
  checkRunFolder(out, identity);
  // one run writes a folder at a time; a second one is refused at once rather than mixed in
  const release = await lockFolder(out, 0);
  let reused = 0;
  const pool = (kept: string): PoolOptions => ({ workers: options.workers, quiet: options.quiet, log: options.log, kept });
  const surfaceOf = (c: string) => ({ surface: byId.get(c)!.surface, reference: byId.get(c)!.context.reference });
  try {
    const earlier = checkRunFolder(out, identity);
    writeJsonAtomic(join(out, RUN_FILE), { identity, grid: options.grid ?? 'custom', tasks: grid.tasks.length, skipped: grid.skipped });
    const total = grid.tasks.reduce((n, t) => n + t.budgets.length, 0);
    if (earlier && existsSync(recordsFile)) {
      reused = grid.tasks.length;
      const complete = await recomputedAlike(
        settings,
        keptRecords(recordsFile, grid.tasks, surfaceOf),
        grid.tasks,
        byId,
        pool('nothing was changed'),
      );
      if (complete.lines.length !== total)
        throw new UserError(
          `${recordsFile} is not this run's complete set of records (it was changed); name another --out, or remove that folder`,
        );
    } else {
      // a resumed run keeps whole tasks that recomputation gives to the letter: the partial file is rewritten without anything else
      const written = keptRecords(partial, grid.tasks, surfaceOf);
      if (written.done.size)
        options.log(`controls: recomputing the ${written.done.size} task(s) an earlier run wrote, to keep only what they give`);
      const kept = await recomputedAlike(settings, written, grid.tasks, byId, pool(`nothing was changed in ${partial}`));
      reused = kept.done.size;
      if (existsSync(partial) || kept.lines.length) writeFileAtomic(partial, kept.lines.map((l) => `${l}\n`).join(''));
      const todo = grid.tasks
        .filter((t) => !kept.done.has(taskKey(t)))
        .sort((a, b) => cost(b, byId.get(b.condition)!.surface.dimensions) - cost(a, byId.get(a.condition)!.surface.dimensions));
      if (reused || kept.dropped.size) {
        const dropped = [...kept.dropped].map(([why, n]) => `${n} with ${why}`).join(', ');
        options.log(
          `controls: resuming: ${reused} of ${grid.tasks.length} task(s) kept from ${partial}${dropped ? `; line(s) left out: ${dropped}` : ''}`,
        );
      }
      const hint = `the finished tasks are kept in ${partial}; run the same command to resume`;
      // one write per task: whole tasks only (appendNoFollow cuts a failed write back)
      await computeTasks(settings, todo, byId, pool(hint), (_task, lines) => appendNoFollow(partial, lines.map((l) => `${l}\n`).join('')));
      const count = readFileSync(partial, 'utf8').split('\n').filter(Boolean).length;
      if (count !== total) throw new Error(`controls: ${partial} holds ${count} records, the grid has ${total}`);
      renameSync(partial, recordsFile);
    }
  } finally {
    release();
  }

  const records = readControlRecords(recordsFile); // our own records, computed or recomputed above
  checkDistinct(records);
  const files = await writeSummaries(
    settings,
    out,
    records,
    { identity, grid: options.grid ?? 'custom', skipped: grid.skipped },
    options.figures ?? true,
    undefined,
    options.log,
  );
  return {
    out,
    records: records.length,
    tasks: grid.tasks.length,
    reused_tasks: reused,
    skipped: grid.skipped,
    seconds: (Date.now() - started) / 1000,
    files: { ...files, records: recordsFile },
  };
}

/** The kept tasks whose every line recomputation gives to the letter (a reordered purchase, a forged table: left out, counted). */
async function recomputedAlike(
  settings: Settings,
  kept: KeptRecords,
  tasks: readonly ControlTask[],
  byId: ReadonlyMap<string, Prepared>,
  pool: PoolOptions,
): Promise<KeptRecords> {
  const candidates = tasks.filter((t) => kept.done.has(taskKey(t)));
  const alike: KeptRecords = { lines: [], done: new Set(), dropped: new Map(kept.dropped) };
  const byTask = new Map<string, string[]>();
  await computeTasks(settings, candidates, byId, { ...pool, quiet: true }, (task, lines) => byTask.set(taskKey(task), lines));
  let at = 0;
  for (const task of candidates) {
    // keptRecords lists a kept task's lines together, its budgets in the grid's order
    const stored = kept.lines.slice(at, at + task.budgets.length);
    at += task.budgets.length;
    const again = byTask.get(taskKey(task))!;
    const differing = stored.filter((line, k) => line !== again[k]).length;
    if (differing) {
      const why = 'purchases, a table or fields that recomputation does not give';
      alike.dropped.set(why, (alike.dropped.get(why) ?? 0) + differing);
      continue;
    }
    alike.done.add(taskKey(task));
    alike.lines.push(...stored);
  }
  return alike;
}
