// `wwref cohort run`: one agent over conditions × budgets × repeats. One process serves every episode
// of the run (episodes-server.ts, each episode at its own URL with its own token), one controls worker
// fits the shared estimators for all of them, and up to `parallel` agents run at once. For each
// episode: start it in OUT/episodes/<id>, run the agent once (agent.ts) with the endpoint in its
// environment, stop serving it, score it (undelivered included) and append its results line. The
// controls of the same cells are computed meanwhile (they need no agent); then the summaries. Ctrl-C
// stops every agent and leaves the folder resumable: the same command skips the finished episodes
// and starts the unfinished ones again (their folders kept under OUT/interrupted/).
import { readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { lstatOrNothing } from '../../core/containment.ts';
import { Interrupted, UserError } from '../../core/errors.ts';
import { appendNoFollow, makeDirs } from '../../core/fsutil.ts';
import { ROOT } from '../../core/paths.ts';
import { Progress } from '../../core/progress.ts';
import type { Settings } from '../../core/settings.ts';
import type { Surface } from '../../analysis/effects.ts';
import { type GradeResult, referenceSurface } from '../../analysis/grade.ts';
import { THREAD_ENV } from '../../execution/launcher.ts';
import type { PythonWorker } from '../../execution/python-worker.ts';
import { profileEnvironment } from '../../core/profiles.ts';
import { lockFolder } from '../../references/lock.ts';
import type { StoredRecord } from '../controls/records.ts';
import { startControlsWorker } from '../controls/worker.ts';
import { endEpisode, episodeStatus, scoreEpisode, STATE_FILE, startEpisode } from '../episode.ts';
import { type EpisodesServer, serveEpisodes } from '../episodes-server.ts';
import type { SharedScores } from '../shared-scores.ts';
import { AGENT_GROUP_FILE, runAgent, stopLeftAgent } from './agent.ts';
import { cohortControls } from './baselines.ts';
import { type CohortFiles, writeCohortSummaries } from './outputs.ts';
import {
  claimCohortFolder,
  type CohortDefinition,
  type CohortRequest,
  defineCohort,
  EPISODES_FOLDER,
  INTERRUPTED_FOLDER,
  type PlannedEpisode,
  plannedEpisodes,
} from './plan.ts';
import { keepResults, RESULTS_FILE, recordCohort, resultLine, UNUSABLE_RECEIPT, undeliveredReason } from './results.ts';
import { sharedScores } from '../shared-scores.ts';

export interface CohortOptions extends CohortRequest {
  /** The output folder, already checked (cli/output-path.ts). */
  out: string;
  parallel: number;
  /** A finished `wwref controls run` folder to take the controls from (default: computed into OUT/controls/). */
  controls?: string;
  log: (line: string) => void;
  quiet?: boolean;
}

export interface CohortOutcome {
  episodes: number;
  /** Episodes an earlier run of this cohort had finished. */
  reused: number;
  delivered: number;
  seconds: number;
  /** Seconds the agents ran, summed over this run's episodes. */
  agent_seconds: number;
  files: CohortFiles & { results: string };
}

/** The variables an agent gets (documented in the README, "Running a cohort"). */
function agentEnvironment(
  settings: Settings,
  definition: CohortDefinition,
  endpoint: { url: string; token: string },
  dir: string,
  id: string,
) {
  return {
    ...process.env,
    // the numerical profile's kernel choices and one thread, so that an agent computing with NumPy
    // gets the bits the controls get (the libm pin is not preloaded into the agent)
    ...THREAD_ENV,
    ...profileEnvironment(settings.profile, settings.environment),
    WWREF_MCP_URL: endpoint.url,
    WWREF_MCP_TOKEN: endpoint.token,
    WWREF_MCP_COMMAND: JSON.stringify([process.execPath, join(ROOT, 'bin', 'wwref.mjs'), 'serve', '--episode', dir]),
    WWREF_EPISODE_ID: id,
    WWREF_SESSION_SECONDS: String(definition.session_seconds),
  };
}

/** Whether the episode's copy of its state says it is closed (read often while its agent runs: never throws). */
function closedNow(dir: string): boolean {
  try {
    return (JSON.parse(readFileSync(join(dir, STATE_FILE), 'utf8')) as { closed?: unknown }).closed === true;
  } catch {
    return false;
  }
}

interface Shared {
  settings: Settings;
  definition: CohortDefinition;
  options: CohortOptions;
  server: EpisodesServer;
  /** The controls worker fitting the shared estimators (started with the first agents, awaited when first needed). */
  worker: Promise<PythonWorker>;
  surfaceOf: (condition: string) => Surface;
  kills: Set<() => void>;
  stopped: () => boolean;
}

/** One episode from start to its results line; undefined when the run was stopped meanwhile (no line). */
async function runEpisode(shared: Shared, planned: PlannedEpisode): Promise<{ delivered: boolean; agentSeconds: number } | undefined> {
  const { settings, definition, options, server } = shared;
  const dir = join(options.out, EPISODES_FOLDER, planned.id);
  const startedAt = new Date().toISOString();
  await startEpisode(settings, {
    dir,
    condition: planned.condition.id,
    budget: planned.budget,
    references: definition.references,
    labels: definition.labels,
    sessionSeconds: definition.session_seconds,
    calls: definition.calls,
    callSeconds: definition.call_seconds,
  });
  const endpoint = server.add(planned.id, dir);
  let kill: (() => void) | undefined;
  let outcome: Awaited<ReturnType<typeof runAgent>>;
  try {
    outcome = await runAgent({
      command: definition.agent,
      cwd: process.cwd(),
      env: agentEnvironment(settings, definition, endpoint, dir, planned.id),
      deadlineSeconds: definition.session_seconds,
      stdoutFile: join(dir, 'agent.stdout'),
      stderrFile: join(dir, 'agent.stderr'),
      closed: () => closedNow(dir),
      groupFile: join(dir, AGENT_GROUP_FILE),
      onStart: (k) => {
        kill = k;
        shared.kills.add(k);
        if (shared.stopped()) k();
      },
    });
  } finally {
    await server.remove(planned.id); // nothing more is written to its log once this resolves (episodes-server.ts)
    if (kill) shared.kills.delete(kill);
  }
  if (outcome.stopped === 'stopped' || shared.stopped()) return undefined;
  try {
    return await closeAndScore(shared, planned, dir, outcome, startedAt);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    // a receipt the agent (or anyone) made unreadable: undelivered, with the free anchors only
    const surface = shared.surfaceOf(planned.condition.id);
    const d = planned.condition.dimensions;
    const anchors = [
      ['0'.repeat(d), surface.utilities[0]!],
      ['1'.repeat(d), surface.utilities[2 ** d - 1]!],
    ] as const;
    const line = resultLine({
      planned,
      labels: definition.labels,
      agent: definition.agent,
      cohort: recordCohort(definition.labels, options.out),
      surface,
      observations: anchors,
      undeliveredReason: `${UNUSABLE_RECEIPT}: ${error.message.slice(0, 300)}`,
      calculationCalls: 0,
      process: outcome,
      shared: await sharedScores(await shared.worker, surface, anchors, 0),
      startedAt,
      finishedAt: new Date().toISOString(),
    });
    appendNoFollow(join(options.out, RESULTS_FILE), `${line}\n`);
    return { delivered: false, agentSeconds: outcome.wall_seconds };
  }
}

/** Ends an episode its agent left open, scores it and appends its results line. */
async function closeAndScore(
  shared: Shared,
  planned: PlannedEpisode,
  dir: string,
  outcome: Awaited<ReturnType<typeof runAgent>>,
  startedAt: string,
): Promise<{ delivered: boolean; agentSeconds: number }> {
  const { settings, definition, options } = shared;
  // an agent that did not submit: its episode is ended (logged with why), then scored as undelivered
  let reason = (await episodeStatus(settings, dir)).closed ? undefined : undeliveredReason(outcome, definition.session_seconds);
  if (reason !== undefined)
    try {
      await endEpisode(settings, dir, reason);
    } catch (error) {
      // a request the agent sent before it ended may have closed the episode meanwhile (a submission)
      if (!(error instanceof UserError) || !(await episodeStatus(settings, dir)).closed) throw error;
      reason = undefined;
    }
  // read once closed: a purchase still in flight when the agent ended is in the receipt, so in the line
  const status = await episodeStatus(settings, dir);
  const { shared_degree1_score, shared_degree2_score, shared_gp_score, recovery_gain_over_shared, ...score } = await scoreEpisode(
    settings,
    dir,
    { worker: await shared.worker },
  );
  const line = resultLine({
    planned,
    labels: definition.labels,
    agent: definition.agent,
    cohort: recordCohort(definition.labels, options.out),
    surface: shared.surfaceOf(planned.condition.id),
    observations: status.observations.map((o) => [o.mask, o.utility] as const),
    score: score.delivered ? (score as GradeResult) : undefined,
    undeliveredReason: reason,
    calculationCalls: score.calls_used,
    process: outcome,
    shared: { shared_degree1_score, shared_degree2_score, shared_gp_score, recovery_gain_over_shared } as SharedScores,
    startedAt,
    finishedAt: new Date().toISOString(),
  });
  appendNoFollow(join(options.out, RESULTS_FILE), `${line}\n`);
  if (reason !== undefined) {
    // said where the researcher looks: why, and the agent's own last word on it (a missing environment…)
    const said = lastLine(join(dir, 'agent.stderr'));
    options.log(`cohort: ${planned.id} undelivered: ${reason}${said ? `; its stderr ends: ${said}` : ''} (${join(dir, 'agent.stderr')})`);
  }
  return { delivered: score.delivered, agentSeconds: outcome.wall_seconds };
}

/** The last line of text in `file` (an agent's kept stderr, at most 1 MiB), printable and at most 300 characters; '' if none. */
function lastLine(file: string): string {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return '';
  }
  const line = text
    .split('\n')
    .map((l) => l.replace(/\p{Cc}/gu, ' ').trim())
    .filter(Boolean)
    .at(-1);
  return line === undefined ? '' : [...line].length > 300 ? `${[...line].slice(0, 300).join('')}…` : line;
}

