// An episode's state and how it is derived: the state's schema (the reference's identity, the
// observations, the limits fixed at the start, the submission or end) and the limits' defaults; the
// view every action returns and the session's clock; `derive`, which replays the events log into the
// state (and every state before it), refusing a log the rules could not have produced
// (`impossibility`); and the prediction table's sha256 the submit event records. Pure functions of
// the log and the state: no locking, no writing (`log.ts`).
import { createHash } from 'node:crypto';
import { basename } from 'node:path';
import * as z from 'zod';
import { UserError } from '../../core/errors.ts';
import { OPTION_LETTERS } from '../../catalog/families.ts';
import { allMasks, maskIndex } from '../../catalog/masks.ts';
import { predictionFromJson } from '../../analysis/grade.ts';
import { isObject, type Json } from '../../analysis/strict-json.ts';
import { CALCULATION_KIND, type Event, EVENTS_FILE, type Log } from '../receipt.ts';

/** The widest condition has this many options. */
export const MAX_OPTIONS = OPTION_LETTERS.length;
/** A batch holds at most 2^d masks (every mask once); more than 2^MAX_OPTIONS is refused unread. */
export const MAX_BATCH = 2 ** MAX_OPTIONS;

export const Identity = z.strictObject({
  source: z.string(),
  family: z.string(),
  dimensions: z.number().int(),
  table_sha256: z.string(),
  plan_sha256: z.string(),
});
export type Identity = z.infer<typeof Identity>;

const Observation = z.strictObject({ mask: z.string(), utility: z.number(), paid: z.boolean(), at: z.string() });

/** The episode's limits, fixed at its start: calculation calls, seconds per call, the session's deadline. */
const Limits = z.strictObject({
  calls: z.number().int().nonnegative(),
  call_seconds: z.number().positive(),
  cpu_seconds: z.number().positive(),
  /** Seconds from the start after which observe, calculate and submit are refused; null: no deadline. */
  session_seconds: z.number().positive().nullable(),
  /** The calculation engine (sandbox/engines.ts); absent in episodes started before there were two: `pyodide`. */
  engine: z.enum(['native', 'pyodide']).optional(),
});
export type EpisodeLimits = z.infer<typeof Limits>;
/**
 * The benchmark harness's: 20 calls, 45 wall and 30 CPU seconds a call in its native runtime, no deadline
 * unless asked (the paper's was 1,800 s).
 */
export const DEFAULT_EPISODE_LIMITS: EpisodeLimits = {
  calls: 20,
  call_seconds: 45,
  cpu_seconds: 30,
  session_seconds: null,
  engine: 'native',
};
/** At most this many calculation calls an episode (each keeps its code, evidence and output in the events log). */
export const MAX_CALLS = 50;

/** A submission by an estimator the evaluator fitted: its name and the parameters it chose. */
const FittedBy = z.strictObject({ name: z.string(), parameters: z.record(z.string(), z.json()) });

/**
 * Who an episode is: a random id drawn at its start (every reservation and receipt names it, and the
 * evidence of each call holds it, so a call copied from another episode's log is refused) and the
 * name of the folder it was started in (a log copied into another episode's folder is refused). Null
 * in episodes started before there were ids: read as they are, without these checks.
 */
const Who = z.strictObject({ id: z.string().regex(/^[0-9a-f]{32}$/), name: z.string().min(1) });
export type EpisodeIdentity = z.infer<typeof Who>;

export const EpisodeState = z.strictObject({
  episode_version: z.literal(4),
  episode: Who.nullable(),
  condition: z.string(),
  dimensions: z.number().int(),
  budget: z.number().int().nonnegative(),
  /** The reference folder, absolute: fixed at the start. */
  references: z.string(),
  reference: Identity,
  started_at: z.string(),
  /** Free-form KEY=VALUE labels given at the start (a cohort's agent, run, …). */
  labels: z.record(z.string(), z.string()),
  limits: Limits,
  observations: z.array(Observation),
  credits_remaining: z.number().int().nonnegative(),
  /** Calculation calls reserved (each one whether or not its receipt was written). */
  calls_used: z.number().int().nonnegative(),
  /** Closed by a submission or ended without one. */
  closed: z.boolean(),
  submission: z
    .strictObject({ at: z.string(), prediction_table: z.record(z.string(), z.number()), estimator: FittedBy.nullable() })
    .nullable(),
  /** Ended without a submission (`wwref episode end`, an agent gone): scored as undelivered. */
  ended: z.strictObject({ at: z.string(), reason: z.string() }).nullable(),
});
export type EpisodeState = z.infer<typeof EpisodeState>;

