// Budgeted episodes with the benchmark's rules. The two anchors (all-off and all-on masks) are free;
// each new distinct mask costs one credit; a mask already observed is free again; a batch that needs
// more credits than remain is refused whole, spending nothing; a submission closes the episode, and
// only a closed episode is scored. The reference's identity (its table's sha256, plan, source,
// family, width) is fixed at the start and checked at every action.
//
// One commit per action: the receipt `events.jsonl` (receipt.ts) is the episode's write-ahead log and
// its state is derived from it, so the state and the receipt never disagree: an action that changes
// the state is one appended line (start, a purchase, the submission with its table's sha256), in the
// log wholly or not at all. `episode.json` is a copy of the derived state for readers, written after
// the commit: it may lag behind (a kill between the two, or copies that could not be written, as on a
// full disk: it then equals a state the log passed through, and is rewritten), and any other
// difference (an edit) refuses every action. Actions run one at a time: in order within this
// process (a queue per episode), under the folder's lock across processes. A refused action changes
// no state and is a UserError (exit 2), recorded as a note of the log.
import { createHash } from 'node:crypto';
import { closeSync, constants, openSync } from 'node:fs';
import { join, resolve } from 'node:path';
import * as z from 'zod';
import { UserError } from '../core/errors.ts';
import { fsError, makeDirs, writeJsonAtomic } from '../core/fsutil.ts';
import { lstatOrNothing, removeStaleEntries } from '../core/containment.ts';
import type { Settings } from '../core/settings.ts';
import { OPTION_LETTERS } from '../catalog/families.ts';
import { allMasks, maskIndex } from '../catalog/masks.ts';
import type { PythonWorker } from '../execution/python-worker.ts';
import { lockFolder } from '../references/lock.ts';
import { ReferenceStore } from '../references/store.ts';
import { groupByCondition, surfaceFromRecords, type Surface } from '../analysis/effects.ts';
import { type GradeResult, gradeSurface, predictionFromJson } from '../analysis/grade.ts';
import { isObject, type Json, readStrictJsonFile } from '../analysis/strict-json.ts';
import { checkLabels } from './labels.ts';
import type { SharedScores } from './shared-scores.ts';
import {
  appendEvent,
  appendNote,
  CALCULATION_KIND,
  CLOSE_ROOM_BYTES,
  capReason,
  closeLog,
  EVENTS_FILE,
  EVENTS_MAX_BYTES,
  type Event,
  type Log,
  openLog,
  RECEIPT_ROOM_BYTES,
} from './receipt.ts';

export { EVENTS_FILE } from './receipt.ts';
export const STATE_FILE = 'episode.json';
/** How long an action waits for another one on the same episode. */
const LOCK_WAIT_SECONDS = 30;
const STATE_MAX_BYTES = 16 << 20;
/** The widest condition has this many options. */
export const MAX_OPTIONS = OPTION_LETTERS.length;
/** A batch holds at most 2^d masks (every mask once); more than 2^MAX_OPTIONS is refused unread. */
export const MAX_BATCH = 2 ** MAX_OPTIONS;

const Identity = z.strictObject({
  source: z.string(),
  family: z.string(),
  dimensions: z.number().int(),
  table_sha256: z.string(),
  plan_sha256: z.string(),
});
type Identity = z.infer<typeof Identity>;

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

