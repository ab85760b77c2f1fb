// `wwref cohort run`: one agent over conditions × budgets × repeats. One process serves every episode
// of the run (episodes-server.ts, each episode at its own URL with its own token), one controls worker
// fits the shared estimators for all of them (started again once if it dies), and up to `parallel`
// agents run at once. For each episode: create its folder OUT/episodes/<id> (never through a link; an
// entry planted there is set aside), start it on the references fixed at the cohort's start, run the
// agent once (agent.ts) with the endpoint in its environment, stop serving it, score it (undelivered
// included) and append its results line. One episode that cannot be started, scored or recorded is
// left out, with why, and the cohort goes on. The controls of the same cells are computed meanwhile
// (they need no agent); then the summaries, from the lines this run wrote and those of an earlier run
// that their receipts give again (results.ts), never from what else the results file holds. Ctrl-C
// stops every agent and leaves the folder resumable: the same command skips the finished episodes and
// starts the unfinished ones again (their folders kept under OUT/interrupted/).
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, readSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { lstatOrNothing, openRegularFile, realPath } from '../../core/containment.ts';
import { Interrupted, UserError } from '../../core/errors.ts';
import { appendNoFollow, fsError } from '../../core/fsutil.ts';
import { ROOT } from '../../core/paths.ts';
import { Progress } from '../../core/progress.ts';
import type { Settings } from '../../core/settings.ts';
import type { Surface } from '../../analysis/effects.ts';
import { type GradeResult, referenceSurface } from '../../analysis/grade.ts';
import { THREAD_ENV } from '../../execution/launcher.ts';
import type { PythonWorker } from '../../execution/python-worker.ts';
import { profileEnvironment } from '../../core/profiles.ts';
import { ReferenceStore } from '../../references/store.ts';
import { lockFolder } from '../../references/lock.ts';
import type { StoredRecord } from '../controls/records.ts';
import { startControlsWorker } from '../controls/worker.ts';
import { endEpisode, episodeStatus, readEpisode, scoreEpisode, STATE_FILE, startEpisode } from '../episode.ts';
import { type EpisodesServer, serveEpisodes } from '../episodes-server.ts';
import { type SharedScores, sharedScores } from '../shared-scores.ts';
import { AGENT_GROUP_FILE, type AgentOutcome, runAgent, stopLeftAgent } from './agent.ts';
import { cohortControls } from './baselines.ts';
import { printable } from '../compare/tables.ts';
import {
  type AgentSandbox,
  checkWorkingFolder,
  hiddenFolders,
  prepareSandbox,
  SANDBOX_TOKEN_FILE,
  type SandboxEpisode,
  sandboxArguments,
} from './sandbox.ts';
import { asideFolder, ownFolder, renameAside, setAsideEntry } from './folders.ts';
import { type CohortFiles, writeCohortReport, writeCohortSummaries } from './outputs.ts';
import {
  claimCohortFolder,
  COHORT_FILE,
  type CohortDefinition,
  type CohortRequest,
  defineCohort,
  EPISODES_FOLDER,
  INTERRUPTED_FOLDER,
  type PlannedEpisode,
  plannedEpisodes,
  RETRIED_FOLDER,
} from './plan.ts';
import {
  anchorsOf,
  earlierResults,
  type EpisodeResult,
  linesNotKept,
  nonFinitePath,
  RESULTS_FILE,
  type ResultContext,
  receiptProblem,
  recordWritten,
  resultLine,
  StoredResult,
  UNUSABLE_RECEIPT,
  undeliveredReason,
  writeResults,
} from './results.ts';

export interface CohortOptions extends CohortRequest {
  /** The output folder, already checked (cli/output-path.ts). */
  out: string;
  parallel: number;
  /** A finished `wwref controls run` folder to take the controls from (default: computed into OUT/controls/). */
  controls?: string;
  /** --sandbox-hide: more folders the agents' sandbox hides (other copies of the references, other cohorts). */
  sandboxHide?: readonly string[];
  log: (line: string) => void;
  quiet?: boolean;
  /** Play again the episodes an earlier run recorded undelivered (their folders kept under OUT/retried/). */
  retryUndelivered?: boolean;
  /** The command line, shown in the report. */
  command?: string;
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
  /** The comparison with the controls in OUT/report/ and its terminal table (none without results). */
  report?: ReturnType<typeof writeCohortReport>;
  /** The undelivered or left-out episodes' most common reason, with how many share it, and the agent's exception line of one. */
  undelivered?: { count: number; reason: string; sharing: number; said: string };
}