/** What every action returns about the episode (never a reference value beyond the observations). */
export interface EpisodeView {
  condition: string;
  dimensions: number;
  budget: number;
  credits_remaining: number;
  closed: boolean;
  observations: { mask: string; utility: number }[];
  calculations: { limit: number; used: number; remaining: number };
  session: SessionClock;
}

/** The session's time at a moment: seconds since the start, and left before the deadline (null: none). */
export interface SessionClock {
  seconds_used: number;
  seconds_left: number | null;
  deadline_seconds: number | null;
}

export interface ObserveResult extends EpisodeView {
  /** The masks of this batch that were bought (new and distinct), in the order asked. */
  new_masks: string[];
}

export function sessionClock(state: EpisodeState, at: string): SessionClock {
  const used = Math.max(0, (Date.parse(at) - Date.parse(state.started_at)) / 1000);
  const deadline = state.limits.session_seconds;
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return {
    seconds_used: round(used),
    seconds_left: deadline === null ? null : round(Math.max(0, deadline - used)),
    deadline_seconds: deadline,
  };
}

export function view(state: EpisodeState, at: string = now()): EpisodeView {
  return {
    condition: state.condition,
    dimensions: state.dimensions,
    budget: state.budget,
    credits_remaining: state.credits_remaining,
    closed: state.closed,
    observations: state.observations.map(({ mask, utility }) => ({ mask, utility })),
    calculations: { limit: state.limits.calls, used: state.calls_used, remaining: state.limits.calls - state.calls_used },
    session: sessionClock(state, at),
  };
}

/** When the session's deadline falls (an episode with one). */
export function deadlineAt(state: EpisodeState): string {
  return new Date(Date.parse(state.started_at) + (state.limits.session_seconds ?? 0) * 1000).toISOString();
}

/** Refuses `action` on a closed episode or after the session's deadline (one line, logged as a refusal by `act`). */
export function requireOpen(state: EpisodeState, at: string, action: string): void {
  if (state.ended) throw new UserError(`the episode ended without a submission (${state.ended.reason}): no more ${action}`);
  if (state.closed) throw new UserError(`the episode is closed: a prediction was already submitted; no more ${action}`);
  const clock = sessionClock(state, at);
  if (clock.seconds_left === 0)
    throw new UserError(`the session's deadline (${clock.deadline_seconds} s after the start) has passed: no more ${action}`);
}

/** sha256 of a prediction table, its masks in the canonical order (as the submit event records it). */
export function tableSha256(table: Record<string, number>, dimensions: number): string {
  return createHash('sha256')
    .update(JSON.stringify(allMasks(dimensions).map((m) => [m, table[m] ?? null])))
    .digest('hex');
}

const strings = (value: Json | undefined): value is string[] => Array.isArray(value) && value.every((v) => typeof v === 'string');
const numbers = (value: Json | undefined): value is number[] => Array.isArray(value) && value.every((v) => typeof v === 'number');

type Bad = (line: number, why: string) => UserError;

/** The state a start event makes (its episode's identity checked against the folder it is read in). */
function startState(start: Event, line: number, bad: Bad, dir: string): EpisodeState {
  const identity = Identity.safeParse(start.reference);
  if (
    !identity.success ||
    typeof start.condition !== 'string' ||
    typeof start.budget !== 'number' ||
    typeof start.references !== 'string' ||
    typeof start.at !== 'string' ||
    !strings(start.masks) ||
    !numbers(start.utilities) ||
    start.masks.length !== 2 ||
    start.utilities.length !== 2
  )
    throw bad(line, 'a start without its condition, budget, reference folder, identity or anchors');
  const at = start.at;
  // labels and limits came with version 3, the episode's identity with version 4; a start without them has none and the defaults
  const labels = z.record(z.string(), z.string()).safeParse(start.labels ?? {});
  const limits = Limits.safeParse(start.limits ?? DEFAULT_EPISODE_LIMITS);
  const who = Who.nullable().safeParse(start.episode ?? null);
  if (!labels.success || !limits.success) throw bad(line, 'a start with malformed labels or limits');
  if (!who.success) throw bad(line, "a start with a malformed episode identity (its id and its folder's name)");
  if (who.data && who.data.name !== basename(dir))
    throw bad(
      line,
      `the log of episode '${who.data.name}' (started in a folder of that name), not of this folder '${basename(dir)}': ` +
        "another episode's log copied here, or a folder renamed after its start (give it back its name)",
    );
  const utilities = start.utilities;
  return {
    episode_version: 4,
    episode: who.data,
    condition: start.condition,
    dimensions: identity.data.dimensions,
    budget: start.budget,
    references: start.references,
    reference: identity.data,
    started_at: at,
    labels: labels.data,
    limits: limits.data,
    observations: start.masks.map((mask, k) => ({ mask, utility: utilities[k]!, paid: false, at })),
    credits_remaining: start.budget,
    calls_used: 0,
    closed: false,
    submission: null,
    ended: null,
  };
}

