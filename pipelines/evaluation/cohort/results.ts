// The cohort's results, OUT/results.jsonl: one line per finished episode in the benchmark's
// agent-record form (results/agent_results.json: instance, family, budget, model, repeat, job_id,
// artifact_valid, observations as the list of {mask, utility} in acquisition order, credits_spent,
// the shared estimators' scores and the episode's score in the published agent-score form, cohort),
// then wwref's own fields beside them (the episode and its condition, labels, the reason an episode
// was not delivered, calculation calls, wall seconds, the shared GP and the gains over the shared
// estimators, how the agent's process ended, the reference). An undelivered episode (no valid
// submission: the agent crashed, hung, flooded its output or exited without submitting) is a line
// too, with its reason and the published undelivered score (an effect recovery of 0). Lines are
// appended one per episode as they end (for a run killed outright). Which lines count: those this
// run wrote itself (kept in memory), and those of an earlier run that its episode's receipt and the
// cohort's plan give again character for character (`earlierResults`: the line made again, the
// shared estimators refitted); anything else an agent or anyone wrote into the file is left out, and
// the file is rewritten to exactly the lines kept.
import { basename, dirname, join } from 'node:path';
import * as z from 'zod';
import { lstatOrNothing, readRegularFile } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import { appendNoFollow, writeFileAtomic } from '../../core/fsutil.ts';
import { canonicalJson, sha256Hex } from '../../core/hashing.ts';
import type { Surface } from '../../analysis/effects.ts';
import { agentScore, UNDELIVERED_SCORE } from '../../analysis/grade-records.ts';
import { type GradeResult, gradeSurface } from '../../analysis/grade.ts';
import { isObject, type Json, parseStrictJson } from '../../analysis/strict-json.ts';
import { orderedJson, withMaskOrderedTables } from '../ordered-json.ts';
import { allMasks, maskIndex } from '../../catalog/masks.ts';
import { EVENTS_FILE, type EpisodeState, readEpisode } from '../episode.ts';
import type { SharedScores } from '../shared-scores.ts';
import type { AgentOutcome } from './agent.ts';
import type { CohortDefinition, PlannedEpisode } from './plan.ts';

export const RESULTS_FILE = 'results.jsonl';
/** The reason of an episode whose receipt could not be read after its agent ended (recorded with the anchors only). */
export const UNUSABLE_RECEIPT = 'the episode receipt is unusable';
const RESULTS_MAX_BYTES = 256 << 20;

export interface EpisodeResult {
  planned: PlannedEpisode;
  labels: Record<string, string>;
  agent: string;
  /** The record's `cohort` (recordCohort). */
  cohort: string;
  /** The condition's reference surface (for the published score's fields). */
  surface: Surface;
  observations: readonly (readonly [string, number])[];
  /** grade's result of the submission (undefined: undelivered). */
  score?: GradeResult;
  undeliveredReason?: string;
  calculationCalls: number;
  process: AgentOutcome;
  shared: SharedScores;
  startedAt: string;
  finishedAt: string;
}

/** A record's `model`: the cohort's `model` label, else its `agent` label, else the agent command. */
export function recordModel(labels: Record<string, string>, agent: string): string {
  return labels.model ?? labels.agent ?? agent;
}

/** A record's `cohort`: the cohort's `cohort` label, else the name of its folder. */
export function recordCohort(labels: Record<string, string>, out: string): string {
  return labels.cohort ?? basename(out);
}

/** Why an episode without a submission was not delivered, from how its agent ended. */
export function undeliveredReason(outcome: AgentOutcome, deadlineSeconds: number): string {
  if (outcome.stopped === 'deadline') return `no submission within the session's ${deadlineSeconds} s: the agent was stopped`;
  if (outcome.stopped === 'output') return 'the agent wrote more output than is kept (1 MiB a stream) and was stopped, without submitting';
  if (outcome.exit_code === 127) return 'the agent command was not found (exit status 127)';
  if (outcome.exit_code !== null && outcome.exit_code !== 0) return `the agent exited with status ${outcome.exit_code} without submitting`;
  if (outcome.signal) return `the agent was ended by ${outcome.signal} without submitting`;
  return 'the agent exited without submitting';
}

