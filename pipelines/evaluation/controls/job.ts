// `wwref controls run`: the numerical controls on reference surfaces. The grid (grid.ts) becomes tasks;
// admitted workers of the pinned runtime (workflows/evaluation/worker.py, checked like record workers:
// profile, versions, one thread, code) compute each task's purchases and tables for all its budgets;
// here each table is scored by grade and written as a record. Records are appended task by task to
// OUT/records.jsonl.partial, so an interrupted run keeps them and the same command resumes; the
// complete file is renamed to OUT/records.jsonl only when every task is in it, then the summaries
// are written (each file atomically).
import { existsSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { Interrupted, UserError } from '../../core/errors.ts';
import { appendNoFollow, writeFileAtomic, writeJsonAtomic } from '../../core/fsutil.ts';
import { digest, sha256Hex } from '../../core/hashing.ts';
import { ROOT } from '../../core/paths.ts';
import { Progress } from '../../core/progress.ts';
import type { Settings } from '../../core/settings.ts';
import { Catalog, type CatalogCondition } from '../../catalog/catalog.ts';
import type { PythonWorker } from '../../execution/python-worker.ts';
import { computeControl, startControlsWorker } from './worker.ts';
import { loadCatalog, ReferenceStore } from '../../references/store.ts';
import { referenceSurface } from '../../analysis/grade.ts';
import { gradeSurface } from '../../analysis/grade.ts';
import type { Surface } from '../../analysis/effects.ts';
import { type ControlTask, type MethodName, planGrid, taskKey, trackOf } from './grid.ts';
import { checkDistinct, type ConditionLookup, type RecordContext, readControlRecords, recordLine } from './records.ts';
import { checkRunFolder, keptRecords, PARTIAL_FILE, RECORDS_FILE, RUN_FILE, type RunIdentity } from './resume.ts';
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

interface Prepared {
  condition: CatalogCondition;
  surface: Surface;
  context: Omit<RecordContext, 'method' | 'seed'>;
}

/** The named conditions, or by default every condition with references (that `admit` admits). */
function prepareConditions(settings: Settings, catalog: Catalog, ids: readonly string[], admit: (id: string) => boolean): Prepared[] {
  const store = new ReferenceStore(settings.paths.references, settings.paths);
  const entries = store.requireManifest().conditions;
  const has = (id: string) => Object.hasOwn(entries, id);
  const chosen = ids.length ? catalog.selectConditions(ids) : catalog.selectConditions().filter((c) => has(c.id) && admit(c.id));
  const missing = chosen.filter((c) => !has(c.id)).map((c) => c.id);
  if (missing.length)
    throw new UserError(
      `no references for ${missing.join(', ')} in ${store.dir}; run 'wwref rebuild' (or 'wwref add-source'), or pass --references DIR`,
    );
  if (!chosen.length) throw new UserError(`no condition has references in ${store.dir}`);
  return chosen.map((condition) => {
    const entry = entries[condition.id]!;
    return {
      condition,
      surface: referenceSurface(settings, condition.id, store.dir),
      context: {
        condition: condition.id,
        instance: condition.source,
        family: condition.family,
        track: trackOf(condition),
        reference: { table_sha256: entry.table_sha256, plan_sha256: entry.plan_sha256 },
      },
    };
  });
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
  try {
    const earlier = checkRunFolder(out, identity);
    writeJsonAtomic(join(out, RUN_FILE), { identity, grid: options.grid ?? 'custom', tasks: grid.tasks.length, skipped: grid.skipped });
    const total = grid.tasks.reduce((n, t) => n + t.budgets.length, 0);
    if (earlier && existsSync(recordsFile)) {
      reused = grid.tasks.length;
      const complete = keptRecords(recordsFile, grid.tasks, (c) => ({
        surface: byId.get(c)!.surface,
        reference: byId.get(c)!.context.reference,
      }));
      if (complete.lines.length !== total)
        throw new UserError(
          `${recordsFile} is not this run's complete set of records (it was changed); name another --out, or remove that folder`,
        );
    } else {
      // a resumed run keeps whole, verified tasks only: the partial file is rewritten without anything else
      const kept = keptRecords(partial, grid.tasks, (c) => ({ surface: byId.get(c)!.surface, reference: byId.get(c)!.context.reference }));
      reused = kept.done.size;
      writeFileAtomic(partial, kept.lines.map((l) => `${l}\n`).join(''));
      const todo = grid.tasks
        .filter((t) => !kept.done.has(taskKey(t)))
        .sort((a, b) => cost(b, byId.get(b.condition)!.surface.dimensions) - cost(a, byId.get(a.condition)!.surface.dimensions));
      if (reused || kept.dropped.size) {
        const dropped = [...kept.dropped].map(([why, n]) => `${n} with ${why}`).join(', ');
        options.log(
          `controls: resuming: ${reused} of ${grid.tasks.length} task(s) kept from ${partial}${dropped ? `; line(s) left out: ${dropped}` : ''}`,
        );
      }
      await computeTasks(settings, todo, byId, partial, options);
      const written = readFileSync(partial, 'utf8').split('\n').filter(Boolean).length;
      if (written !== total) throw new Error(`controls: ${partial} holds ${written} records, the grid has ${total}`);
      renameSync(partial, recordsFile);
    }
  } finally {
    release();
  }

  const records = readControlRecords(recordsFile); // our own records name condition and track
  checkDistinct(records);
  const files = await writeSummaries(
    settings,
    out,
    records,
    { identity, grid: options.grid ?? 'custom', skipped: grid.skipped },
    options.figures ?? true,
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

async function computeTasks(
  settings: Settings,
  tasks: readonly ControlTask[],
  byId: ReadonlyMap<string, Prepared>,
  partial: string,
  options: ControlsOptions,
): Promise<void> {
  if (!tasks.length) return;
  const count = Math.max(1, Math.min(options.workers, tasks.length));
  const progress = new Progress(
    'controls',
    tasks.reduce((n, t) => n + t.budgets.length, 0),
    { quiet: options.quiet, workers: count },
  );
  for (const task of tasks) progress.expect(task.condition, task.budgets.length);
  const workers: PythonWorker[] = [];
  let stopped: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopped) return;
    stopped = signal;
    options.log(`\n${signal === 'SIGINT' ? 'interrupted' : `stopped by ${signal}`}: stopping the workers…`);
    for (const w of workers) w.kill();
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, onSignal);
  const interrupted = () =>
    new Interrupted(
      stopped!,
      `${stopped === 'SIGINT' ? 'interrupted' : `stopped by ${stopped}`}: the finished tasks are kept in ${partial}; run the same command to resume`,
    );
  try {
    const started = await Promise.allSettled(Array.from({ length: count }, () => startControlsWorker(settings)));
    for (const s of started) if (s.status === 'fulfilled') workers.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    // a worker that a signal stopped while it started is no set-up problem
    if (stopped) throw interrupted();
    if (failed) throw failed.reason;
    let next = 0;
    const loop = async (worker: PythonWorker) => {
      while (!stopped && next < tasks.length) {
        const task = tasks[next++]!;
        const { condition, surface, context } = byId.get(task.condition)!;
        const answer = await computeControl(worker, {
          width: surface.dimensions,
          utilities: surface.utilities,
          method: task.method,
          budgets: task.budgets,
          seed: task.seed ?? 0,
          equivalences: condition.condition.equivalences.map((e) => ({ option: e.option, inactive_when: e.inactive_when })),
        });
        const lines = answer.map((result) => {
          const score = gradeSurface(surface, result.prediction, { observed: result.observations.map(([mask]) => mask) });
          return recordLine({ ...context, method: task.method, seed: task.seed }, result, score);
        });
        if (lines.length !== task.budgets.length)
          throw new Error(`controls: the worker returned ${lines.length} budgets for ${taskKey(task)}`);
        // one write per task: a crash leaves whole tasks and at most one torn line, which a resumed run drops
        appendNoFollow(partial, lines.map((l) => `${l}\n`).join(''));
        for (const _ of lines) progress.tick(task.condition, true);
      }
    };
    await Promise.all(workers.map(loop)).catch((error: unknown) => {
      if (stopped) return;
      throw error;
    });
    if (stopped) throw interrupted();
  } finally {
    progress.stop();
    for (const signal of signals) process.removeListener(signal, onSignal);
    await Promise.all(workers.map((w) => w.close()));
  }
}