const EpisodeState = z.strictObject({
  episode_version: z.literal(3),
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
function deadlineAt(state: EpisodeState): string {
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

/** The copy of the state in `episode.json`, or undefined when there is none; refused unless strict JSON of the state's form. */
function readSnapshot(dir: string): EpisodeState | undefined {
  const path = join(dir, STATE_FILE);
  if (!lstatOrNothing(path)) return undefined;
  const json = readStrictJsonFile(path, 'episode state', STATE_MAX_BYTES);
  if (isObject(json) && json.episode_version === 2) return undefined; // a copy of an earlier version: rewritten from the log
  const parsed = EpisodeState.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`episode state ${path} is malformed at ${issue.path.join('.') || '(top)'}: ${issue.message}`);
  }
  return parsed.data;
}

/** sha256 of a prediction table, its masks in the canonical order (as the submit event records it). */
export function tableSha256(table: Record<string, number>, dimensions: number): string {
  return createHash('sha256')
    .update(JSON.stringify(allMasks(dimensions).map((m) => [m, table[m] ?? null])))
    .digest('hex');
}

const strings = (value: Json | undefined): value is string[] => Array.isArray(value) && value.every((v) => typeof v === 'string');
const numbers = (value: Json | undefined): value is number[] => Array.isArray(value) && value.every((v) => typeof v === 'number');

/**
 * The state the log's actions produce, and every state before it (a copy of the state may lag behind
 * when writing it failed). Refused when the log holds no start, or an action the rules could not
 * have produced from the state before it (checked again as a whole by `impossibility`).
 */
function derive(log: Log, dir: string): { state: EpisodeState; earlier: EpisodeState[] } {
  const numbered = log.lines.map((l, k) => ({ event: l.event, line: k + 1 }));
  const actions = numbered.filter((l) => l.event.kind === 'action');
  const first = actions[0];
  if (first?.event.action !== 'start')
    throw new UserError(`${dir} holds no episode (${EVENTS_FILE} records no start); start one with 'wwref episode start'`);
  const bad = (line: number, why: string) => new UserError(`events log ${log.path}, line ${line}: ${why}`);
  const start = first.event;
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
    throw bad(first.line, 'a start without its condition, budget, reference folder, identity or anchors');
  const at = start.at;
  // labels and limits came with version 3; a start without them has none and the defaults
  const labels = z.record(z.string(), z.string()).safeParse(start.labels ?? {});
  const limits = Limits.safeParse(start.limits ?? DEFAULT_EPISODE_LIMITS);
  if (!labels.success || !limits.success) throw bad(first.line, 'a start with malformed labels or limits');
  let state: EpisodeState = {
    episode_version: 3,
    condition: start.condition,
    dimensions: identity.data.dimensions,
    budget: start.budget,
    references: start.references,
    reference: identity.data,
    started_at: at,
    labels: labels.data,
    limits: limits.data,
    observations: start.masks.map((mask, k) => ({ mask, utility: (start.utilities as number[])[k]!, paid: false, at })),
    credits_remaining: start.budget,
    calls_used: 0,
    closed: false,
    submission: null,
    ended: null,
  };
  let previous: EpisodeState | undefined;
  const earlier: EpisodeState[] = [];
  for (const { event, line } of actions.slice(1)) {
    if (event.outcome !== 'ok') continue;
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
      previous = state;
      state = {
        ...state,
        observations: [...state.observations, ...masks.map((mask, k) => ({ mask, utility: utilities[k]!, paid: true, at: when }))],
        credits_remaining: state.credits_remaining - masks.length,
      };
    } else if (event.action === 'submit') {
      const table = event.prediction_table;
      if (!isObject(table) || !Object.values(table).every((v) => typeof v === 'number') || typeof event.table_sha256 !== 'string')
        throw bad(line, 'a submission without its prediction_table and table_sha256');
      if (state.closed) throw bad(line, 'a submission in a closed episode');
      const numeric = table as Record<string, number>;
      if (tableSha256(numeric, state.dimensions) !== event.table_sha256)
        throw bad(line, `the submitted table's sha256 is not ${event.table_sha256}, the one recorded at submission`);
      const fitted = FittedBy.nullable().safeParse(event.estimator ?? null);
      if (!fitted.success) throw bad(line, 'a submission with a malformed estimator');
      previous = state;
      state = { ...state, closed: true, submission: { at: when, prediction_table: numeric, estimator: fitted.data } };
    } else if (event.action === 'calculate') {
      if (event.call !== state.calls_used + 1)
        throw bad(line, `calculation call ${event.call} where call ${state.calls_used + 1} was next`);
      if (state.closed) throw bad(line, 'a calculation reserved in a closed episode');
      if (state.calls_used >= state.limits.calls) throw bad(line, `a calculation past the limit of ${state.limits.calls} calls`);
      previous = state;
      state = { ...state, calls_used: state.calls_used + 1 };
    } else if (event.action === 'end') {
      if (typeof event.reason !== 'string') throw bad(line, 'an end without its reason');
      if (state.closed) throw bad(line, 'an end of a closed episode');
      previous = state;
      state = { ...state, closed: true, ended: { at: when, reason: event.reason } };
    } else continue;
    earlier.push(previous!);
    if (event.credits_before !== previous!.credits_remaining || event.credits_after !== state.credits_remaining)
      throw bad(
        line,
        `credits ${event.credits_before} -> ${event.credits_after}, where the actions before it give ${previous!.credits_remaining} -> ${state.credits_remaining}`,
      );
  }
  // a receipt answers a reserved call, once (calls reserved but never answered were cut short by a kill)
  const answered = new Set<number>();
  for (const { event, line } of numbered.filter((l) => l.event.kind === CALCULATION_KIND)) {
    const call = event.call;
    if (typeof call !== 'number' || !Number.isInteger(call) || call < 1 || call > state.calls_used || answered.has(call))
      throw bad(line, `a calculation receipt for call ${String(call)}, which is not a reserved call without a receipt`);
    answered.add(call);
  }
  const impossible = impossibility(state);
  if (impossible) throw new UserError(`the events log ${log.path} records an episode the rules could not produce: ${impossible}`);
  return { state, earlier };
}