/** The results line of one episode (without the newline): the published agent record's fields in its order, then wwref's. */
export function resultLine(result: EpisodeResult): string {
  const { planned, score } = result;
  // the tables in mask order (as objects, '1000' … would come before '0000')
  const { shared_degree1_score, shared_degree2_score, ...otherShared } = withMaskOrderedTables(result.shared) as Record<string, unknown>;
  return orderedJson({
    instance: planned.condition.instance,
    family: planned.condition.family,
    budget: planned.budget,
    model: recordModel(result.labels, result.agent),
    repeat: planned.repeat,
    job_id: planned.id,
    artifact_valid: score !== undefined,
    observations: result.observations.map(([mask, utility]) => ({ mask, utility })),
    credits_spent: result.observations.length - 2,
    shared_degree1_score,
    shared_degree2_score,
    // an undelivered episode counts as recovering nothing
    score: score ? withMaskOrderedTables(agentScore(result.surface, score)) : UNDELIVERED_SCORE,
    cohort: result.cohort,
    episode: planned.id,
    condition: planned.condition.id,
    track: planned.condition.track,
    labels: result.labels,
    agent: result.agent,
    undelivered_reason: result.undeliveredReason ?? null,
    acquisition_order: result.observations.map(([mask]) => mask),
    calculation_calls: result.calculationCalls,
    wall_seconds: result.process.wall_seconds,
    effect_recovery: score?.effect_recovery ?? 0,
    ...otherShared,
    process: result.process,
    reference: planned.condition.reference,
    started_at: result.startedAt,
    finished_at: result.finishedAt,
  });
}

const Shared = z.looseObject({ effect_recovery: z.number() });

/** What the summaries read of a results line. */
export const StoredResult = z.looseObject({
  episode: z.string(),
  job_id: z.string(),
  condition: z.string(),
  instance: z.string(),
  family: z.string(),
  track: z.string(),
  model: z.string(),
  cohort: z.string(),
  budget: z.number().int().nonnegative(),
  repeat: z.number().int().nonnegative(),
  artifact_valid: z.boolean(),
  observations: z.array(z.strictObject({ mask: z.string(), utility: z.number() })),
  credits_spent: z.number().int().nonnegative(),
  effect_recovery: z.number(),
  undelivered_reason: z.string().nullable(),
  score: z.looseObject({ effect_recovery: z.number(), strict_effect_reconstruction: z.boolean() }),
  shared_degree1_score: Shared,
  shared_degree2_score: Shared,
  shared_gp_score: Shared,
  reference: z.strictObject({ table_sha256: z.string(), plan_sha256: z.string() }),
});
export type StoredResult = z.infer<typeof StoredResult>;

/** How an agent's process ended, as a line stores it (what no receipt records: checked for its form only). */
const StoredProcess = z.strictObject({
  exit_code: z.number().int().nullable(),
  signal: z.string().max(32).nullable(),
  stopped: z.enum(['deadline', 'output', 'closed', 'stopped']).nullable(),
  left_children: z.boolean(),
  wall_seconds: z.number().nonnegative(),
  stdout_bytes: z.number().int().nonnegative(),
  stderr_bytes: z.number().int().nonnegative(),
  output_truncated: z.boolean(),
});
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
/** The longest reason of an unreadable receipt a line may give (the prefix and 300 characters of the error). */
const UNUSABLE_REASON_MAX = UNUSABLE_RECEIPT.length + 2 + 300;

/** The free anchors of a condition ([mask, utility] of all options off, then all on): what an unreadable receipt leaves. */
export function anchorsOf(surface: Surface): [string, number][] {
  const d = surface.dimensions;
  return [
    ['0'.repeat(d), surface.utilities[0]!],
    ['1'.repeat(d), surface.utilities[2 ** d - 1]!],
  ];
}

/** The path of the first number in `value` that is not finite (NaN, ±Infinity: no JSON form), or undefined. */
export function nonFinitePath(value: unknown, path = ''): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : path || '(top)';
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, v] of Object.entries(value)) {
    const found = nonFinitePath(v, path ? `${path}.${key}` : key);
    if (found) return found;
  }
  return undefined;
}

/** What re-derives a line: the cohort's definition and folder, the references fixed at its start, the shared estimators. */
export interface ResultContext {
  definition: CohortDefinition;
  /** The records' `cohort`: the name cohort.json fixed at the cohort's creation (plan.ts storedCohortName). */
  cohort: string;
  /** The folder of the episodes' folders. */
  episodes: string;
  surfaceOf: (condition: string) => Surface;
  /** The shared estimators refitted on observations in acquisition order, with the gains of `own` over them. */
  refit: (surface: Surface, observations: readonly (readonly [string, number])[], own: number) => Promise<SharedScores>;
}

