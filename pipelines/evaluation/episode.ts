// Budgeted episodes with the benchmark's rules. An episode folder holds `episode.json` (the state) and
// `events.jsonl` (the receipt: one line per action, refusals included). The two anchors (all-off and
// all-on masks) are free; each new distinct mask costs one credit; a mask already observed is free
// again; a batch that needs more credits than remain is refused whole, spending nothing; a submission
// closes the episode, and only a closed episode is scored. The reference's identity (its table's
// sha256, plan, source, family, width) is fixed at the start and checked at every action. Every action
// runs under the folder's lock and writes the state atomically; a refused action changes no state and
// is a UserError (exit 2), its refusal appended to the events log.
import { closeSync, constants, fstatSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { UserError } from '../core/errors.ts';
import { appendNoFollow, fsError, makeDirs, writeJsonAtomic } from '../core/fsutil.ts';
import { lstatOrNothing } from '../core/containment.ts';
import type { Settings } from '../core/settings.ts';
import { OPTION_LETTERS } from '../catalog/families.ts';
import { allMasks, maskIndex } from '../catalog/masks.ts';
import { lockFolder } from '../references/lock.ts';
import { ReferenceStore } from '../references/store.ts';
import { groupByCondition, surfaceFromRecords, type Surface } from '../analysis/effects.ts';
import { type GradeResult, gradeSurface, predictionFromJson } from '../analysis/grade.ts';
import { isObject, parseStrictJson, readBoundedText, readStrictJsonFile } from '../analysis/strict-json.ts';

export const STATE_FILE = 'episode.json';
export const EVENTS_FILE = 'events.jsonl';
/** How long an action waits for another one on the same episode. */
const LOCK_WAIT_SECONDS = 30;
const STATE_MAX_BYTES = 16 << 20;
/** The events log `score` reads to check the purchases (lines are short: a batch is logged capped). */
const EVENTS_MAX_BYTES = 64 << 20;
/** The widest condition has this many options. */
export const MAX_OPTIONS = OPTION_LETTERS.length;
/** A batch holds at most 2^d masks (every mask once); more than 2^MAX_OPTIONS is refused unread. */
export const MAX_BATCH = 2 ** MAX_OPTIONS;
/** Actions that change nothing: repeated one after another, they are one line of the events log with a count. */
const READ_ONLY = new Set(['status', 'task']);

const Identity = z.strictObject({
  source: z.string(),
  family: z.string(),
  dimensions: z.number().int(),
  table_sha256: z.string(),
  plan_sha256: z.string(),
});
type Identity = z.infer<typeof Identity>;

const Observation = z.strictObject({ mask: z.string(), utility: z.number(), paid: z.boolean(), at: z.string() });

const EpisodeState = z.strictObject({
  episode_version: z.literal(1),
  condition: z.string(),
  dimensions: z.number().int(),
  budget: z.number().int().nonnegative(),
  /** The reference folder, absolute: fixed at the start. */
  references: z.string(),
  reference: Identity,
  started_at: z.string(),
  observations: z.array(Observation),
  credits_remaining: z.number().int().nonnegative(),
  closed: z.boolean(),
  submission: z.strictObject({ at: z.string(), prediction_table: z.record(z.string(), z.number()) }).nullable(),
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
}

export interface ObserveResult extends EpisodeView {
  /** The masks of this batch that were bought (new and distinct), in the order asked. */
  new_masks: string[];
}

export function view(state: EpisodeState): EpisodeView {
  return {
    condition: state.condition,
    dimensions: state.dimensions,
    budget: state.budget,
    credits_remaining: state.credits_remaining,
    closed: state.closed,
    observations: state.observations.map(({ mask, utility }) => ({ mask, utility })),
  };
}

function readState(dir: string): EpisodeState {
  const path = join(dir, STATE_FILE);
  if (!lstatOrNothing(path)) throw new UserError(`${dir} holds no episode (no ${STATE_FILE}); start one with 'wwref episode start'`);
  const parsed = EpisodeState.safeParse(readStrictJsonFile(path, 'episode state', STATE_MAX_BYTES));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`episode state ${path} is malformed at ${issue.path.join('.') || '(top)'}: ${issue.message}`);
  }
  const state = parsed.data;
  const bad = impossibility(state);
  if (bad) throw new UserError(`episode state ${path} is not one the rules could produce: ${bad}`);
  return state;
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
  if (state.closed !== (state.submission !== null)) return state.closed ? 'closed without a submission' : 'a submission in an open episode';
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
  const path = join(dir, STATE_FILE);
  if (surface.dimensions !== state.dimensions)
    throw new UserError(`episode state ${path} has ${state.dimensions} options, the reference ${surface.dimensions}`);
  const wrong = state.observations.filter((o) => o.utility !== surface.utilities[maskIndex(o.mask, state.dimensions)]);
  if (wrong.length)
    throw new UserError(
      `episode state ${path} is not one the rules could produce: the observed utility of ${wrong
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

function appendEvent(dir: string, event: Record<string, unknown>): void {
  appendNoFollow(join(dir, EVENTS_FILE), `${JSON.stringify({ at: new Date().toISOString(), ...event })}\n`);
}

/**
 * Logs a read-only action that succeeded: when the log's last line is the same action on the same
 * credits, that line is replaced by one counting the calls (`calls`, `first_at`); else a new line.
 */
function logRead(dir: string, event: Record<string, unknown>): void {
  const path = join(dir, EVENTS_FILE);
  let fd: number | undefined;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_NOFOLLOW);
    const size = fstatSync(fd).size;
    const tail = Buffer.alloc(Math.min(size, 4096));
    readSync(fd, tail, 0, tail.length, size - tail.length);
    const text = tail.toString('utf8');
    const start = text.lastIndexOf('\n', text.length - 2) + 1;
    if (text.endsWith('\n') && (start > 0 || tail.length === size)) {
      const last = parseStrictJson(text.slice(start, -1), 'the last event');
      if (
        isObject(last) &&
        last.action === event.action &&
        last.outcome === 'ok' &&
        last.credits_after === event.credits_after &&
        typeof last.at === 'string'
      ) {
        const calls = typeof last.calls === 'number' ? last.calls + 1 : 2;
        const line = `${JSON.stringify({ ...last, first_at: last.first_at ?? last.at, at: new Date().toISOString(), calls })}\n`;
        const offset = size - tail.length + Buffer.byteLength(text.slice(0, start));
        ftruncateSync(fd, offset);
        writeSync(fd, line, offset);
        return;
      }
    }
  } catch (error) {
    // no log yet, or a last line that is no event of ours: a new line
    if (!(error instanceof UserError) && (error as NodeJS.ErrnoException).code !== 'ENOENT') throw fsError(error, 'append to', path);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  appendEvent(dir, event);
}

interface Step<T> {
  result: T;
  /** The new state, written atomically; none: unchanged. */
  state?: EpisodeState;
  /** What the events log records beyond time, action, credits and outcome. */
  event?: Record<string, unknown>;
}

/**
 * One action under the episode's lock: the state read, the reference checked, `body` run; its new
 * state written atomically and the event appended. A refusal (UserError) is appended too, and nothing else changes.
 */
async function act<T>(
  settings: Settings,
  dir: string,
  action: string,
  request: Record<string, unknown>,
  body: (state: EpisodeState, surface: Surface) => Step<T>,
): Promise<T> {
  const folder = resolve(dir);
  if (!lstatOrNothing(folder)?.isDirectory()) throw new UserError(`episode folder ${dir} does not exist`);
  const release = await lockFolder(folder, LOCK_WAIT_SECONDS);
  try {
    const state = readState(folder);
    const before = state.credits_remaining;
    try {
      const { surface } = referenceOf(settings, state.references, state.condition, state.reference);
      checkObservedValues(state, surface, folder);
      const step = body(state, surface);
      if (step.state) writeJsonAtomic(join(folder, STATE_FILE), step.state);
      const event = {
        action,
        ...request,
        ...step.event,
        credits_before: before,
        credits_after: (step.state ?? state).credits_remaining,
        outcome: 'ok',
      };
      if (READ_ONLY.has(action)) logRead(folder, event);
      else appendEvent(folder, event);
      return step.result;
    } catch (error) {
      if (error instanceof UserError)
        appendEvent(folder, {
          action,
          ...request,
          credits_before: before,
          credits_after: before,
          outcome: 'refused',
          reason: error.message,
        });
      throw error;
    }
  } finally {
    release();
  }
}

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
function batchRecord(masks: readonly string[]): Record<string, unknown> {
  if (masks.length <= MAX_BATCH && masks.every((m) => /^[01]+$/.test(m) && m.length <= MAX_OPTIONS)) return { masks: [...masks] };
  return { n_masks: masks.length, masks_sample: masks.slice(0, 5).map((m) => (m.length > 16 ? `${m.slice(0, 16)}…` : m)) };
}

export interface StartOptions {
  dir: string;
  condition: string;
  budget: number;
  /** The reference folder (default the settings'). */
  references?: string;
}

/** Starts an episode in `dir` (created when missing; refused when it already holds one): the anchors observed free. */
export async function startEpisode(settings: Settings, options: StartOptions): Promise<EpisodeView> {
  const folder = resolve(options.dir);
  const references = resolve(options.references ?? settings.paths.references);
  // the reference and the budget are checked before anything is created
  const { identity, surface } = referenceOf(settings, references, options.condition);
  const d = surface.dimensions;
  const most = 2 ** d - 2;
  if (!Number.isInteger(options.budget) || options.budget < 0 || options.budget > most) {
    throw new UserError(
      `--budget must be a whole number from 0 to ${most} (the masks of ${options.condition} beyond the two free anchors), not ${options.budget}`,
    );
  }
  const taken = () => {
    if (lstatOrNothing(join(folder, STATE_FILE)))
      throw new UserError(`${options.dir} already holds an episode (${STATE_FILE}); use another folder`);
  };
  taken();
  makeDirs(folder);
  const release = await lockFolder(folder, LOCK_WAIT_SECONDS);
  try {
    taken(); // again under the lock: of two starts at once, one makes the episode
    const at = new Date().toISOString();
    const anchors = [allMasks(d)[0]!, allMasks(d).at(-1)!];
    const state: EpisodeState = {
      episode_version: 1,
      condition: options.condition,
      dimensions: d,
      budget: options.budget,
      references,
      reference: identity,
      started_at: at,
      observations: anchors.map((mask) => ({ mask, utility: surface.utilities[maskIndex(mask, d)]!, paid: false, at })),
      credits_remaining: options.budget,
      closed: false,
      submission: null,
    };
    writeJsonAtomic(join(folder, STATE_FILE), state);
    appendEvent(folder, {
      action: 'start',
      condition: options.condition,
      budget: options.budget,
      reference: identity,
      masks: anchors,
      new_masks: [],
      credits_before: options.budget,
      credits_after: options.budget,
      outcome: 'ok',
    });
    return view(state);
  } finally {
    release();
  }
}

/** Buys the new distinct masks of `masks` (repeats and known masks free), or refuses the whole batch. */
export function observe(settings: Settings, dir: string, masks: readonly string[]): Promise<ObserveResult> {
  return act(settings, dir, 'observe', batchRecord(masks), (state, surface) => {
    if (state.closed) throw new UserError('the episode is closed (a prediction was submitted): no more observations');
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
    const at = new Date().toISOString();
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
      event: { new_masks: fresh },
      result: { ...view(next), observations: wanted.map((mask) => ({ mask, utility: value.get(mask)! })), new_masks: fresh },
    };
  });
}

/** The episode as it is: budget, credits, every observation, closed or not. */
export function episodeStatus(settings: Settings, dir: string): Promise<EpisodeView> {
  return act(settings, dir, 'status', {}, (state) => ({ result: view(state) }));
}

/** Submits the predicted table (parsed for the episode's width by `parse`) and closes the episode. */
export function submitPrediction(
  settings: Settings,
  dir: string,
  parse: (dimensions: number) => number[],
): Promise<EpisodeView & { submitted_at: string }> {
  return act(settings, dir, 'submit', {}, (state) => {
    if (state.closed) throw new UserError('the episode is closed: a prediction was already submitted');
    const values = parse(state.dimensions);
    const at = new Date().toISOString();
    const next: EpisodeState = {
      ...state,
      closed: true,
      submission: { at, prediction_table: Object.fromEntries(allMasks(state.dimensions).map((m, k) => [m, values[k]!])) },
    };
    return { state: next, result: { ...view(next), submitted_at: at } };
  });
}

export interface EpisodeScore extends GradeResult {
  budget: number;
  purchased: number;
  submitted_at: string;
}

/** The score of a closed episode: its submission, every observation (anchors included) replacing its cell. */
export function scoreEpisode(settings: Settings, dir: string): Promise<EpisodeScore> {
  return act(settings, dir, 'score', {}, (state, surface) => {
    if (!state.closed || !state.submission) throw new UserError('the episode is still open: submit a prediction first');
    checkPurchasesLogged(dir, state);
    const table = state.submission.prediction_table;
    const predicted = allMasks(state.dimensions).map((m) => table[m]!);
    const result = gradeSurface(surface, predicted, { observed: state.observations.map((o) => o.mask) });
    return {
      result: {
        ...result,
        budget: state.budget,
        purchased: state.observations.filter((o) => o.paid).length,
        submitted_at: state.submission.at,
      },
    };
  });
}

/** Refuses to score when the events log does not record, in order, the purchases the state holds. */
function checkPurchasesLogged(dir: string, state: EpisodeState): void {
  const path = join(resolve(dir), EVENTS_FILE);
  if (!lstatOrNothing(path)) throw new UserError(`the episode has no events log ${path}: its purchases cannot be checked`);
  const logged: string[] = [];
  readBoundedText(path, 'events log', EVENTS_MAX_BYTES)
    .split('\n')
    .forEach((line, k) => {
      if (line === '') return;
      const event = parseStrictJson(line, `events log ${path}, line ${k + 1}`);
      if (!isObject(event)) throw new UserError(`events log ${path}, line ${k + 1}: not an event`);
      if (event.action === 'observe' && event.outcome === 'ok') {
        if (!Array.isArray(event.new_masks)) throw new UserError(`events log ${path}, line ${k + 1}: an observation without new_masks`);
        logged.push(...event.new_masks.map(String));
      }
    });
  const paid = state.observations.filter((o) => o.paid).map((o) => o.mask);
  if (logged.join(',') !== paid.join(',')) {
    const show = (m: string[]) => (m.length ? (m.length > 8 ? `${m.slice(0, 8).join(', ')}, … (${m.length})` : m.join(', ')) : 'none');
    throw new UserError(`the events log ${path} records the purchases ${show(logged)}, the state ${show(paid)}: they disagree`);
  }
}

/** What the public task view needs of an episode: its view, the reference folder and the condition's family. */
export interface EpisodeContext {
  view: EpisodeView;
  references: string;
  family: string;
  source: string;
}

/** The reference folder an episode was started on (read without the lock: the state is replaced whole). */
export function episodeReferences(dir: string): string {
  return readState(resolve(dir)).references;
}

/** The episode's context for its task view (`task` in the events log). */
export function episodeContext(settings: Settings, dir: string): Promise<EpisodeContext> {
  return act(settings, dir, 'task', {}, (state) => ({
    result: { view: view(state), references: state.references, family: state.reference.family, source: state.reference.source },
  }));
}