/** Refuses a line that names another episode than `state`'s (a line of an episode with an id must name it). */
function requireSameEpisode(state: EpisodeState, event: Event, line: number, bad: Bad, what: string): void {
  if (state.episode && event.episode_id !== state.episode.id)
    throw bad(
      line,
      `${what} of ${typeof event.episode_id === 'string' ? `episode ${event.episode_id.slice(0, 40)}` : 'no episode'}, ` +
        `not of this one (${state.episode.id}): copied from another episode's log`,
    );
}

/** The state after commit `event` of the log (undefined: the event changes no state). */
function applyCommit(state: EpisodeState, event: Event, line: number, bad: Bad): EpisodeState | undefined {
  const when = String(event.at);
  if (event.action === 'start') throw bad(line, 'a second start');
  if (event.action === 'observe' && Array.isArray(event.new_masks) && event.new_masks.length) {
    const masks = event.new_masks;
    const utilities = event.utilities;
    if (!strings(masks) || !numbers(utilities) || utilities.length !== masks.length)
      throw bad(line, 'a purchase without a utility for each new mask');
    if (state.closed) throw bad(line, 'a purchase after the submission');
    if (masks.length > state.credits_remaining)
      throw bad(line, `${masks.length} purchase(s) with ${state.credits_remaining} credit(s) left`);
    return {
      ...state,
      observations: [...state.observations, ...masks.map((mask, k) => ({ mask, utility: utilities[k]!, paid: true, at: when }))],
      credits_remaining: state.credits_remaining - masks.length,
    };
  }
  if (event.action === 'submit') {
    const table = event.prediction_table;
    if (!isObject(table) || !Object.values(table).every((v) => typeof v === 'number') || typeof event.table_sha256 !== 'string')
      throw bad(line, 'a submission without its prediction_table and table_sha256');
    if (state.closed) throw bad(line, 'a submission in a closed episode');
    const numeric = table as Record<string, number>;
    if (tableSha256(numeric, state.dimensions) !== event.table_sha256)
      throw bad(line, `the submitted table's sha256 is not ${event.table_sha256}, the one recorded at submission`);
    const fitted = FittedBy.nullable().safeParse(event.estimator ?? null);
    if (!fitted.success) throw bad(line, 'a submission with a malformed estimator');
    return { ...state, closed: true, submission: { at: when, prediction_table: numeric, estimator: fitted.data } };
  }
  if (event.action === 'calculate') {
    if (event.call !== state.calls_used + 1) throw bad(line, `calculation call ${event.call} where call ${state.calls_used + 1} was next`);
    requireSameEpisode(state, event, line, bad, `calculation call ${event.call}, reserved by the log`);
    if (state.closed) throw bad(line, 'a calculation reserved in a closed episode');
    if (state.calls_used >= state.limits.calls) throw bad(line, `a calculation past the limit of ${state.limits.calls} calls`);
    return { ...state, calls_used: state.calls_used + 1 };
  }
  if (event.action === 'end') {
    if (typeof event.reason !== 'string') throw bad(line, 'an end without its reason');
    if (state.closed) throw bad(line, 'an end of a closed episode');
    return { ...state, closed: true, ended: { at: when, reason: event.reason } };
  }
  return undefined;
}