/** Why a receipt is not one of `plan`'s episode as this cohort starts it, closed (undefined: it is). */
export function receiptProblem(state: EpisodeState, plan: PlannedEpisode, definition: CohortDefinition): string | undefined {
  if (state.condition !== plan.condition.id || state.budget !== plan.budget) return 'its receipt is of another condition or budget';
  const { table_sha256, plan_sha256 } = plan.condition.reference;
  if (state.reference.table_sha256 !== table_sha256 || state.reference.plan_sha256 !== plan_sha256)
    return `its receipt was played on another reference (table sha256 ${state.reference.table_sha256.slice(0, 12)}…, the cohort's ${table_sha256.slice(0, 12)}…)`;
  if (canonicalJson(state.labels) !== canonicalJson(definition.labels)) return 'its receipt carries other labels';
  const { calls, call_seconds, session_seconds } = state.limits;
  if (calls !== definition.calls || call_seconds !== definition.call_seconds || session_seconds !== definition.session_seconds)
    return 'its receipt has other limits';
  return state.closed ? undefined : 'its receipt records an episode still open';
}

/**
 * Why `line` is not the line its episode's receipt and the cohort's plan give (undefined: it is). The
 * line is made again from them (every field but how the agent's process ended and the times, which
 * only their form is checked of), the shared estimators refitted, and compared character for
 * character. A line needs a receipt in its episode's folder: a readable one, or one whose start is
 * this episode's and the line the undelivered one of an unreadable receipt.
 */
async function lineProblem(
  line: string,
  json: Record<string, Json>,
  plan: PlannedEpisode,
  context: ResultContext,
  written: ReadonlyMap<string, string>,
): Promise<string | undefined> {
  const { definition } = context;
  const process = StoredProcess.safeParse(json.process);
  const [startedAt, finishedAt] = [json.started_at, json.finished_at];
  if (
    !process.success ||
    typeof startedAt !== 'string' ||
    typeof finishedAt !== 'string' ||
    !ISO_TIME.test(startedAt) ||
    !ISO_TIME.test(finishedAt)
  )
    return "a line without its agent's process or times";
  const dir = join(context.episodes, plan.id);
  const folder = lstatOrNothing(dir)?.isDirectory() === true;
  if (!folder || !lstatOrNothing(join(dir, EVENTS_FILE))) {
    // its receipt gone since (deleted, or a link put there: never followed): the undelivered line the
    // cohort recorded writing counts as written (0), rather than a second chance or a cell without it
    if (json.artifact_valid === false && written.get(plan.id) === sha256Hex(line)) return undefined;
    if (!folder) return 'no folder of its episode';
  }
  const surface = context.surfaceOf(plan.condition.id);
  let state: EpisodeState | undefined;
  try {
    state = readEpisode(dir);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
  }
  // the cohort's name as fixed at its creation (cohort.json), never as a line writes it
  const base = { planned: plan, labels: definition.labels, agent: definition.agent, cohort: context.cohort, surface };
  let result: Omit<EpisodeResult, 'shared'>;
  if (state) {
    const problem = receiptProblem(state, plan, definition);
    if (problem) return problem;
    const width = surface.dimensions;
    if (state.observations.some((o) => maskIndex(o.mask, width) < 0 || o.utility !== surface.utilities[maskIndex(o.mask, width)]))
      return "its receipt records utilities that are not the reference's";
    const table = state.submission?.prediction_table;
    const observed = state.observations.map((o) => o.mask);
    result = {
      ...base,
      observations: state.observations.map((o) => [o.mask, o.utility] as const),
      score: table
        ? gradeSurface(
            surface,
            allMasks(surface.dimensions).map((m) => table[m]!),
            { observed },
          )
        : undefined,
      undeliveredReason: state.ended?.reason,
      calculationCalls: state.calls_used,
      process: process.data,
      startedAt,
      finishedAt,
    };
  } else {
    const reason = json.undelivered_reason;
    if (typeof reason !== 'string' || !reason.startsWith(`${UNUSABLE_RECEIPT}: `) || reason.length > UNUSABLE_REASON_MAX)
      return 'its receipt cannot be read';
    // exactly when the run writes such a line: an events log there that cannot be read as one (not a
    // regular file — a FIFO, a link, a folder — or not a valid log); none at all is no receipt
    if (!lstatOrNothing(join(dir, EVENTS_FILE))) return 'no receipt in its episode folder';
    result = {
      ...base,
      observations: anchorsOf(surface),
      undeliveredReason: reason,
      calculationCalls: 0,
      process: process.data,
      startedAt,
      finishedAt,
    };
  }
  const shared = await context.refit(surface, result.observations, result.score?.effect_recovery ?? 0);
  return resultLine({ ...result, shared }) === line ? undefined : 'not the line its receipt and the plan give';
}

/**
 * The cohort's record of the results lines it wrote: one `{"episode", "line_sha256"}` line appended as
 * each line is recorded (the last one of an episode counts: a line played again replaces it). It vouches
 * for an undelivered line whose episode's folder (or log) is gone since (its agent, or a process it left,
 * deleted it or put a link there): that line counts, 0, rather than the episode being played again or
 * left out; a line it does not name (one an agent wrote) never counts without a receipt.
 */
