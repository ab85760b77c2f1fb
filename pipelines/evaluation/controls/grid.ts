// Which controls run: the eight methods of the benchmark, the tracks a condition belongs to, and the
// grid of (condition, method, seed, budgets) tasks, either the published one or one a user asks for.
// A task is plain data: the worker computes every budget of it in one call (the acquisitions are nested).
import { UserError } from '../../core/errors.ts';
import type { CatalogCondition } from '../../catalog/catalog.ts';

export const METHODS = [
  'design_degree1',
  'design_degree2',
  'random_degree2',
  'gp_grid_variance',
  'gp_effect_variance',
  'gp_code_effect_variance',
  'code_canonical_design_degree1',
  'code_canonical_design_degree2',
] as const;
export type MethodName = (typeof METHODS)[number];

/** Methods that read the equivalences a condition's plan declares. */
export const CODE_AWARE: ReadonlySet<MethodName> = new Set([
  'gp_code_effect_variance',
  'code_canonical_design_degree1',
  'code_canonical_design_degree2',
]);
const PLAIN = METHODS.filter((m) => !CODE_AWARE.has(m));

/** The random design's seeds are 0 … seeds−1. */
export const DEFAULT_SEEDS = 20;
/** More seeds than this is no control any summary needs (the benchmark has 20). */
export const MAX_SEEDS = 1000;

/** four: 4 options; six: a 6-option condition paired with a 4-option one; six_added: the other 6-option conditions. */
export type Track = 'four' | 'six' | 'six_added';

export function trackOf(condition: CatalogCondition): Track {
  if (condition.dimensions === 4) return 'four';
  return condition.condition.paired_with ? 'six' : 'six_added';
}

/** The published grid's budgets by track (B = 14 and 62 are exhaustive); also the default budgets. */
export const TRACK_BUDGETS: Record<Track, readonly number[]> = {
  four: [0, 4, 8, 14],
  six: [0, 4, 8, 14, 20, 32, 62],
  six_added: [0, 8, 20, 32, 62],
};

export interface ControlTask {
  condition: string;
  method: MethodName;
  /** The random design's seed; null for the deterministic methods. */
  seed: number | null;
  budgets: number[];
}

/** The key of a task's records in a records file: one task gives one record per budget. */
export function taskKey(task: { condition: string; method: string; seed: number | null }): string {
  return `${task.condition}\u0000${task.method}\u0000${task.seed ?? ''}`;
}

export interface GridRequest {
  conditions: readonly CatalogCondition[];
  /** `published`: the benchmark's grid on the published conditions among `conditions`. */
  grid?: 'published';
  methods?: readonly MethodName[];
  budgets?: readonly number[];
  seeds?: number;
  /** Ids of the published catalog's conditions (the published grid runs on these only). */
  published: ReadonlySet<string>;
}

export interface Grid {
  tasks: ControlTask[];
  /** Why some (condition, method) pairs do not run, one line each. */
  skipped: string[];
}

function methodsOf(condition: CatalogCondition, request: GridRequest): { run: MethodName[]; skipped: string[] } {
  const asked = request.methods?.length ? [...new Set(request.methods)] : METHODS;
  if (request.grid === 'published') {
    const track = trackOf(condition);
    return { run: asked.filter((m) => track === 'six' || !CODE_AWARE.has(m)), skipped: [] };
  }
  const declared = condition.condition.equivalences.length > 0;
  const code = asked.filter((m) => CODE_AWARE.has(m));
  if (declared || !code.length) return { run: [...asked], skipped: [] };
  return {
    run: asked.filter((m) => !CODE_AWARE.has(m)),
    skipped: [`${condition.id}: ${code.join(', ')} skipped: its plan declares no equivalences, so a code-aware method is its plain one`],
  };
}

/** The methods a grid (`controls run`'s default, or `--grid published`) runs on `condition`. */
export function gridMethods(condition: CatalogCondition, grid?: 'published'): MethodName[] {
  return methodsOf(condition, { conditions: [condition], grid, published: new Set() }).run;
}

/** The tasks of a grid; refuses (UserError) a budget outside 0 … 2^d − 2 and seeds ≤ 0. */
export function planGrid(request: GridRequest): Grid {
  const seeds = request.seeds ?? DEFAULT_SEEDS;
  if (!Number.isInteger(seeds) || seeds <= 0 || seeds > MAX_SEEDS)
    throw new UserError(`--seeds must be a whole number from 1 to ${MAX_SEEDS}, not ${request.seeds}`);
  if (request.seeds !== undefined && request.methods?.length && !request.methods.includes('random_degree2'))
    throw new UserError('--seeds is for random_degree2, which --method leaves out');
  if (request.grid === 'published') {
    if (request.budgets?.length) throw new UserError('--grid published fixes the budgets; leave out --budget');
    if (request.seeds !== undefined) throw new UserError('--grid published fixes the seeds (0 … 19); leave out --seeds');
    const foreign = request.conditions.filter((c) => !request.published.has(c.id)).map((c) => c.id);
    if (foreign.length) throw new UserError(`--grid published covers the published conditions only, not ${foreign.join(', ')}`);
  }
  const tasks: ControlTask[] = [];
  const skipped: string[] = [];
  for (const condition of request.conditions) {
    const most = 2 ** condition.dimensions - 2;
    const budgets = [...new Set(request.budgets?.length ? request.budgets : TRACK_BUDGETS[trackOf(condition)])].sort((a, b) => a - b);
    const outside = budgets.filter((b) => !Number.isInteger(b) || b < 0 || b > most);
    if (outside.length)
      throw new UserError(
        `--budget ${outside.join(', ')} is outside 0 … ${most} for ${condition.id} (${condition.dimensions} options: 2^${condition.dimensions} − 2 masks beyond the anchors)`,
      );
    const methods = methodsOf(condition, request);
    skipped.push(...methods.skipped);
    for (const method of methods.run) {
      const seedList = method === 'random_degree2' ? Array.from({ length: seeds }, (_, s) => s) : [null];
      for (const seed of seedList) tasks.push({ condition: condition.id, method, seed, budgets });
    }
  }
  return { tasks, skipped };
}

/** A method name as typed, or a UserError listing the methods. */
export function parseMethod(name: string): MethodName {
  if ((METHODS as readonly string[]).includes(name)) return name as MethodName;
  throw new UserError(`unknown method '${name}' (methods: ${METHODS.join(', ')})`);
}

export { PLAIN as PLAIN_METHODS };