/** Keeps the folder of an episode an earlier run left unfinished under OUT/interrupted/, so that it can start afresh. */
function setAside(out: string, id: string): void {
  const dir = join(out, EPISODES_FOLDER, id);
  if (!lstatOrNothing(dir)) return;
  stopLeftAgent(join(dir, AGENT_GROUP_FILE)); // what the agent of a killed run (kill -9) left running
  makeDirs(join(out, INTERRUPTED_FOLDER));
  renameSync(dir, join(out, INTERRUPTED_FOLDER, `${id}.${Date.now()}`));
}

export async function runCohort(settings: Settings, options: CohortOptions): Promise<CohortOutcome> {
  const started = Date.now();
  const definition = defineCohort(settings, options);
  const out = options.out;
  const surfaces = new Map<string, Surface>();
  const surfaceOf = (condition: string) => {
    let surface = surfaces.get(condition);
    if (!surface) {
      surface = referenceSurface(settings, condition, definition.references);
      surfaces.set(condition, surface);
    }
    return surface;
  };
  const release = await lockFolder(out, 0);
  let reused = 0;
  let agentSeconds = 0;
  let controls: Promise<StoredRecord[]> | undefined;
  const resultsFile = join(out, RESULTS_FILE);
  try {
    claimCohortFolder(out, definition);
    const planned = plannedEpisodes(definition);
    const kept = keepResults(resultsFile, planned, surfaceOf, join(out, EPISODES_FOLDER));
    reused = kept.results.length;
    const finished = new Set(kept.results.map((r) => r.episode));
    const todo = planned.filter((p) => !finished.has(p.id));
    if (reused || kept.dropped)
      options.log(
        `cohort: resuming: ${reused} of ${planned.length} episode(s) finished${kept.dropped ? `, ${kept.dropped} line(s) of ${resultsFile} left out` : ''}`,
      );
    for (const p of todo) setAside(out, p.id);
    // the controls need no agent: computed while the agents run (or read from --controls)
    controls = cohortControls(settings, definition, { out, controls: options.controls, workers: 1, log: () => {} });
    controls.catch(() => undefined); // awaited below, after the episodes
    if (options.controls !== undefined) await controls; // only read: refused before any agent runs
    if (todo.length) agentSeconds = await runEpisodes(settings, definition, options, todo, surfaceOf);
  } catch (error) {
    await controls?.catch(() => undefined);
    throw error;
  } finally {
    release();
  }
  const final = keepResults(resultsFile, plannedEpisodes(definition), surfaceOf, join(out, EPISODES_FOLDER));
  if (final.dropped) options.log(`cohort: ${final.dropped} line(s) of ${resultsFile} left out (not what their episode's receipt records)`);
  const results = final.results;
  const files = writeCohortSummaries(settings, out, definition, results, await controls);
  return {
    episodes: results.length,
    reused,
    delivered: results.filter((r) => r.artifact_valid).length,
    seconds: (Date.now() - started) / 1000,
    agent_seconds: agentSeconds,
    files: { ...files, results: resultsFile },
  };
}

