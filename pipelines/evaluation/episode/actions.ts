// The actions of an episode that agents and the CLI call: start (the anchors observed free, the
// budget, limits and labels checked, `startLimits`), observe (a batch bought whole or refused whole),
// status, submit (a table, or an estimator's fitted one, closes the episode), end (closed without a
// submission) and the task view's context; each runs as one action of `log.ts`.
//
// Budgeted episodes with the benchmark's rules. The two anchors (all-off and all-on masks) are free;
// each new distinct mask costs one credit; a mask already observed is free again; a batch that needs
// more credits than remain is refused whole, spending nothing; a submission closes the episode, and
// only a closed episode is scored. The reference's identity (its table's sha256, plan, source,
// family, width) is fixed at the start and checked at every action.
import { randomBytes } from 'node:crypto';
import { basename, join, resolve } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { makeDirs } from '../../core/fsutil.ts';
import { lstatOrNothing } from '../../core/containment.ts';
import type { Settings } from '../../core/settings.ts';
import { allMasks, maskIndex } from '../../catalog/masks.ts';
import type { Json } from '../../analysis/strict-json.ts';
import { checkLabels } from '../labels.ts';
import { appendEvent, capReason, closeLog, EVENTS_FILE, type Log, openLog, requireEpisodeFolder } from '../receipt.ts';
import { act, STATE_FILE, underLock, writeSnapshot } from './log.ts';
import { referenceOf } from './reference.ts';
import {
  DEFAULT_EPISODE_LIMITS,
  type EpisodeLimits,
  type EpisodeState,
  type EpisodeView,
  MAX_BATCH,
  MAX_CALLS,
  MAX_OPTIONS,
  now,
  type ObserveResult,
  requireOpen,
  tableSha256,
  view,
} from './state.ts';

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
  // a link or file where the folder goes (an agent's, in a cohort's folder) is never written through
  if (lstatOrNothing(folder)) requireEpisodeFolder(folder);
  taken();
  makeDirs(folder);
  requireEpisodeFolder(folder);
  return underLock(
    folder,
    (log) => {
      taken(log); // again under the lock: of two starts at once, one makes the episode
      const at = now();
      const anchors = [allMasks(d)[0]!, allMasks(d).at(-1)!];
      const utilities = anchors.map((mask) => surface.utilities[maskIndex(mask, d)]!);
      // who the episode is: every reservation and receipt names its id, and the log its folder's name (state.ts)
      const episode = { id: randomBytes(16).toString('hex'), name: basename(folder) };
      const state: EpisodeState = {
        episode_version: 4,
        episode,
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
        episode,
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

/** What the public task view needs of an episode: its view, the reference folder and the condition's family. */
export interface EpisodeContext {
  view: EpisodeView;
  references: string;
  family: string;
  source: string;
}

/** The episode's context for its task view (`task` in the events log). */
export function episodeContext(settings: Settings, dir: string): Promise<EpisodeContext> {
  return act(settings, dir, 'task', {}, (state) => ({
    result: { view: view(state), references: state.references, family: state.reference.family, source: state.reference.source },
  }));
}