/** Stable JSON (keys sorted) for comparing states. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}

/**
 * Checks `episode.json` against the state derived from the log: rewritten when missing or behind (a kill
 * between the commit and the copy, or copies that failed to be written, e.g. on a full disk: it then
 * equals a state the log passed through), refused when it differs otherwise (an edit).
 */
function reconcile(dir: string, derived: { state: EpisodeState; earlier: EpisodeState[] }): void {
  const snapshot = readSnapshot(dir);
  const path = join(dir, STATE_FILE);
  if (snapshot && canonical(snapshot) === canonical(derived.state)) return;
  if (!snapshot || derived.earlier.some((state) => canonical(snapshot) === canonical(state))) {
    writeSnapshot(dir, derived.state);
    return;
  }
  const fields = (Object.keys(derived.state) as (keyof EpisodeState)[]).filter(
    (key) => canonical(snapshot[key]) !== canonical(derived.state[key]),
  );
  throw new UserError(
    `episode state ${path} is not the state its events log records (${fields.join(', ')} differ): it was edited; ` +
      `the events log ${EVENTS_FILE} is the record`,
  );
}

/** The copy of the state; a failure is left to the next action's reconcile (the commit is the log's line). */
function writeSnapshot(dir: string, state: EpisodeState): void {
  try {
    writeJsonAtomic(join(dir, STATE_FILE), state);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
  }
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

/** Refuses a state whose observed utilities are not the reference's (a state edited by hand). */
function checkObservedValues(state: EpisodeState, surface: Surface, dir: string): void {
  const path = join(dir, EVENTS_FILE);
  if (surface.dimensions !== state.dimensions)
    throw new UserError(`the episode in ${path} has ${state.dimensions} options, the reference ${surface.dimensions}`);
  const wrong = state.observations.filter((o) => o.utility !== surface.utilities[maskIndex(o.mask, state.dimensions)]);
  if (wrong.length)
    throw new UserError(
      `the events log ${path} records an episode the rules could not produce: the observed utility of ${wrong
        .slice(0, 5)
        .map((o) => o.mask)
        .join(', ')}${wrong.length > 5 ? ', …' : ''} is not the reference's`,
    );
}

/** The reference surface of the episode's condition, refused when its identity is not the one fixed at the start. */
function referenceOf(
  settings: Settings,
  references: string,
  condition: string,
  fixed?: Identity,
): { identity: Identity; surface: Surface } {
  const store = new ReferenceStore(references, settings.paths);
  const manifest = store.requireManifest();
  const entry = store.select(manifest, [condition])[0]![1];
  const identity: Identity = {
    source: entry.source,
    family: entry.family,
    dimensions: entry.dimensions,
    table_sha256: entry.table_sha256,
    plan_sha256: entry.plan_sha256,
  };
  if (fixed) {
    const changed = (Object.keys(fixed) as (keyof Identity)[]).filter((key) => fixed[key] !== identity[key]);
    if (changed.length) {
      throw new UserError(
        `the reference of condition '${condition}' in ${store.dir} changed since the episode started ` +
          `(${changed.map((k) => `${k} ${fixed[k]} -> ${identity[k]}`).join(', ')}); the episode cannot go on`,
      );
    }
  }
  const [records] = groupByCondition(store.table(condition, manifest).records);
  return { identity, surface: surfaceFromRecords(records ?? []) };
}

/** The actions of this process waiting for each episode folder, in order: each runs when the one before it ends. */
const queues = new Map<string, Promise<unknown>>();

/** Runs `body` after the actions of this process already queued on `folder` (a batch or pipelined calls wait, in order). */
function queued<T>(folder: string, body: () => Promise<T>): Promise<T> {
  const before = queues.get(folder) ?? Promise.resolve();
  const mine = before.then(body, body);
  queues.set(folder, mine);
  const done = () => {
    if (queues.get(folder) === mine) queues.delete(folder);
  };
  mine.then(done, done);
  return mine;
}

/** Actions whose outcome changes the state when they succeed (the others are notes). */
export interface Step<T> {
  result: T;
  /** The new state: this action is a commit. */
  state?: EpisodeState;
  /** What the events log records beyond time, action, credits and outcome. */
  event?: Record<string, Json>;
  /** Receipt lines this commit announces (a reserved calculation's): the log keeps room for them. */
  receipts?: number;
}

/**
 * Refuses a commit that would leave the log without room for what must still follow it: the receipts
 * of reserved calls not yet answered (and those `step` announces), and the close (receipt.ts). A close
 * only has to fit; so a client's padded calculations can never keep an episode from being closed or scored.
 */
function requireRoom(log: Log, event: Event, closes: boolean, receipts: number): void {
  const reserved = log.lines.filter((l) => l.event.kind === 'action' && l.event.action === 'calculate' && l.event.outcome === 'ok').length;
  const answered = log.lines.filter((l) => l.event.kind === CALCULATION_KIND).length;
  const room = closes ? 0 : CLOSE_ROOM_BYTES + (reserved - answered + receipts) * RECEIPT_ROOM_BYTES;
  if (log.size + Buffer.byteLength(`${JSON.stringify(event)}\n`) + room > EVENTS_MAX_BYTES)
    throw new UserError(
      `the events log has no room left for this ${String(event.action)} (its receipts and the episode's close are kept room for)`,
    );
}

/**
 * Takes the episode's lock and opens its log, repairing a torn last line; `body` runs with both. With
 * `create`, the log is created when missing (an episode's start).
 */
async function underLock<T>(folder: string, body: (log: Log) => T, create = false): Promise<T> {
  return queued(folder, async () => {
    const release = await lockFolder(folder, LOCK_WAIT_SECONDS);
    try {
      if (create) {
        const path = join(folder, EVENTS_FILE);
        try {
          closeSync(openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o644));
        } catch (error) {
          throw fsError(error, 'create', path);
        }
      } else removeStaleEntries(folder, /^episode\.json\.(\d+)\.\d+\.tmp$/); // a copy killed mid-write
      const log = openLog(folder, true);
      try {
        return body(log);
      } finally {
        closeLog(log);
      }
    } finally {
      release();
    }
  });
}

