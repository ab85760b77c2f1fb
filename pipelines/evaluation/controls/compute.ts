// Computing control tasks: the conditions' reference surfaces and record context, and a pool of admitted
// controls' workers (worker.ts) that computes tasks and hands each task's record lines on as it is done.
// Used by a run (job.ts) and by every check that recomputes records before they are used (verify.ts).
import { Interrupted, UserError } from '../../core/errors.ts';
import { Progress } from '../../core/progress.ts';
import type { Settings } from '../../core/settings.ts';
import type { Catalog, CatalogCondition } from '../../catalog/catalog.ts';
import type { PythonWorker } from '../../execution/python-worker.ts';
import { ReferenceStore } from '../../references/store.ts';
import { gradeSurface, referenceSurface } from '../../analysis/grade.ts';
import type { Surface } from '../../analysis/effects.ts';
import { type ControlTask, taskKey, trackOf } from './grid.ts';
import { type RecordContext, recordLine } from './records.ts';
import { computeControl, startControlsWorker } from './worker.ts';

export interface Prepared {
  condition: CatalogCondition;
  surface: Surface;
  context: Omit<RecordContext, 'method' | 'seed'>;
}

/** The named conditions, or by default every condition with references (that `admit` admits). */
export function prepareConditions(
  settings: Settings,
  catalog: Catalog,
  ids: readonly string[],
  admit: (id: string) => boolean = () => true,
): Prepared[] {
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

/** One task computed by `worker`: its record lines, one per budget in ascending order, each table scored by grade. */
export async function taskLines(worker: PythonWorker, task: ControlTask, prepared: Prepared): Promise<string[]> {
  const { condition, surface, context } = prepared;
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
  if (lines.length !== new Set(task.budgets).size)
    throw new Error(`controls: the worker returned ${lines.length} budgets for ${taskKey(task)}`);
  return lines;
}

export interface PoolOptions {
  workers: number;
  quiet?: boolean;
  log: (line: string) => void;
  /** What an interruption leaves, said after "interrupted: ". */
  kept: string;
}

/**
 * Computes `tasks` on up to `options.workers` admitted workers, giving each task's lines to `onTask`
 * as it is done. SIGINT, SIGTERM or SIGHUP stops the workers: Interrupted, saying `options.kept`.
 */
export async function computeTasks(
  settings: Settings,
  tasks: readonly ControlTask[],
  byId: ReadonlyMap<string, Prepared>,
  options: PoolOptions,
  onTask: (task: ControlTask, lines: string[]) => void,
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
  const interrupted = () => new Interrupted(stopped!, `${stopped === 'SIGINT' ? 'interrupted' : `stopped by ${stopped}`}: ${options.kept}`);
  try {
    const started = await Promise.allSettled(Array.from({ length: count }, () => startControlsWorker(settings)));
    for (const s of started) if (s.status === 'fulfilled') workers.push(s.value);
    const refused = started.find((s) => s.status === 'rejected');
    // a worker that a signal stopped while it started is no set-up problem
    if (stopped) throw interrupted();
    if (refused) throw refused.reason;
    let next = 0;
    let failed = false; // one task's failure (a full disk) ends the others' loops: nothing more is handed on
    const loop = async (worker: PythonWorker) => {
      while (!stopped && !failed && next < tasks.length) {
        const task = tasks[next++]!;
        try {
          const lines = await taskLines(worker, task, byId.get(task.condition)!);
          if (failed) return;
          onTask(task, lines);
          for (const _ of lines) progress.tick(task.condition, true);
        } catch (error) {
          failed = true;
          throw error;
        }
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
