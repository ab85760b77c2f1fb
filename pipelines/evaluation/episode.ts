// Budgeted episodes with the benchmark's rules: the one entry point of `episode/`, which holds them by
// concern. `episode/state.ts` the state's schema, its view and session clock, and its derivation from
// the events log; `episode/reference.ts` the reference fixed at the start and checked at every action;
// `episode/log.ts` the lock, the queue and one action as one commit of the log (`act`), the copy
// `episode.json`, receipts and the reads without the lock; `episode/actions.ts` start, observe,
// status, submit, end and the task view's context; `episode/score.ts` the score of an episode that is
// over. Importers use this file; the modules import one another directly.
export { EVENTS_FILE } from './receipt.ts';
export type { EpisodeContext, StartOptions } from './episode/actions.ts';
export { endEpisode, episodeContext, episodeStatus, observe, startEpisode, startLimits, submitPrediction } from './episode/actions.ts';
export {
  act,
  commitReceipt,
  episodeClosed,
  episodeReferences,
  fixedAtStart,
  readChecked,
  readEpisode,
  readLogged,
  STATE_FILE,
  type Step,
  whileServed,
} from './episode/log.ts';
export { type EpisodeScore, type ScoreOptions, scoreEpisode, type UndeliveredScore } from './episode/score.ts';
export type { EpisodeIdentity, EpisodeLimits, EpisodeState, EpisodeView, ObserveResult, SessionClock } from './episode/state.ts';
export { DEFAULT_EPISODE_LIMITS, MAX_BATCH, MAX_CALLS, MAX_OPTIONS } from './episode/state.ts';
export { requireOpen, sessionClock, tableSha256, view } from './episode/state.ts';