export const WRITTEN_FILE = 'written.jsonl';

/** Records that the cohort in `out` wrote `line` for the episode `id` (appended; a failure said, never fatal: the line is then vouched for by its receipt alone). */
export function recordWritten(out: string, id: string, line: string, log: (line: string) => void): void {
  try {
    appendNoFollow(join(out, WRITTEN_FILE), `${JSON.stringify({ episode: id, line_sha256: sha256Hex(line) })}\n`);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    log(`cohort: ${error.message.split('\n')[0]} (the line of ${id} is vouched for by its receipt alone)`);
  }
}

/** The digest of the last line the record in `out` names for each episode (none when it is absent or no regular file). */
export function writtenLines(out: string): Map<string, string> {
  const written = new Map<string, string>();
  const file = join(out, WRITTEN_FILE);
  if (!lstatOrNothing(file)) return written;
  let text: string;
  try {
    text = readRegularFile(file, 'record of written lines', RESULTS_MAX_BYTES).toString('utf8');
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    return written;
  }
  for (const line of text.split('\n')) {
    try {
      const json = parseStrictJson(line, 'a written line');
      if (isObject(json) && typeof json.episode === 'string' && typeof json.line_sha256 === 'string')
        written.set(json.episode, json.line_sha256);
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
    }
  }
  return written;
}

export interface EarlierResults {
  /** The verified line of each episode (the first one), by episode id. */
  lines: Map<string, string>;
  /** Lines left out (torn, not of this cohort, repeated, not what their receipt gives). */
  dropped: number;
  /** Why the line of an episode that has none verified was left out. */
  problems: Map<string, string>;
  /** The lines that are no planned episode's (torn, of another episode, a second copy), as `<episode> (line N)`, with why. */
  strays: Map<string, string>;
  /** Why the file could not be read at all (a FIFO, too large): no line kept. */
  unreadable?: string;
}

/** The results file's text, or a UserError (a FIFO, a link, too large). */
function resultsText(file: string): string {
  return readRegularFile(file, 'results file', RESULTS_MAX_BYTES).toString('utf8');
}

/** The lines of `file` (an earlier run's) that are results of `planned` episodes, each verified against its receipt, once each. */
export async function earlierResults(file: string, planned: readonly PlannedEpisode[], context: ResultContext): Promise<EarlierResults> {
  const kept: EarlierResults = { lines: new Map(), dropped: 0, problems: new Map(), strays: new Map() };
  if (!lstatOrNothing(file)) return kept;
  let text: string;
  try {
    text = resultsText(file);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    return { ...kept, unreadable: error.message };
  }
  const byId = new Map(planned.map((p) => [p.id, p]));
  const written = writtenLines(dirname(file));
  const stray = (json: Json | undefined, n: number, why: string) => {
    kept.dropped++;
    const named = json !== undefined && isObject(json) ? json.episode : undefined;
    const episode = typeof named === 'string' ? named : '?';
    kept.strays.set(`${episode.slice(0, 100)} (line ${n})`, why);
  };
  for (const [n, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    let json: Json;
    try {
      json = parseStrictJson(line, 'a results line');
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      stray(undefined, n + 1, 'not a line of strict JSON (torn or garbled)');
      continue;
    }
    const plan = isObject(json) && typeof json.episode === 'string' ? byId.get(json.episode) : undefined;
    const why = !plan
      ? 'not a planned episode of the definition in cohort.json'
      : kept.lines.has(plan.id)
        ? 'a second line of an episode that has one'
        : StoredResult.safeParse(json).success
          ? undefined
          : 'not of the form of a results line';
    if (why || !plan || !isObject(json)) {
      stray(json, n + 1, why ?? 'not a planned episode of the definition in cohort.json');
      continue;
    }
    let problem: string | undefined;
    try {
      problem = await lineProblem(line, json, plan, context, written);
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      problem = error.message.split('\n')[0]!.slice(0, 300);
    }
    if (problem) {
      kept.dropped++;
      kept.problems.set(plan.id, problem);
    } else {
      kept.lines.set(plan.id, line);
      kept.problems.delete(plan.id);
    }
  }
  return kept;
}

/** How many lines of `file` are not among `kept` (what a rewrite leaves out); 0 when it cannot be read. */
export function linesNotKept(file: string, kept: ReadonlySet<string>): number {
  try {
    return resultsText(file)
      .split('\n')
      .filter((l) => l.trim() !== '' && !kept.has(l)).length;
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    return 0;
  }
}

/** Rewrites the results file (atomically) to exactly `lines`. */
export function writeResults(file: string, lines: readonly string[]): void {
  writeFileAtomic(file, lines.map((l) => `${l}\n`).join(''));
}