/**
 * One action: the state derived from the log and checked against its copy and the reference, `body`
 * run; a commit is one appended line, then the copy rewritten; a success that changes nothing, or a
 * refusal (UserError), is a note.
 */
export async function act<T>(
  settings: Settings,
  dir: string,
  action: string,
  request: Record<string, Json>,
  body: (state: EpisodeState, surface: Surface, at: string) => Step<T>,
): Promise<T> {
  const folder = resolve(dir);
  if (!lstatOrNothing(folder)?.isDirectory()) throw new UserError(`episode folder ${dir} does not exist`);
  return underLock(folder, (log) => {
    const derived = derive(log, folder);
    reconcile(folder, derived);
    const { state } = derived;
    const before = state.credits_remaining;
    const at = now(); // the action's time, in its event and in the state it makes
    let step: Step<T>;
    let event: Event;
    try {
      const { surface } = referenceOf(settings, state.references, state.condition, state.reference);
      checkObservedValues(state, surface, folder);
      step = body(state, surface, at);
      event = {
        kind: 'action',
        at,
        action,
        ...request,
        ...step.event,
        credits_before: before,
        credits_after: (step.state ?? state).credits_remaining,
        outcome: 'ok',
      };
      if (step.state) requireRoom(log, event, step.state.closed && !state.closed, step.receipts ?? 0);
    } catch (error) {
      if (error instanceof UserError) {
        const reason = capReason(error.message);
        try {
          appendNote(log, {
            kind: 'action',
            at,
            action,
            ...request,
            credits_before: before,
            credits_after: before,
            outcome: 'refused',
            reason,
          });
        } catch (failure) {
          if (!(failure instanceof UserError)) throw failure;
          // the refusal stands (nothing changed); a full disk only keeps it out of the log
        }
      }
      throw error;
    }
    if (step.state) {
      appendEvent(log, event);
      writeSnapshot(folder, step.state);
    } else {
      try {
        appendNote(log, event);
      } catch (failure) {
        if (!(failure instanceof UserError)) throw failure;
        // a read (status, score) stands when its note cannot be written: a full log or disk only keeps it out
      }
    }
    return step.result;
  });
}