/** The variables an agent gets (documented in the README, "Running a cohort"). */
function agentEnvironment(
  settings: Settings,
  definition: CohortDefinition,
  endpoint: { url: string; token: string },
  dir: string,
  id: string,
) {
  // sandboxed, the episode's folder is hidden: its stdio is a bridge to the same endpoint (`wwref connect`),
  // told it in its argv (an MCP client may pass its server no environment), the token a file of the sandbox's
  const stdio = definition.agents_sandboxed
    ? ['connect', '--url', endpoint.url, '--token-file', SANDBOX_TOKEN_FILE]
    : ['serve', '--episode', dir];
  return {
    ...process.env,
    // the numerical profile's kernel choices and one thread, so that an agent computing with NumPy
    // gets the bits the controls get (the libm pin is not preloaded into the agent)
    ...THREAD_ENV,
    ...profileEnvironment(settings.profile, settings.environment),
    WWREF_MCP_URL: endpoint.url,
    WWREF_MCP_TOKEN: endpoint.token,
    WWREF_MCP_COMMAND: JSON.stringify([process.execPath, join(ROOT, 'bin', 'wwref.mjs'), ...stdio]),
    WWREF_EPISODE_ID: id,
    WWREF_SESSION_SECONDS: String(definition.session_seconds),
  };
}

/**
 * At most `max` bytes of a regular file in an agent's reach, its start (or, with `tail`, its end):
 * never follows a link, never blocks (a FIFO is refused).
 */