/** Runs the episodes, `parallel` at a time; returns the agents' seconds. Stopped by a signal: Interrupted. */
async function runEpisodes(
  settings: Settings,
  definition: CohortDefinition,
  options: CohortOptions,
  todo: PlannedEpisode[],
  surfaceOf: (condition: string) => Surface,
): Promise<number> {
  const progress = new Progress('cohort', todo.length, { quiet: options.quiet, workers: options.parallel, unit: 'episodes' });
  for (const p of todo) progress.expect(p.condition.id, 1);
  let stopped: NodeJS.Signals | undefined;
  const kills = new Set<() => void>();
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopped) return;
    stopped = signal;
    options.log(`\n${signal === 'SIGINT' ? 'interrupted' : `stopped by ${signal}`}: stopping the agents…`);
    for (const kill of kills) kill();
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, onSignal);
  let server: EpisodesServer | undefined;
  const worker = startControlsWorker(settings);
  worker.catch(() => undefined); // its failure is met where it is awaited
  let agentSeconds = 0;
  try {
    server = await serveEpisodes(settings, { host: '127.0.0.1', port: 0 });
    const shared: Shared = {
      settings,
      definition,
      options,
      server,
      worker,
      surfaceOf,
      kills,
      stopped: () => stopped !== undefined,
    };
    let next = 0;
    const loop = async () => {
      while (!stopped && next < todo.length) {
        const planned = todo[next++]!;
        const done = await runEpisode(shared, planned);
        if (!done) return;
        agentSeconds += done.agentSeconds;
        progress.tick(planned.condition.id, done.delivered);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(options.parallel, todo.length)) }, loop));
    if (stopped)
      throw new Interrupted(
        stopped,
        `${stopped === 'SIGINT' ? 'interrupted' : `stopped by ${stopped}`}: the finished episodes are kept in ${join(options.out, RESULTS_FILE)}; run the same command to resume`,
      );
    return agentSeconds;
  } finally {
    progress.stop();
    for (const signal of signals) process.removeListener(signal, onSignal);
    for (const kill of kills) kill();
    await server?.close();
    await (await worker.catch(() => undefined))?.close();
  }
}
