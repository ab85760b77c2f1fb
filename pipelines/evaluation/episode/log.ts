// An episode's log and its commits: the folder's lock and this process's queue per episode
// (`underLock`), one action run under them (`act`: the state derived and checked, a commit appended,
// a refusal noted), the room the log keeps for receipts and the close, the copy `episode.json`
// reconciled with the log and rewritten, a calculation's receipt committed (`commitReceipt`), and the
// reads that need no lock (`readEpisode`, `readLogged`, `fixedAtStart`).
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
import { AsyncLocalStorage } from 'node:async_hooks';
import { closeSync, constants, openSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { fsError, writeJsonAtomic } from '../../core/fsutil.ts';
import { lstatOrNothing, removeStaleEntries } from '../../core/containment.ts';
import type { Settings } from '../../core/settings.ts';
import { lockFolder } from '../../references/lock.ts';
import type { Surface } from '../../analysis/effects.ts';
import { isObject, type Json, readStrictJsonFile } from '../../analysis/strict-json.ts';
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
  requireEpisodeFolder,
} from '../receipt.ts';
import { checkObservedValues, referenceOf } from './reference.ts';
import { derive, type EpisodeLimits, EpisodeState, now } from './state.ts';

export const STATE_FILE = 'episode.json';
/** How long an action waits for another one on the same episode. */
const LOCK_WAIT_SECONDS = 30;
const STATE_MAX_BYTES = 16 << 20;

/** The copy of the state in `episode.json`, or undefined when there is none; refused unless strict JSON of the state's form. */
function readSnapshot(dir: string): EpisodeState | undefined {
  const path = join(dir, STATE_FILE);
  if (!lstatOrNothing(path)) return undefined;
  const json = readStrictJsonFile(path, 'episode state', STATE_MAX_BYTES);
  // a copy of an earlier version: rewritten from the log
  if (isObject(json) && (json.episode_version === 2 || json.episode_version === 3)) return undefined;
  const parsed = EpisodeState.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`episode state ${path} is malformed at ${issue.path.join('.') || '(top)'}: ${issue.message}`);
  }
  return parsed.data;
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
export function writeSnapshot(dir: string, state: EpisodeState): void {
  try {
    writeJsonAtomic(join(dir, STATE_FILE), state);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
  }
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

/**
 * The signal of the server request an action runs for (set by `whileServed`): once it is aborted (the
 * episode removed from a server, its agent gone) the action is refused before it reads or writes the
 * log, with no note, so nothing is added to the log after the removal. A calculation's receipt still
 * answers a call reserved before it (the server waits for it).
 */
const serving = new AsyncLocalStorage<AbortSignal>();

/** Runs `body` (a tool call of a served episode) so that every action in it is refused once `signal` is aborted. */
export function whileServed<T>(signal: AbortSignal, body: () => Promise<T>): Promise<T> {
  return serving.run(signal, body);
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
export async function underLock<T>(folder: string, body: (log: Log) => T, create = false): Promise<T> {
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
  requireEpisodeFolder(folder);
  const served = serving.getStore();
  const requireServed = () => {
    if (served?.aborted) throw new UserError('this episode is no longer served (its agent has ended): nothing was done');
  };
  requireServed(); // before waiting for the lock
  return underLock(folder, (log) => {
    requireServed(); // and under it, with no wait before the commit below: an abort cannot fall in between
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

/**
 * What `readLogged` reads, checked as every action checks it: the reference's identity and the observed
 * utilities (the log `status` accepts, the copy of the state aside).
 */
export function readChecked(settings: Settings, dir: string): { state: EpisodeState; events: Event[] } {
  const read = readLogged(dir);
  const { surface } = referenceOf(settings, read.state.references, read.state.condition, read.state.reference);
  checkObservedValues(read.state, surface, resolve(dir));
  return read;
}

/**
 * Whether the copy of the state says the episode is closed: for a poll while an agent runs (a cohort's),
 * so it never throws, never waits (a FIFO or link planted there is not opened through: false) and reads
 * at most the copy's bound. The copy may lag behind the log: the log is the record.
 */
export function episodeClosed(dir: string): boolean {
  try {
    const json = readStrictJsonFile(join(resolve(dir), STATE_FILE), 'episode state', STATE_MAX_BYTES);
    return isObject(json) && json.closed === true;
  } catch {
    return false;
  }
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

/** The state and the events of one reading of the log (without the lock): a log the rules could not produce is refused. */
export function readLogged(dir: string): { state: EpisodeState; events: Event[] } {
  const folder = resolve(dir);
  const log = openLog(folder, false);
  try {
    return { state: derive(log, folder).state, events: log.lines.map((l) => l.event) };
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
    appendEvent(log, { kind: CALCULATION_KIND, at: now(), call, ...(state.episode && { episode_id: state.episode.id }), receipt });
  });
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