const now = () => new Date().toISOString();

function checkMasks(masks: readonly string[], dimensions: number): void {
  const size = 2 ** dimensions;
  if (masks.length > size)
    throw new UserError(`a batch of ${masks.length} masks is more than the ${size} masks of a ${dimensions}-option condition`);
  const bad = masks.filter((m) => maskIndex(m, dimensions) < 0);
  if (bad.length)
    throw new UserError(
      `not a mask of ${dimensions} options (0/1 characters, option A first): ${bad
        .slice(0, 5)
        .map((m) => JSON.stringify(m.length > 16 ? `${m.slice(0, 16)}…` : m))
        .join(', ')}${bad.length > 5 ? ', …' : ''}`,
    );
}

/** What the events log records of a batch: its masks when they could be masks, else a capped summary. */
function batchRecord(masks: readonly string[]): Record<string, Json> {
  if (masks.length <= MAX_BATCH && masks.every((m) => /^[01]+$/.test(m) && m.length <= MAX_OPTIONS)) return { masks: [...masks] };
  return { n_masks: masks.length, masks_sample: masks.slice(0, 5).map((m) => (m.length > 16 ? `${m.slice(0, 16)}…` : m)) };
}

export interface StartOptions {
  dir: string;
  condition: string;
  budget: number;
  /** The reference folder (default the settings'). */
  references?: string;
  /** KEY=VALUE labels recorded in the state and the start event (a cohort's agent, run, …). */
  labels?: Record<string, string>;
  /** Seconds after the start past which observe, calculate and submit are refused (default: none). */
  sessionSeconds?: number;
  /** Calculation calls allowed (default 20). */
  calls?: number;
  /** Wall seconds a calculation call may run (default 45). */
  callSeconds?: number;
  /** The calculation engine (default `native`, the pinned runtime; `pyodide`: standard library only, the same bytes on every CPU). */
  engine?: string;
}

/** The limits of `options`, checked (one-line refusals). */
export function startLimits(options: Pick<StartOptions, 'calls' | 'callSeconds' | 'sessionSeconds' | 'engine'>): EpisodeLimits {
  if (options.engine !== undefined && options.engine !== 'native' && options.engine !== 'pyodide')
    throw new UserError(`--engine must be native or pyodide, not ${JSON.stringify(options.engine)}`);
  const limits: EpisodeLimits = {
    ...DEFAULT_EPISODE_LIMITS,
    ...(options.engine !== undefined && { engine: options.engine }),
    ...(options.calls !== undefined && { calls: options.calls }),
    ...(options.callSeconds !== undefined && { call_seconds: options.callSeconds }),
    ...(options.sessionSeconds !== undefined && { session_seconds: options.sessionSeconds }),
  };
  if (!Number.isInteger(limits.calls) || limits.calls < 0 || limits.calls > MAX_CALLS)
    throw new UserError(`--calls must be a whole number from 0 to ${MAX_CALLS}, not ${limits.calls}`);
  if (!(limits.call_seconds >= 1 && limits.call_seconds <= 900))
    throw new UserError(`--call-seconds must be from 1 to 900, not ${limits.call_seconds}`);
  const session = limits.session_seconds;
  if (session !== null && !(session >= 1 && session <= 7 * 86400))
    throw new UserError(`--session-seconds must be from 1 to ${7 * 86400}, not ${session}`);
  return limits;
}