/**
 * The state the log's actions produce, and every state before it (a copy of the state may lag behind
 * when writing it failed). Refused when the log holds no start, a line the rules could not have
 * produced from the state before it (checked again as a whole by `impossibility`): a receipt before
 * its reservation, a line of another episode, or a log started in a folder of another name.
 */
export function derive(log: Log, dir: string): { state: EpisodeState; earlier: EpisodeState[] } {
  const numbered = log.lines.map((l, k) => ({ event: l.event, line: k + 1 }));
  const first = numbered.find((l) => l.event.kind === 'action');
  if (first?.event.action !== 'start')
    throw new UserError(`${dir} holds no episode (${EVENTS_FILE} records no start); start one with 'wwref episode start'`);
  const bad: Bad = (line, why) => new UserError(`events log ${log.path}, line ${line}: ${why}`);
  let state = startState(first.event, first.line, bad, dir);
  const earlier: EpisodeState[] = [];
  // a receipt answers a call reserved before it, once (calls reserved but never answered were cut short by a kill)
  const answered = new Set<number>();
  for (const { event, line } of numbered) {
    if (line === first.line) continue;
    if (event.kind === CALCULATION_KIND) {
      const call = event.call;
      if (typeof call !== 'number' || !Number.isInteger(call) || call < 1 || call > state.calls_used || answered.has(call))
        throw bad(line, `a calculation receipt for call ${String(call)}, which is not a call reserved before it without a receipt`);
      requireSameEpisode(state, event, line, bad, `the receipt of calculation call ${call}`);
      answered.add(call);
      continue;
    }
    if (event.kind !== 'action' || event.outcome !== 'ok') continue;
    const next = applyCommit(state, event, line, bad);
    if (!next) continue;
    if (event.credits_before !== state.credits_remaining || event.credits_after !== next.credits_remaining)
      throw bad(
        line,
        `credits ${event.credits_before} -> ${event.credits_after}, where the actions before it give ${state.credits_remaining} -> ${next.credits_remaining}`,
      );
    earlier.push(state);
    state = next;
  }
  const impossible = impossibility(state);
  if (impossible) throw new UserError(`the events log ${log.path} records an episode the rules could not produce: ${impossible}`);
  return { state, earlier };
}

/** Why `state` is not one the episode's rules could produce (undefined: it could be), without the reference. */
function impossibility(state: EpisodeState): string | undefined {
  const d = state.dimensions;
  if (d !== state.reference.dimensions) return `dimensions ${d}, the reference's ${state.reference.dimensions}`;
  if (d < 1 || d > MAX_OPTIONS) return `dimensions ${d}, not from 1 to ${MAX_OPTIONS}`;
  const most = 2 ** d - 2;
  if (state.budget > most) return `a budget of ${state.budget}, more than the ${most} masks beyond the anchors`;
  const bad = state.observations.find((o) => maskIndex(o.mask, d) < 0);
  if (bad) return `observation ${JSON.stringify(bad.mask.slice(0, 40))} is not a mask of ${d} options`;
  if (new Set(state.observations.map((o) => o.mask)).size !== state.observations.length) return 'a mask observed twice';
  const masks = allMasks(d);
  const anchors = [masks[0]!, masks.at(-1)!];
  const free = state.observations.filter((o) => !o.paid).map((o) => o.mask);
  if (free.length !== 2 || !anchors.every((a) => free.includes(a)))
    return `the unpaid observations are ${free.join(', ') || 'none'}, not the two anchors ${anchors.join(', ')}`;
  const paid = state.observations.length - 2;
  if (state.credits_remaining !== state.budget - paid)
    return `${paid} paid observation(s) and ${state.credits_remaining} credit(s) left of a budget of ${state.budget}`;
  if (state.submission && state.ended) return 'both a submission and an end';
  if (state.closed !== (state.submission !== null || state.ended !== null))
    return state.closed ? 'closed without a submission or an end' : 'a submission or an end in an open episode';
  if (state.calls_used > state.limits.calls) return `${state.calls_used} calculation calls, more than the limit of ${state.limits.calls}`;
  if (state.submission) {
    try {
      predictionFromJson(state.submission.prediction_table, d, 'the submitted prediction_table');
    } catch (error) {
      if (error instanceof UserError) return error.message.split('\n').join(' ');
      throw error;
    }
  }
  return undefined;
}

export const now = () => new Date().toISOString();
