// An episode's receipt, `events.jsonl`: a write-ahead log, one strict-JSON line per event, that the
// episode's state is derived from (episode.ts). An event's `kind` says what it is: `action` (an
// episode action, `start`, `observe`, `calculate` (a call reserved), `submit`, `end`, … in `action`),
// `calculation` (the receipt of a reserved call: its code's run in the sandbox) and `overflow` (notes
// past the cap, counted); later kinds are read and kept, and change no state. The start names the
// episode (a random id and its folder's name); reservations and receipts name its id (episode/state.ts).
//
// Commits (the lines that change the state) are appended whole and synced; a failed or short write
// is cut back to the last complete line before the error is reported, and a line torn by a kill is
// cut off when the log is next opened for an action (its bytes after the last newline): so a log is
// always a sequence of complete lines, and an action is in it wholly or not at all. Notes (reads,
// refusals, observations of known masks) are bounded: a note identical to the last line but for its
// time is counted on that line (`calls`, `first_at`); past NOTES_MAX_BYTES notes are only counted,
// one `overflow` line per stretch between commits. A rewritten last line is cut, then written: a kill
// there loses that note at worst, never a commit.
import { closeSync, constants, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { lstatOrNothing } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';
import { fsError } from '../core/fsutil.ts';
import { isObject, type Json, parseStrictJson } from '../analysis/strict-json.ts';

export const EVENTS_FILE = 'events.jsonl';
/**
 * The most a log can hold. Commits are bounded by the rules (at most 2^6 purchases of a few KiB; at most
 * 50 calculation calls, each with its code ≤ 64 KiB, evidence and outputs ≤ 2 × 64 KiB), but JSON can
 * write a byte as six (`\u0000`): 50 padded calls would not fit, so every commit but the receipts and the
 * close keeps room for them (RECEIPT_ROOM_BYTES, CLOSE_ROOM_BYTES); notes are bounded by NOTES_MAX_BYTES.
 */
export const EVENTS_MAX_BYTES = 48 << 20;
/** The most a calculation's receipt line takes: two streams of 64 KiB, each byte at most 6 in JSON, and its other fields. */
export const RECEIPT_ROOM_BYTES = 2 * 6 * (64 << 10) + (8 << 10);
/** Kept free by every commit but the close: the submission or end, purchases and the overflow notes between commits. */
export const CLOSE_ROOM_BYTES = 1 << 20;
/** Past this size, notes are counted in an `overflow` line instead of written one by one. */
export const NOTES_MAX_BYTES = 256 << 10;
/** A reason in a note is cut to this many characters. */
export const REASON_MAX_CHARS = 400;

export type Event = { [key: string]: Json };
/** The kind of a calculation's receipt (the answer to a reserved `calculate` action). */
export const CALCULATION_KIND = 'calculation';
/** The actions whose successful line changes the state (read strictly). */
const COMMITS = ['start', 'observe', 'submit', 'calculate', 'end'];

interface Line {
  event: Event;
  offset: number;
  bytes: number;
}

/** An episode's log, open for reading and (under the episode's lock) writing. */
export interface Log {
  path: string;
  fd: number;
  /** Bytes of complete lines. */
  size: number;
  lines: Line[];
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

function readAll(fd: number, size: number): Buffer {
  const buffer = Buffer.alloc(size);
  let at = 0;
  while (at < size) {
    const n = readSync(fd, buffer, at, size - at, at);
    if (n === 0) break;
    at += n;
  }
  return buffer.subarray(0, at);
}

/**
 * Refuses an episode folder that is not a folder of its own: missing, or a symbolic link (an agent's
 * link to another folder would put an episode's files, or another episode's log, there), or a file.
 */
export function requireEpisodeFolder(dir: string): void {
  const stats = lstatOrNothing(dir);
  if (!stats) throw new UserError(`episode folder ${dir} does not exist`);
  if (stats.isSymbolicLink())
    throw new UserError(`episode folder ${dir} is a symbolic link; an episode is read and written only in a folder of its own`);
  if (!stats.isDirectory()) throw new UserError(`episode folder ${dir} is not a folder`);
}

/**
 * Opens the log of episode folder `dir` (refused unless a folder of its own, as requireEpisodeFolder says): refused when it is missing (no episode), not a regular file
 * (a link, FIFO or device is never opened through), a file of several hard links, over EVENTS_MAX_BYTES, or holds a complete line
 * that is not an event. With `repair` (under the lock), a torn last line is cut off on disk; without
 * it, it is only ignored.
 */
export function openLog(dir: string, repair: boolean): Log {
  requireEpisodeFolder(dir);
  const path = join(dir, EVENTS_FILE);
  const stats = lstatOrNothing(path);
  if (!stats) throw new UserError(`${dir} holds no episode (no ${EVENTS_FILE}); start one with 'wwref episode start'`);
  if (!stats.isFile()) throw new UserError(`the events log ${path} is not a regular file (a link, FIFO or device); refused`);
  // another name of the same file (a hard link): the repair below would cut someone else's file
  if (stats.nlink > 1) throw new UserError(`the events log ${path} has ${stats.nlink} hard links (another file's name); refused`);
  let fd: number;
  try {
    fd = openSync(path, (repair ? constants.O_RDWR : constants.O_RDONLY) | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw fsError(error, 'open', path);
  }
  try {
    const size = fstatSync(fd).size;
    if (!fstatSync(fd).isFile()) throw new UserError(`the events log ${path} is not a regular file; refused`);
    if (size > EVENTS_MAX_BYTES) throw new UserError(`the events log ${path} is ${size} bytes, more than the ${EVENTS_MAX_BYTES} allowed`);
    const bytes = readAll(fd, size);
    const complete = bytes.lastIndexOf(0x0a) + 1;
    if (complete < bytes.length && repair) {
      try {
        ftruncateSync(fd, complete); // a line torn by a kill or a full disk: never committed
      } catch (error) {
        throw fsError(error, 'repair', path);
      }
    }
    const lines: Line[] = [];
    let offset = 0;
    let number = 0;
    while (offset < complete) {
      const end = bytes.indexOf(0x0a, offset);
      number++;
      let text: string;
      try {
        text = UTF8.decode(bytes.subarray(offset, end));
      } catch {
        throw new UserError(`events log ${path}, line ${number}: not UTF-8 text`);
      }
      const event = parseLine(text, `events log ${path}, line ${number}`);
      if (!isObject(event) || typeof event.kind !== 'string' || typeof event.at !== 'string')
        throw new UserError(`events log ${path}, line ${number}: not an event (an object with a kind and a time)`);
      lines.push({ event, offset, bytes: end + 1 - offset });
      offset = end + 1;
    }
    return { path, fd, size: complete, lines };
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}

/**
 * A line as JSON: read by the native parser, then again strictly (a repeated key, …, refused) when
 * it could be a commit, the lines the state is derived from; a note is only kept, so its check can be lighter.
 */
function parseLine(text: string, what: string): Json {
  let quick: Json;
  try {
    quick = JSON.parse(text) as Json;
  } catch {
    return parseStrictJson(text, what); // its one-line message says where
  }
  if (isObject(quick) && quick.kind === 'action' && quick.outcome === 'ok' && COMMITS.includes(String(quick.action)))
    return parseStrictJson(text, what);
  if (isObject(quick) && quick.kind === CALCULATION_KIND) return parseStrictJson(text, what);
  return quick;
}

export function closeLog(log: Log): void {
  closeSync(log.fd);
}

/** Writes all of `data` at `position` (a short write continues; an error is thrown to the caller). */
function writeAllAt(fd: number, data: Buffer, position: number): void {
  let done = 0;
  while (done < data.length) done += writeSync(fd, data, done, data.length - done, position + done);
}

/** Cuts the log back to `size` bytes after a failed write; a failure to cut is left to the next open's repair. */
function cutBack(log: Log, size: number): void {
  try {
    ftruncateSync(log.fd, size);
  } catch {
    // the torn bytes stay after the last newline, where the next open cuts them off
  }
}

/** Appends `event` as one line (a commit: synced): it is in the log wholly, or (an error thrown) not at all. */
export function appendEvent(log: Log, event: Event, sync = true): void {
  const line = Buffer.from(`${JSON.stringify(event)}\n`);
  if (log.size + line.length > EVENTS_MAX_BYTES) throw new UserError(`the events log ${log.path} is full (${EVENTS_MAX_BYTES} bytes)`);
  try {
    writeAllAt(log.fd, line, log.size);
    if (sync) fsyncSync(log.fd);
  } catch (error) {
    cutBack(log, log.size);
    throw fsError(error, 'append to', log.path);
  }
  log.lines.push({ event, offset: log.size, bytes: line.length });
  log.size += line.length;
}

/** Replaces the last line by `event` (cut, then written; on failure the old line is put back when it can be). */
function replaceLast(log: Log, event: Event): void {
  const last = log.lines.at(-1)!;
  const line = Buffer.from(`${JSON.stringify(event)}\n`);
  const old = Buffer.from(`${JSON.stringify(last.event)}\n`);
  try {
    ftruncateSync(log.fd, last.offset);
    writeAllAt(log.fd, line, last.offset);
  } catch (error) {
    cutBack(log, last.offset);
    try {
      writeAllAt(log.fd, old, last.offset);
    } catch {
      cutBack(log, last.offset); // the old note is lost; the log still ends on a complete line
      log.lines.pop();
      log.size = last.offset;
    }
    throw fsError(error, 'append to', log.path);
  }
  log.lines[log.lines.length - 1] = { event, offset: last.offset, bytes: line.length };
  log.size = last.offset + line.length;
}

/** An event without its time and count: two notes with the same signature are one line. */
function signature(event: Event): string {
  const { at: _at, first_at: _first, calls: _calls, ...rest } = event as Record<string, Json>;
  return JSON.stringify(rest);
}

/** Records a note (an event that changes no state), bounded as the module's comment says. */
export function appendNote(log: Log, event: Event): void {
  const at = String(event.at);
  const last = log.lines.at(-1)?.event;
  const count = (e: Event) => (typeof e.calls === 'number' ? e.calls : 1);
  if (last && signature(last) === signature(event)) {
    replaceLast(log, { ...last, first_at: last.first_at ?? String(last.at), at, calls: count(last) + 1 });
    return;
  }
  if (log.size < NOTES_MAX_BYTES) {
    appendEvent(log, event, false);
    return;
  }
  const label = `${String(event.action ?? event.kind)} ${String(event.outcome ?? '')}`.trim();
  if (last?.kind === 'overflow' && isObject(last.actions)) {
    const actions = { ...last.actions, [label]: Number(last.actions[label] ?? 0) + 1 };
    replaceLast(log, { ...last, at, calls: count(last) + 1, actions });
  } else {
    appendEvent(log, { kind: 'overflow', at, first_at: at, calls: 1, actions: { [label]: 1 } }, false);
  }
}

/** A reason cut to REASON_MAX_CHARS characters (whole code points). */
export function capReason(reason: string): string {
  const chars = [...reason];
  return chars.length > REASON_MAX_CHARS ? `${chars.slice(0, REASON_MAX_CHARS).join('')}…` : reason;
}