/** Starts an episode in `dir` (created when missing; refused when it already holds one): the anchors observed free. */
export async function startEpisode(settings: Settings, options: StartOptions): Promise<EpisodeView> {
  const folder = resolve(options.dir);
  const references = resolve(options.references ?? settings.paths.references);
  // the reference, the budget, limits and labels are checked before anything is created
  const { identity, surface } = referenceOf(settings, references, options.condition);
  const d = surface.dimensions;
  const most = 2 ** d - 2;
  if (!Number.isInteger(options.budget) || options.budget < 0 || options.budget > most) {
    throw new UserError(
      `--budget must be a whole number from 0 to ${most} (the masks of ${options.condition} beyond the two free anchors), not ${options.budget}`,
    );
  }
  const limits = startLimits(options);
  const labels = checkLabels(options.labels);
  // a log without a complete line is a start cut short (by a kill or a full disk): the folder holds no episode yet
  const taken = (log?: Log) => {
    const lines = log ? log.lines.length : lstatOrNothing(join(folder, EVENTS_FILE)) ? logLines(folder) : 0;
    if (lines || lstatOrNothing(join(folder, STATE_FILE)))
      throw new UserError(`${options.dir} already holds an episode (${lines ? EVENTS_FILE : STATE_FILE}); use another folder`);
  };
  taken();
  makeDirs(folder);
  return underLock(
    folder,
    (log) => {
      taken(log); // again under the lock: of two starts at once, one makes the episode
      const at = now();
      const anchors = [allMasks(d)[0]!, allMasks(d).at(-1)!];
      const utilities = anchors.map((mask) => surface.utilities[maskIndex(mask, d)]!);
      const state: EpisodeState = {
        episode_version: 3,
        condition: options.condition,
        dimensions: d,
        budget: options.budget,
        references,
        reference: identity,
        started_at: at,
        labels,
        limits,
        observations: anchors.map((mask, k) => ({ mask, utility: utilities[k]!, paid: false, at })),
        credits_remaining: options.budget,
        calls_used: 0,
        closed: false,
        submission: null,
        ended: null,
      };
      appendEvent(log, {
        kind: 'action',
        at,
        action: 'start',
        condition: options.condition,
        budget: options.budget,
        references,
        reference: identity,
        labels,
        limits,
        masks: anchors,
        utilities,
        new_masks: [],
        credits_before: options.budget,
        credits_after: options.budget,
        outcome: 'ok',
      });
      writeSnapshot(folder, state);
      return view(state, at);
    },
    true,
  );
}

function logLines(folder: string): number {
  const log = openLog(folder, false);
  try {
    return log.lines.length;
  } finally {
    closeLog(log);
  }
}

/** Buys the new distinct masks of `masks` (repeats and known masks free), or refuses the whole batch. */
export function observe(settings: Settings, dir: string, masks: readonly string[]): Promise<ObserveResult> {
  return act(settings, dir, 'observe', batchRecord(masks), (state, surface, at) => {
    requireOpen(state, at, 'observations');
    checkMasks(masks, state.dimensions);
    if (!masks.length) throw new UserError('name at least one mask to observe');
    const known = new Set(state.observations.map((o) => o.mask));
    const wanted = [...new Set(masks)];
    const fresh = wanted.filter((m) => !known.has(m));
    if (fresh.length > state.credits_remaining) {
      throw new UserError(
        `this batch needs ${fresh.length} credit(s) for its new masks, ${state.credits_remaining} remain: refused whole, nothing spent`,
      );
    }
    const next: EpisodeState = {
      ...state,
      observations: [
        ...state.observations,
        ...fresh.map((mask) => ({ mask, utility: surface.utilities[maskIndex(mask, state.dimensions)]!, paid: true, at })),
      ],
      credits_remaining: state.credits_remaining - fresh.length,
    };
    const value = new Map(next.observations.map((o) => [o.mask, o.utility]));
    return {
      state: fresh.length ? next : undefined,
      event: {
        new_masks: fresh,
        ...(fresh.length ? { utilities: fresh.map((m) => surface.utilities[maskIndex(m, state.dimensions)]!) } : {}),
      },
      result: { ...view(next, at), observations: wanted.map((mask) => ({ mask, utility: value.get(mask)! })), new_masks: fresh },
    };
  });
}