function readBounded(path: string, what: string, max: number, tail = false): string {
  const { fd, size } = openRegularFile(path, what);
  try {
    const block = Buffer.alloc(Math.min(size, max));
    return block.subarray(0, readSync(fd, block, 0, block.length, tail ? size - block.length : 0)).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** Whether the episode's copy of its state says it is closed (read often while its agent runs: never throws, never blocks). */
function closedNow(dir: string): boolean {
  try {
    return (JSON.parse(readBounded(join(dir, STATE_FILE), 'episode state', 16 << 20)) as { closed?: unknown }).closed === true;
  } catch {
    return false;
  }
}

/** The shared estimators' worker: started once, started again when it dies (a killed process), at most a few times a run. */
class SharedFitter {
  private current: Promise<PythonWorker> | undefined;
  private restarts = 0;
  constructor(
    private readonly settings: Settings,
    private readonly log: (line: string) => void,
  ) {}

  start(): void {
    if (this.current) return;
    this.current = startControlsWorker(this.settings);
    this.current.catch(() => undefined); // its failure is met where it is awaited
  }

  /** The three shared scores of `observations`; a UserError (one line) when they cannot be fitted. */
  async fit(surface: Surface, observations: readonly (readonly [string, number])[], own: number): Promise<SharedScores> {
    for (let attempt = 0; ; attempt++) {
      this.start();
      const worker = this.current!;
      try {
        return await sharedScores(await worker, surface, observations, own);
      } catch (error) {
        const message = (error as Error).message.split('\n')[0]!;
        // a worker killed while it fits (WorkerCrash) or while it starts: started again, once for this fit
        if (attempt > 0 || this.restarts >= 3) throw new UserError(`the shared estimators could not be fitted: ${message}`);
        if (this.current === worker) {
          this.restarts++;
          this.log(`cohort: the controls worker fitting the shared estimators ended (${message}); started again`);
          this.current = undefined;
          void worker.then((w) => w.close()).catch(() => undefined);
        }
      }
    }
  }

  async close(): Promise<void> {
    const worker = this.current;
    this.current = undefined;
    await (await worker?.catch(() => undefined))?.close().catch(() => undefined);
  }
}

interface Shared {
  settings: Settings;
  definition: CohortDefinition;
  options: CohortOptions;
  server: EpisodesServer;
  fitter: SharedFitter;
  surfaceOf: (condition: string) => Surface;
  /** Where the agents run: the folder the cohort was first started in (cohort.json). */
  cwd: string;
  /** The agents' sandbox (--sandbox-agents), its hidden folders those of the cohort's start. */
  sandbox?: AgentSandbox;
  /** The records' `cohort`: the name cohort.json fixed at the cohort's creation. */
  cohort: string;
  /** The lines this run wrote, by episode id: they count, whatever the results file holds. */
  own: Map<string, string>;
  /** Why each episode this run could not record was left out. */
  leftOut: Map<string, string>;
  kills: Set<() => void>;
  stopped: () => boolean;
}

/** Why the condition's reference in the cohort's folder is not the one fixed at the cohort's start (undefined: it is). */
function referenceChange(settings: Settings, definition: CohortDefinition, plan: PlannedEpisode): string | undefined {
  const { id, reference } = plan.condition;
  const store = new ReferenceStore(definition.references, settings.paths);
  try {
    const manifest = store.requireManifest();
    const entry = manifest.conditions[id];
    if (entry?.table_sha256 === reference.table_sha256 && entry.plan_sha256 === reference.plan_sha256) {
      store.table(id, manifest); // its bytes are the manifest's
      return undefined;
    }
    return (
      `the reference of ${id} in ${store.dir} changed since the cohort started (table sha256 ${reference.table_sha256.slice(0, 12)}… ` +
      `-> ${entry?.table_sha256.slice(0, 12) ?? 'none'}…, plan sha256 ${reference.plan_sha256.slice(0, 12)}… -> ${entry?.plan_sha256.slice(0, 12) ?? 'none'}…)`
    );
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    return `the reference of ${id} cannot be read as at the cohort's start: ${error.message.split('\n')[0]}`;
  }
}

/**
 * The episode's folder, created by the cohort itself: whatever an agent put at its name beforehand (a
 * folder, a link to elsewhere) is set aside under OUT/interrupted/ first, and nothing is followed.
 */
function freshEpisodeFolder(out: string, id: string, log: (line: string) => void): string {
  const episodes = join(out, EPISODES_FOLDER);
  ownFolder(out, episodes, log);
  const dir = join(episodes, id);
  if (lstatOrNothing(dir)) {
    const aside = renameAside(dir, asideFolder(out, log)); // a link is moved itself, never what it points to
    log(`cohort: ${id}: something was already at ${dir} before the episode started: set aside as ${aside}`);
  }
  try {
    mkdirSync(dir);
  } catch (error) {
    throw fsError(error, 'create', dir);
  }
  if (!lstatOrNothing(dir)?.isDirectory() || realPath(dir) !== join(realPath(episodes), id))
    throw new UserError(`the episode folder ${dir} was replaced as it was created; refused`);
  return dir;
}

/** Leaves an episode out of the results, said on stderr. */
function leaveOut(shared: Shared, id: string, reason: string): { delivered: boolean; agentSeconds: number } {
  shared.leftOut.set(id, reason);
  shared.options.log(`cohort: ${id} left out: ${reason}`);
  return { delivered: false, agentSeconds: 0 };
}

/** One episode from start to its results line; undefined when the run was stopped meanwhile (no line). Never throws for one bad episode. */
async function runEpisode(shared: Shared, planned: PlannedEpisode): Promise<{ delivered: boolean; agentSeconds: number } | undefined> {
  try {
    return await playEpisode(shared, planned);
  } catch (error) {
    if (shared.stopped()) return undefined;
    const message = (error as Error).message?.split('\n')[0] ?? String(error);
    return leaveOut(shared, planned.id, error instanceof UserError ? message : `an internal error: ${message}`);
  }
}

async function playEpisode(shared: Shared, planned: PlannedEpisode): Promise<{ delivered: boolean; agentSeconds: number } | undefined> {
  const { settings, definition, options, server } = shared;
  const changed = referenceChange(settings, definition, planned);
  if (changed) return leaveOut(shared, planned.id, `${changed}: not started`);
  const dir = freshEpisodeFolder(options.out, planned.id, options.log);
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
  // the references fixed at the cohort's start, the episode's own at its start: the same, or not played
  const identity = readEpisode(dir).reference;
  const { table_sha256, plan_sha256 } = planned.condition.reference;
  if (identity.table_sha256 !== table_sha256 || identity.plan_sha256 !== plan_sha256) {
    const why = referenceChange(settings, definition, planned) ?? 'its reference is not the one fixed at the cohort start';
    await endEpisode(settings, dir, why).catch(() => undefined);
    return leaveOut(shared, planned.id, `${why}: not played`);
  }
  const endpoint = server.add(planned.id, dir);
  let kill: (() => void) | undefined;
  let outcome: AgentOutcome;
  try {
    // sandboxed: the token a file of the sandbox's; without the host's network, the episode's own socket too
    const episode: SandboxEpisode | undefined = shared.sandbox && {
      token: true,
      ...(shared.sandbox.network === 'none' && { socket: { path: await server.openSocket(planned.id), port: server.port } }),
    };
    outcome = await runAgent({
      command: definition.agent,
      cwd: shared.cwd,
      ...(shared.sandbox && { sandbox: sandboxArguments(shared.sandbox, shared.cwd, episode), data: endpoint.token }),
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
  return recordEpisode(shared, planned, dir, outcome, startedAt);
}

/** Scores an episode whose agent ended, and records its line (appended, and kept in memory: it counts). */
async function recordEpisode(
  shared: Shared,
  planned: PlannedEpisode,
  dir: string,
  outcome: AgentOutcome,
  startedAt: string,
): Promise<{ delivered: boolean; agentSeconds: number }> {
  const { settings, definition, options } = shared;
  let result: Omit<EpisodeResult, 'shared' | 'finishedAt'>;
  try {
    result = await resultFromLog(shared, planned, dir, outcome, startedAt);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    // the references moved under the episode: not the agent's doing, and no score on either table
    const changed = referenceChange(settings, definition, planned);
    if (changed) return leaveOut(shared, planned.id, `${changed}: its score is not recorded`);
    // a receipt the agent (or anyone) made unreadable: undelivered, with the free anchors only
    const surface = shared.surfaceOf(planned.condition.id);
    result = {
      ...lineBase(shared, planned, outcome, startedAt),
      observations: anchorsOf(surface),
      undeliveredReason: `${UNUSABLE_RECEIPT}: ${error.message.split('\n')[0]!.slice(0, 300)}`,
      calculationCalls: 0,
    };
  }
  const fitted = await shared.fitter.fit(result.surface, result.observations, result.score?.effect_recovery ?? 0);
  // a number without a JSON form (NaN) is refused here, at the line's door, not met by a reader
  const bad = nonFinitePath({ score: result.score ?? null, shared: fitted });
  if (bad) return leaveOut(shared, planned.id, `its score would hold a number that is not finite (${bad}); not recorded`);
  const line = resultLine({ ...result, shared: fitted, finishedAt: new Date().toISOString() });
  shared.own.set(planned.id, line);
  recordWritten(options.out, planned.id, line, options.log); // vouches for it should its receipt be gone later
  try {
    appendNoFollow(join(options.out, RESULTS_FILE), `${line}\n`);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    options.log(`cohort: ${error.message} (the line of ${planned.id} is kept, and written with the others at the end)`);
  }
  if (result.undeliveredReason !== undefined) {
    // said where the researcher looks: why, and the agent's own last word on it (a missing environment…)
    const said = lastLine(join(dir, 'agent.stderr'));
    options.log(
      `cohort: ${planned.id} undelivered: ${result.undeliveredReason}${said ? `; its stderr ends: ${JSON.stringify(said)}` : ''} (${join(dir, 'agent.stderr')})`,
    );
  }
  return { delivered: result.score !== undefined, agentSeconds: outcome.wall_seconds };
}

/** The fields of a line that come from the plan and the agent's run. */
function lineBase(shared: Shared, planned: PlannedEpisode, outcome: AgentOutcome, startedAt: string) {
  const { definition } = shared;
  return {
    planned,
    labels: definition.labels,
    agent: definition.agent,
    cohort: shared.cohort,
    surface: shared.surfaceOf(planned.condition.id),
    process: outcome,
    startedAt,
  };
}

/** Ends an episode its agent left open and scores it: the result its receipt gives (a UserError when it cannot be read). */
async function scoredResult(
  shared: Shared,
  planned: PlannedEpisode,
  dir: string,
  outcome: AgentOutcome,
  startedAt: string,
): Promise<Omit<EpisodeResult, 'shared' | 'finishedAt'>> {
  const { settings, definition } = shared;
  // an agent that did not submit: its episode is ended (logged with why), then scored as undelivered
  if (!(await episodeStatus(settings, dir)).closed)
    try {
      await endEpisode(settings, dir, undeliveredReason(outcome, definition.session_seconds));
    } catch (error) {
      // a request the agent sent before it ended may have closed the episode meanwhile (a submission)
      if (!(error instanceof UserError) || !(await episodeStatus(settings, dir)).closed) throw error;
    }
  // read once closed: a purchase still in flight when the agent ended is in the receipt, so in the line
  const score = await scoreEpisode(settings, dir, { shared: false });
  const state = readEpisode(dir);
  const problem = receiptProblem(state, planned, definition);
  if (problem) throw new UserError(problem);
  if (score.delivered !== (state.submission !== null)) throw new UserError('its receipt changed while it was scored');
  return {
    ...lineBase(shared, planned, outcome, startedAt),
    observations: state.observations.map((o) => [o.mask, o.utility] as const),
    score: score.delivered ? (score as GradeResult) : undefined,
    undeliveredReason: state.ended?.reason,
    calculationCalls: state.calls_used,
  };
}

/**
 * The episode's result as its log gives it: the log (events.jsonl) is the record, episode.json only a
 * copy for readers, so a copy the agent broke (a FIFO, a link, a folder, an edit the episode refuses)
 * is set aside under OUT/interrupted/ and the episode scored again, the copy rewritten from the log. A
 * resume reads the state from the log too (results.ts): the run and its check give the same line.
 */
async function resultFromLog(
  shared: Shared,
  planned: PlannedEpisode,
  dir: string,
  outcome: AgentOutcome,
  startedAt: string,
): Promise<Omit<EpisodeResult, 'shared' | 'finishedAt'>> {
  try {
    return await scoredResult(shared, planned, dir, outcome, startedAt);
  } catch (error) {
    const copy = join(dir, STATE_FILE);
    if (!(error instanceof UserError) || !lstatOrNothing(copy)) throw error;
    try {
      readEpisode(dir); // the log itself unreadable: the receipt is unusable, as the check finds it
    } catch {
      throw error;
    }
    setAsideEntry(
      shared.options.out,
      copy,
      `${planned.id}: its ${STATE_FILE} could not be used (${error.message.split('\n')[0]})`,
      shared.options.log,
    );
    return await scoredResult(shared, planned, dir, outcome, startedAt);
  }
}

/** The cohort's files written at the end (results, summaries): anything but a regular file at their names is set aside first. */
const END_FILES = [RESULTS_FILE, 'summary.json', 'summary.csv', 'macro.csv'];
function clearEndFiles(out: string, log: (line: string) => void): void {
  for (const name of END_FILES) {
    const path = join(out, name);
    const stats = lstatOrNothing(path);
    if (stats && !stats.isFile()) setAsideEntry(out, path, `${path} is not a file (a folder, FIFO or link was put there)`, log);
  }
}

/** A frame border of a Python exception group's traceback (`+---- 1 ----`, `+-+---- 2 ----`, `+------`), its `| ` prefixes stripped. */
const GROUP_BORDER = /^\+[-+]*(?:\s*(?:\d+|\.\.\.)\s*-*)?$/;

/** The most characters of an agent's exception line quoted on the terminal. */
const SAID_MAX = 200;

/**
 * The exception line of an agent's stderr text: its last line that is not blank and not a frame border
 * of a Python exception group, with the group's `| ` prefixes stripped; each run of blanks one space and
 * what a terminal cannot show as itself '?' (an agent's padding or bidi marks cannot lay out a line of
 * its own that looks like the cohort's table), at most 200 characters. Quoted where it is said.
 */
export function exceptionLine(text: string): string {
  const line = text
    .split('\n')
    .map((l) =>
      printable(
        l
          .replace(/\p{Cc}/gu, ' ')
          .trim()
          .replace(/^(?:\|\s?)+/, '')
          .replace(/\s+/gu, ' ')
          .trim(),
      ),
    )
    .filter((l) => l !== '' && !GROUP_BORDER.test(l))
    .at(-1);
  return line === undefined ? '' : [...line].length > SAID_MAX ? `${[...line].slice(0, SAID_MAX).join('')}…` : line;
}

/** The exception line of `file` (an agent's kept stderr: its last 64 KiB); '' if none. */
function lastLine(file: string): string {
  try {
    return exceptionLine(readBounded(file, 'agent stderr', 64 << 10, true));
  } catch {
    return '';
  }
}

/** Keeps the folder of an episode an earlier run left unfinished under OUT/interrupted/ (or retried, under OUT/retried/), so that it can start afresh. */
function setAside(out: string, id: string, log: (line: string) => void, folder = INTERRUPTED_FOLDER): void {
  const dir = join(out, EPISODES_FOLDER, id);
  const stats = lstatOrNothing(dir);
  if (!stats) return;
  if (stats.isDirectory()) stopLeftAgent(join(dir, AGENT_GROUP_FILE)); // what the agent of a killed run (kill -9) left running
  renameSync(dir, join(asideFolder(out, log, folder), `${id}.${Date.now()}.${randomBytes(4).toString('hex')}`));
}

/**
 * `--retry-undelivered`: the earlier lines of undelivered episodes taken out of `lines` (so that their
 * episodes run again, and their new lines replace them), their folders kept under OUT/retried/.
 */
function retryUndelivered(out: string, lines: Map<string, string>, log: (line: string) => void): string[] {
  const retired: string[] = [];
  for (const [id, line] of lines) {
    if ((JSON.parse(line) as { artifact_valid?: unknown }).artifact_valid !== false) continue;
    setAside(out, id, log, RETRIED_FOLDER);
    lines.delete(id);
    retired.push(line);
  }
  log(
    `cohort: --retry-undelivered: ${retired.length} undelivered episode(s) played again (their folders kept under ${join(out, RETRIED_FOLDER)})`,
  );
  return retired;
}

/** The most common reason among the undelivered lines and the episodes left out, how many share it, and an agent's exception line of one. */
function commonReason(out: string, results: readonly StoredResult[], missing: readonly { episode: string; reason: string }[]) {
  const why = [
    ...results.filter((r) => !r.artifact_valid).map((r) => ({ episode: r.episode, reason: r.undelivered_reason ?? 'undelivered' })),
    ...missing,
  ];
  if (!why.length) return undefined;
  const counts = new Map<string, string[]>();
  for (const w of why) counts.set(w.reason, [...(counts.get(w.reason) ?? []), w.episode]);
  const [reason, episodes] = [...counts].sort((a, b) => b[1].length - a[1].length)[0]!;
  return {
    count: why.length,
    reason,
    sharing: episodes.length,
    said: lastLine(join(out, EPISODES_FOLDER, episodes[0]!, 'agent.stderr')),
  };
}

/** Every condition's reference surface, read once at the cohort's start and checked against the identity its definition fixed. */
export function fixedSurfaces(settings: Settings, definition: CohortDefinition): (condition: string) => Surface {
  const surfaces = new Map<string, Surface>();
  for (const plan of plannedEpisodes(definition).filter((p) => p.repeat === 0)) {
    if (surfaces.has(plan.condition.id)) continue;
    const changed = referenceChange(settings, definition, plan);
    if (changed) throw new UserError(`${changed}; the cohort cannot go on with it`);
    surfaces.set(plan.condition.id, referenceSurface(settings, plan.condition.id, definition.references));
  }
  return (condition) => {
    const surface = surfaces.get(condition);
    if (!surface) throw new UserError(`${condition} is not a condition of this cohort`);
    return surface;
  };
}

/**
 * The controls computed while the agents ran; computed again once when they stopped (a worker killed):
 * a `controls run` folder resumes from the records it holds. Read from --controls: as they are.
 */
async function controlsOnce(
  settings: Settings,
  definition: CohortDefinition,
  options: CohortOptions,
  first: Promise<StoredRecord[]>,
): Promise<StoredRecord[]> {
  try {
    return await first;
  } catch (error) {
    if (options.controls !== undefined) throw error;
    options.log(`cohort: the controls stopped (${(error as Error).message.split('\n')[0]}); started again`);
    return cohortControls(settings, definition, { out: options.out, workers: 1, log: () => {}, warn: options.log });
  }
}

/** What a run needs before its episodes start. */
type RunState = Pick<
  Shared,
  'settings' | 'definition' | 'options' | 'fitter' | 'surfaceOf' | 'cwd' | 'sandbox' | 'cohort' | 'own' | 'leftOut'
>;

/** --sandbox-agents: the sandbox made once before anything is written (a UserError otherwise). */
function agentSandbox(settings: Settings, definition: CohortDefinition, options: CohortOptions): AgentSandbox | undefined {
  if (!definition.agents_sandboxed) return undefined;
  // a resume's working folder is cohort.json's: checked once the file is read
  const resumed = lstatOrNothing(join(options.out, COHORT_FILE)) !== undefined;
  const network = definition.agents_network === 'none' ? 'none' : 'shared';
  return prepareSandbox(settings, hiddenOf(options), resumed ? undefined : process.cwd(), network);
}

/** Said once before the first agent of an unsandboxed run starts (a refusal stays one line). */
const unsandboxed = (out: string) =>
  `cohort: the agents run unsandboxed, as you: an agent can rewrite ${out} (its results, receipts and cohort.json) and read the references; --sandbox-agents runs each in a sandbox of its own`;

/** What the agents' sandbox hides beyond the settings' folders: the cohort's folder, a --controls folder, --sandbox-hide. */
const hiddenOf = (options: CohortOptions) => [
  options.out,
  ...(options.controls === undefined ? [] : [options.controls]),
  ...(options.sandboxHide ?? []),
];

export async function runCohort(settings: Settings, options: CohortOptions): Promise<CohortOutcome> {
  const started = Date.now();
  const definition = defineCohort(settings, options);
  const out = options.out;
  let sandbox = agentSandbox(settings, definition, options);
  const release = await lockFolder(out, 0);
  const resultsFile = join(out, RESULTS_FILE);
  const planned = plannedEpisodes(definition);
  const fitter = new SharedFitter(settings, options.log);
  const own = new Map<string, string>();
  const leftOut = new Map<string, string>();
  let earlier: Awaited<ReturnType<typeof earlierResults>> | undefined;
  let agentSeconds = 0;
  let controls: Promise<StoredRecord[]> | undefined;
  const kept = () => planned.flatMap((p) => own.get(p.id) ?? earlier?.lines.get(p.id) ?? []);
  let dropped = 0;
  /** The earlier lines of the undelivered episodes played again (--retry-undelivered). */
  let retired: string[] = [];
  /** Why results.jsonl could not be written at the end, if it could not. */
  let unwritten: string | undefined;
  try {
    const { workingFolder, name } = claimCohortFolder(out, definition, process.cwd(), options.log);
    if (sandbox) {
      sandbox = { ...sandbox, hidden: hiddenFolders(settings, hiddenOf(options)) }; // --out exists now
      checkWorkingFolder(sandbox, workingFolder); // a resume's, as cohort.json fixed it
    }
    // whatever is at episodes/ but a real folder (a link to elsewhere): set aside before any receipt is read through it
    ownFolder(out, join(out, EPISODES_FOLDER), options.log, false); // made by the first episode, once nothing refused the run
    const surfaceOf = fixedSurfaces(settings, definition);
    const context: ResultContext = {
      definition,
      cohort: name,
      episodes: join(out, EPISODES_FOLDER),
      surfaceOf,
      refit: (surface, observations, recovery) => fitter.fit(surface, observations, recovery),
    };
    earlier = await earlierResults(resultsFile, planned, context);
    if (earlier.unreadable) options.log(`cohort: ${earlier.unreadable}: no earlier line kept; it is written again at the end`);
    // the controls need no agent: computed while the agents run, or read from --controls and refused
    // before any episode folder is moved (to retried/ or interrupted/)
    controls = cohortControls(settings, definition, { out, controls: options.controls, workers: 1, log: () => {}, warn: options.log });
    controls.catch(() => undefined); // awaited below, after the episodes
    if (options.controls !== undefined) await controls;
    if (options.retryUndelivered) retired = retryUndelivered(out, earlier.lines, options.log);
    const reused = earlier.lines.size;
    const todo = planned.filter((p) => !earlier!.lines.has(p.id));
    if (reused || earlier.dropped)
      options.log(
        `cohort: resuming: ${reused} of ${planned.length} episode(s) finished${earlier.dropped ? `, ${earlier.dropped} line(s) of ${resultsFile} left out (not what their episode's receipt and the cohort's plan give)` : ''}`,
      );
    const undelivered = [...earlier.lines.values()].filter((l) => l.includes('"artifact_valid":false')).length;
    if (undelivered && !options.retryUndelivered)
      options.log(`cohort: ${undelivered} earlier episode(s) undelivered: kept; --retry-undelivered plays them again`);
    for (const p of todo) setAside(out, p.id, options.log);
    const run: RunState = { settings, definition, options, fitter, surfaceOf, cwd: workingFolder, sandbox, cohort: name, own, leftOut };
    if (todo.length && !sandbox) options.log(unsandboxed(out));
    if (todo.length) agentSeconds = await runEpisodes(run, todo);
  } catch (error) {
    await controls?.catch(() => undefined);
    throw error;
  } finally {
    // the results file holds exactly the lines that count, whatever else was written into it meanwhile
    if (earlier)
      try {
        // the lines of the episodes played again are replaced, not "left out"
        dropped = linesNotKept(resultsFile, new Set([...kept(), ...retired]));
        // a folder, FIFO or link an agent put at results.jsonl (or a summary's name): set aside, never followed
        clearEndFiles(out, options.log);
        writeResults(resultsFile, kept());
      } catch (error) {
        unwritten = (error as Error).message.split('\n')[0];
        options.log(`cohort: ${unwritten}`);
      }
    await fitter.close();
    release();
  }
  if (dropped)
    options.log(`cohort: ${dropped} line(s) of ${resultsFile} left out (not written by this run, nor what their episode's receipt gives)`);
  const outcome = finish(settings, definition, options, {
    planned,
    own,
    earlier: earlier!,
    leftOut,
    controls: await controlsOnce(settings, definition, options, controls!),
    seconds: (Date.now() - started) / 1000,
    agentSeconds,
  });
  // the summaries and report are written; a run whose results file is not must not pass for a success
  if (unwritten !== undefined) throw new UserError(`the results could not be written to ${resultsFile}: ${unwritten}`);
  return outcome;
}

/** The summaries and the report of the lines that count; the outcome. */
function finish(
  settings: Settings,
  definition: CohortDefinition,
  options: CohortOptions,
  held: {
    planned: readonly PlannedEpisode[];
    own: ReadonlyMap<string, string>;
    earlier: Awaited<ReturnType<typeof earlierResults>>;
    leftOut: ReadonlyMap<string, string>;
    controls: StoredRecord[];
    seconds: number;
    agentSeconds: number;
  },
): CohortOutcome {
  const { planned, own, earlier, leftOut, controls } = held;
  const out = options.out;
  const results: StoredResult[] = [];
  const missing: { episode: string; reason: string }[] = [];
  for (const p of planned) {
    const line = own.get(p.id) ?? earlier!.lines.get(p.id);
    const parsed = line === undefined ? undefined : StoredResult.safeParse(JSON.parse(line));
    if (parsed?.success) results.push(parsed.data);
    else
      missing.push({
        episode: p.id,
        reason: parsed ? 'its line is not one the summaries can read' : (leftOut.get(p.id) ?? earlier.problems.get(p.id) ?? 'not run'),
      });
  }
  const files = writeCohortSummaries(settings, out, definition, { planned, results, leftOut: missing, log: options.log }, controls);
  const sandboxed = definition.agents_sandboxed ? ` --sandbox-agents${definition.agents_network ? '' : ' --sandbox-network shared'}` : '';
  const command = options.command ?? `wwref cohort run --agent '${definition.agent}'${sandboxed} --out ${out}`;
  const report = writeCohortReport(settings, out, definition, { results, controls, leftOut: missing, command }, options.log);
  return {
    episodes: results.length,
    reused: earlier.lines.size,
    delivered: results.filter((r) => r.artifact_valid).length,
    seconds: held.seconds,
    agent_seconds: held.agentSeconds,
    files: { ...files, results: join(out, RESULTS_FILE) },
    report,
    undelivered: commonReason(out, results, missing),
  };
}

/** Runs the episodes, `parallel` at a time; returns the agents' seconds. Stopped by a signal: Interrupted. */
async function runEpisodes(run: RunState, todo: PlannedEpisode[]): Promise<number> {
  const { settings, options } = run;
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
  run.fitter.start(); // while the first agents run
  let agentSeconds = 0;
  try {
    server = await serveEpisodes(settings, { host: '127.0.0.1', port: 0 });
    const shared: Shared = { ...run, server, kills, stopped: () => stopped !== undefined };
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
  }
}