/** The episode as it is: budget, credits, every observation, closed or not. */
export function episodeStatus(settings: Settings, dir: string): Promise<EpisodeView> {
  return act(settings, dir, 'status', {}, (state, _surface, at) => ({ result: view(state, at) }));
}

/** Submits the predicted table (parsed for the episode's width by `parse`) and closes the episode. */
export function submitPrediction(
  settings: Settings,
  dir: string,
  parse: (dimensions: number) => number[],
  fitted?: { name: string; parameters: Record<string, Json>; observations: readonly string[] },
): Promise<EpisodeView & { submitted_at: string; estimator?: { name: string; parameters: Record<string, Json> } }> {
  const request: Record<string, Json> = fitted ? { estimator: fitted.name } : {};
  return act(settings, dir, 'submit', request, (state, _surface, at) => {
    requireOpen(state, at, 'submissions');
    // an estimator's table is fitted outside the lock: it stands only on the observations it was fitted on
    if (fitted && state.observations.map((o) => o.mask).join() !== fitted.observations.join())
      throw new UserError('the observations changed while the estimator was fitted: submit again');
    const values = parse(state.dimensions);
    const table = Object.fromEntries(allMasks(state.dimensions).map((m, k) => [m, values[k]!]));
    const estimator = fitted ? { name: fitted.name, parameters: fitted.parameters } : null;
    const next: EpisodeState = { ...state, closed: true, submission: { at, prediction_table: table, estimator } };
    // the receipt binds the submission: its table and the table's sha256 (checked whenever the log is read)
    return {
      state: next,
      event: { prediction_table: table, table_sha256: tableSha256(table, state.dimensions), ...(estimator && { estimator }) },
      result: { ...view(next, at), submitted_at: at, ...(estimator && { estimator }) },
    };
  });
}

/** Ends an open episode without a submission (an agent gone, out of time): it is then scored as undelivered. */
export function endEpisode(settings: Settings, dir: string, reason: string): Promise<EpisodeView & { ended_at: string; reason: string }> {
  const why = capReason(String(reason).trim());
  return act(settings, dir, 'end', { reason: why }, (state, _surface, at) => {
    if (!why) throw new UserError('an end needs a reason (--reason TEXT)');
    if (state.closed)
      throw new UserError(state.ended ? 'the episode has already ended' : 'the episode is closed: a prediction was submitted');
    const next: EpisodeState = { ...state, closed: true, ended: { at, reason: why } };
    return { state: next, result: { ...view(next, at), ended_at: at, reason: why } };
  });
}

/** The state as the log records it, read without the lock (the log is only appended to; a torn line is ignored). */
export function readEpisode(dir: string): EpisodeState {
  const folder = resolve(dir);
  const log = openLog(folder, false);
  try {
    return derive(log, folder).state;
  } finally {
    closeLog(log);
  }
}

/** The episode's events as the log holds them (read without the lock). */
export function readEvents(dir: string): Event[] {
  const log = openLog(resolve(dir), false);
  try {
    return log.lines.map((l) => l.event);
  } finally {
    closeLog(log);
  }
}

/**
 * Appends the receipt of reserved call `call` (a commit, under the lock): refused when the call is
 * not one reserved and still without a receipt.
 */
export function commitReceipt(dir: string, call: number, receipt: Record<string, Json>): Promise<void> {
  const folder = resolve(dir);
  return underLock(folder, (log) => {
    const { state } = derive(log, folder);
    const answered = log.lines.some((l) => l.event.kind === CALCULATION_KIND && l.event.call === call);
    if (call > state.calls_used || answered) throw new UserError(`calculation call ${call} is not reserved or already has its receipt`);
    appendEvent(log, { kind: CALCULATION_KIND, at: now(), call, receipt });
  });
}

/** What a score says of the episode beyond grade's fields. */
interface Delivery {
  /** False when the episode ended without a submission (or its deadline passed first): recovery 0, strict 0. */
  delivered: boolean;
  undelivered: boolean;
  /** A complete table was submitted (the benchmark's valid artifact). */
  artifact_valid: boolean;
  budget: number;
  purchased: number;
  calls_used: number;
  labels: Record<string, string>;
  submitted_at: string | null;
  ended: { at: string; reason: string } | null;
  /** The estimator the evaluator fitted for the submission (null: a table was submitted). */
  estimator: { name: string; parameters: Record<string, Json> } | null;
}

/** An undelivered episode's score: no table, the benchmark's zeros. */
export interface UndeliveredScore {
  effect_recovery: 0;
  strict_effect_reconstruction: false;
  exact_optimal_choice: false;
  near_optimal_choice: false;
  prediction_table: null;
  observed: string[];
}

export type EpisodeScore = (GradeResult | UndeliveredScore) & Delivery & Partial<SharedScores>;

export interface ScoreOptions {
  /** Add the shared-estimator scores (default true): started in a controls' worker unless `worker` is given. */
  shared?: boolean;
  worker?: PythonWorker;
}

/**
 * The score of an episode that is over: its submission (every observation replacing its cell), or,
 * ended without one or past its deadline, undelivered; with the shared-estimator scores of its
 * observations and the gains over them.
 */
export async function scoreEpisode(settings: Settings, dir: string, options: ScoreOptions = {}): Promise<EpisodeScore> {
  const { score, surface, observations } = await act(settings, dir, 'score', {}, (state, surface, at) => {
    const overdue = sessionClock(state, at).seconds_left === 0;
    if (!state.closed && !overdue) throw new UserError('the episode is still open: submit a prediction first');
    const observed = state.observations.map((o) => o.mask);
    const delivery: Delivery = {
      delivered: state.submission !== null,
      undelivered: state.submission === null,
      artifact_valid: state.submission !== null,
      budget: state.budget,
      purchased: state.observations.filter((o) => o.paid).length,
      calls_used: state.calls_used,
      labels: state.labels,
      submitted_at: state.submission?.at ?? null,
      ended: state.ended ?? (state.submission ? null : { at: deadlineAt(state), reason: 'the session deadline passed' }),
      estimator: state.submission?.estimator ?? null,
    };
    let graded: GradeResult | UndeliveredScore;
    if (state.submission) {
      const table = state.submission.prediction_table;
      graded = gradeSurface(
        surface,
        allMasks(state.dimensions).map((m) => table[m]!),
        { observed },
      );
    } else {
      graded = {
        effect_recovery: 0,
        strict_effect_reconstruction: false,
        exact_optimal_choice: false,
        near_optimal_choice: false,
        prediction_table: null,
        observed,
      };
    }
    const pairs = state.observations.map((o) => [o.mask, o.utility] as const);
    return { result: { score: { ...graded, ...delivery } as EpisodeScore, surface, observations: pairs } };
  });
  if (options.shared === false) return score;
  const { sharedScores } = await import('./shared-scores.ts');
  const { startControlsWorker } = await import('./controls/worker.ts');
  const worker = options.worker ?? (await startControlsWorker(settings));
  try {
    return { ...score, ...(await sharedScores(worker, surface, observations, score.effect_recovery)) };
  } finally {
    if (!options.worker) await worker.close();
  }
}

/** What the public task view needs of an episode: its view, the reference folder and the condition's family. */
export interface EpisodeContext {
  view: EpisodeView;
  references: string;
  family: string;
  source: string;
}

/** The reference folder an episode was started on (read without the lock: the log is only appended to; a torn line is ignored). */
export function episodeReferences(dir: string): string {
  return fixedAtStart(dir).references;
}

/** What the episode fixed at its start: its reference folder, its limits and its calculation engine. */
export function fixedAtStart(dir: string): { references: string; limits: EpisodeLimits; engine: 'native' | 'pyodide' } {
  const folder = resolve(dir);
  const log = openLog(folder, false);
  try {
    const { state } = derive(log, folder);
    return { references: state.references, limits: state.limits, engine: state.limits.engine ?? 'pyodide' };
  } finally {
    closeLog(log);
  }
}

/** The episode's context for its task view (`task` in the events log). */
export function episodeContext(settings: Settings, dir: string): Promise<EpisodeContext> {
  return act(settings, dir, 'task', {}, (state) => ({
    result: { view: view(state), references: state.references, family: state.reference.family, source: state.reference.source },
  }));
}
