// `wwref cohort import --inspect-log LOG --out DIR`: an Inspect AI eval of the whatworked task
// (inspect/whatworked.py) as a cohort folder, so that a model run by Inspect sits beside the controls
// and any other cohort. The log names each sample's episode folder; nothing of the log is taken on
// trust but which episodes it ran: each episode is copied into OUT/episodes/<id>/, an episode the eval
// left open (a sample that errored before its scorer ran) is ended there as undelivered, and each is
// scored again from its receipt — the score the log records must be that one, field for field. Then
// the cohort's own results lines (results.ts), verified against their receipts as a resumed run's are,
// and its summaries beside the controls of the same cells (outputs.ts, baselines.ts).
import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { extname, isAbsolute, join, resolve } from 'node:path';
import { execa } from 'execa';
import * as z from 'zod';
import { readRegularFile } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import { makeDirs, writeFileAtomic, writeJsonAtomic } from '../../core/fsutil.ts';
import { canonicalJson, sha256Hex } from '../../core/hashing.ts';
import { ROOT } from '../../core/paths.ts';
import type { Settings } from '../../core/settings.ts';
import type { Surface } from '../../analysis/effects.ts';
import { type GradeResult, referenceSurface } from '../../analysis/grade.ts';
import { lockFolder, LOCK_FILE } from '../../references/lock.ts';
import { startControlsWorker } from '../controls/worker.ts';
import { endEpisode, episodeStatus, readEpisode, scoreEpisode } from '../episode.ts';
import { type SharedScores, sharedScores } from '../shared-scores.ts';
import type { AgentOutcome } from './agent.ts';
import { cohortControls } from './baselines.ts';
import { type CohortFiles, writeCohortSummaries } from './outputs.ts';
import { claimCohortFolder, type CohortDefinition, defineCohort, EPISODES_FOLDER, type PlannedEpisode, plannedEpisodes } from './plan.ts';
import { earlierResults, RESULTS_FILE, recordCohort, resultLine, StoredResult } from './results.ts';

/** What the import writes beside the cohort's files: where its episodes came from. */
export const INSPECT_FILE = 'inspect.json';
/** The Inspect environment the task runs in (scripts/setup-inspect), whose `inspect log dump` reads an .eval log. */
export const INSPECT_VENV = join(ROOT, 'inspect', '.venv');
const LOG_MAX_BYTES = 1 << 30;
/** The task's keys in a sample's store (inspect/wwref_inspect/agent.py). */
const EPISODE_KEY = 'wwref_episode';
const STOPPED_KEY = 'wwref_stopped';
const SAMPLE_ID = /^(.+)__b(\d+)__r(\d+)$/;

const InspectSample = z.looseObject({
  id: z.union([z.string(), z.number()]),
  epoch: z.number().int(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  store: z.record(z.string(), z.unknown()).nullish(),
  scores: z.record(z.string(), z.looseObject({ value: z.unknown(), metadata: z.record(z.string(), z.unknown()).nullish() })).nullish(),
  error: z.looseObject({ message: z.string() }).nullish(),
  limit: z.looseObject({ type: z.string(), limit: z.number().nullish() }).nullish(),
  total_time: z.number().nullish(),
  started_at: z.string().nullish(),
  completed_at: z.string().nullish(),
});
type InspectSample = z.infer<typeof InspectSample>;

const InspectLog = z.looseObject({
  status: z.string(),
  eval: z.looseObject({
    eval_id: z.string(),
    run_id: z.string().nullish(),
    created: z.string(),
    task: z.string(),
    task_file: z.string().nullish(),
    model: z.string(),
    task_args: z.record(z.string(), z.unknown()).nullish(),
  }),
  samples: z.array(InspectSample).nullish(),
});
type InspectLog = z.infer<typeof InspectLog>;

export interface ImportOptions {
  /** The Inspect log: an .eval file (read by the Inspect environment's `inspect log dump`) or a .json one. */
  inspectLog: string;
  /** The cohort folder, already checked (cli/output-path.ts). */
  out: string;
  /** A finished `wwref controls run` folder to take the controls from (default: computed into OUT/controls/). */
  controls?: string;
  log: (line: string) => void;
}

export interface ImportOutcome {
  episodes: number;
  delivered: number;
  model: string;
  files: CohortFiles & { results: string; inspect: string };
}

/** The log's JSON: a .json log as it is, an .eval log through `inspect log dump` of the Inspect environment. */
async function readInspectLog(path: string): Promise<{ log: InspectLog; sha256: string }> {
  const bytes = readRegularFile(path, '--inspect-log', LOG_MAX_BYTES);
  let text = bytes.toString('utf8');
  if (extname(path) !== '.json') {
    const inspect = join(INSPECT_VENV, 'bin', 'inspect');
    if (!existsSync(inspect))
      throw new UserError(
        `--inspect-log ${path}: reading an .eval log needs the Inspect environment ${INSPECT_VENV}: run 'npm run setup' (scripts/setup-inspect), or convert the log to JSON ('inspect log convert --to json')`,
      );
    const dump = await execa(inspect, ['log', 'dump', resolve(path)], {
      reject: false,
      maxBuffer: LOG_MAX_BYTES,
      stripFinalNewline: false,
    });
    if (dump.exitCode !== 0) {
      const said = String(dump.stderr).trim().split('\n').filter(Boolean).at(-1) ?? '';
      throw new UserError(`--inspect-log ${path} is not a log Inspect can read (inspect log dump: ${said.slice(0, 200)})`);
    }
    text = String(dump.stdout);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new UserError(`--inspect-log ${path} is not an Inspect log (no JSON)`);
  }
  const parsed = InspectLog.safeParse(json);
  if (!parsed.success) throw new UserError(`--inspect-log ${path} is not an Inspect eval log (${parsed.error.issues[0]?.path.join('.')})`);
  return { log: parsed.data, sha256: sha256Hex(bytes) };
}

interface ImportedSample {
  sample: InspectSample;
  id: string;
  condition: string;
  budget: number;
  repeat: number;
  /** The episode folder the eval ran (absolute). */
  source: string;
}

/** Each sample's identity and episode folder; refuses a log that is not one of the whatworked task. */
function importedSamples(log: InspectLog, path: string): ImportedSample[] {
  if (log.eval.task !== 'whatworked' && !log.eval.task.endsWith('/whatworked'))
    throw new UserError(`--inspect-log ${path} is an eval of task '${log.eval.task}', not of whatworked (inspect/whatworked.py)`);
  const samples = log.samples ?? [];
  if (!samples.length) throw new UserError(`--inspect-log ${path} holds no samples (an eval run with --no-log-samples, or none finished)`);
  return samples.map((sample) => {
    const id = String(sample.id);
    const match = SAMPLE_ID.exec(id);
    if (!match || sample.epoch !== 1)
      throw new UserError(`--inspect-log ${path}: sample ${id} (epoch ${sample.epoch}) is not one episode <condition>__b<B>__r<repeat>`);
    const source = sample.store?.[EPISODE_KEY] ?? sample.metadata?.[EPISODE_KEY];
    if (typeof source !== 'string' || !isAbsolute(source))
      throw new UserError(
        `--inspect-log ${path}: sample ${id} has no episode (it failed before its episode started${sample.error ? `: ${sample.error.message.split('\n')[0]!.slice(0, 200)}` : ''})`,
      );
    if (!existsSync(source)) throw new UserError(`--inspect-log ${path}: the episode folder of sample ${id}, ${source}, is not there`);
    return { sample, id, condition: match[1]!, budget: Number(match[2]), repeat: Number(match[3]), source };
  });
}

/**
 * The cohort the eval was: its conditions, budgets and repeats, and the labels and limits its episodes
 * started with (the task labels each with the model), all alike.
 */
function importedDefinition(settings: Settings, log: InspectLog, samples: readonly ImportedSample[]) {
  const first = readEpisode(samples[0]!.source);
  for (const s of samples) {
    const state = readEpisode(s.source);
    if (canonicalJson([state.limits, state.labels]) !== canonicalJson([first.limits, first.labels]))
      throw new UserError(`the episodes of the log started with different limits or labels (${s.id}'s differ from ${samples[0]!.id}'s)`);
  }
  const task = log.eval.task_file ?? 'whatworked.py';
  return defineCohort(settings, {
    agent: `inspect eval ${task}@whatworked --model ${log.eval.model}`,
    conditions: [...new Set(samples.map((s) => s.condition))],
    budgets: [...new Set(samples.map((s) => s.budget))],
    repeats: Math.max(...samples.map((s) => s.repeat)) + 1,
    labels: first.labels,
    sessionSeconds: first.limits.session_seconds ?? 1800,
    calls: first.limits.calls,
    callSeconds: first.limits.call_seconds,
  });
}

/** Copies an episode folder's regular files (its receipt and state copy; not its lock) into OUT/episodes/<id>, whole or not at all. */
function copyEpisode(source: string, target: string): void {
  const partial = `${target}.partial.${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  for (const entry of readdirSync(source, { withFileTypes: true })) {
    if (!entry.isFile() || entry.name === LOCK_FILE) continue;
    copyFileSync(join(source, entry.name), join(partial, entry.name));
  }
  rmSync(target, { recursive: true, force: true });
  renameSync(partial, target);
}

/** Why an episode the eval left open ends undelivered. */
function openReason(sample: InspectSample): string {
  if (sample.error) return `the Inspect sample failed: ${sample.error.message.split('\n')[0]!.slice(0, 300)}`;
  const stopped = sample.store?.[STOPPED_KEY];
  if (typeof stopped === 'string' && stopped) return stopped;
  if (sample.limit) return `no submission within the sample's ${sample.limit.type} limit (${sample.limit.limit ?? '?'})`;
  return 'the sample ended without a submission';
}

/** Whether the sample was stopped by time: Inspect's time limits, or the session the task gives its agent. */
function pastDeadline(sample: InspectSample): boolean {
  const stopped = sample.store?.[STOPPED_KEY];
  if (typeof stopped === 'string' && stopped.startsWith("no submission within the session's")) return true;
  return sample.limit?.type === 'time' || sample.limit?.type === 'working';
}

/** The first field where the log's score of a sample differs from the receipt's (undefined: none). */
function scoreDifference(logged: Record<string, unknown>, score: Record<string, unknown>): string | undefined {
  const keys = new Set([...Object.keys(logged).filter((k) => k !== 'episode'), ...Object.keys(score)]);
  return [...keys].find((k) => canonicalJson(logged[k] ?? null) !== canonicalJson(score[k] ?? null));
}

export async function importInspectLog(settings: Settings, options: ImportOptions): Promise<ImportOutcome> {
  const { log, sha256 } = await readInspectLog(options.inspectLog);
  const samples = importedSamples(log, options.inspectLog);
  const definition = importedDefinition(settings, log, samples);
  const out = options.out;
  // a new folder that the import does not finish is left as it was found: nothing half-written
  const fresh = !existsSync(out) || readdirSync(out).every((f) => f === LOCK_FILE);
  const release = await lockFolder(out, 0);
  const worker = startControlsWorker(settings);
  worker.catch(() => undefined);
  try {
    claimCohortFolder(out, definition);
    const planned = plannedEpisodes(definition);
    const byId = new Map(planned.map((p) => [p.id, p]));
    const surfaces = new Map<string, Surface>();
    const surfaceOf = (condition: string) => {
      if (!surfaces.has(condition)) surfaces.set(condition, referenceSurface(settings, condition, definition.references));
      return surfaces.get(condition)!;
    };
    makeDirs(join(out, EPISODES_FOLDER));
    const context: ImportContext = { settings, options, definition, surfaceOf, worker: await worker, created: log.eval.created };
    const lines: string[] = [];
    for (const s of samples) lines.push(await importSample(context, byId.get(s.id)!, s));
    const resultsFile = join(out, RESULTS_FILE);
    writeFileAtomic(resultsFile, lines.map((l) => `${l}\n`).join(''));
    // each line made again from its episode's receipt and the plan, as a resumed cohort's are, to the character
    const verified = await earlierResults(resultsFile, planned, {
      definition,
      cohort: recordCohort(definition.labels, out),
      episodes: join(out, EPISODES_FOLDER),
      surfaceOf,
      refit: (surface, observations, own) => sharedScores(context.worker, surface, observations, own),
    });
    const wrong = samples.find((s) => !verified.lines.has(s.id));
    if (wrong)
      throw new UserError(
        `sample ${wrong.id}: its results line is not what its receipt gives (${verified.problems.get(wrong.id) ?? 'left out'})`,
      );
    const results = lines.map((l) => StoredResult.parse(JSON.parse(l)));
    const controls = await cohortControls(settings, definition, { out, controls: options.controls, workers: 1, log: options.log });
    const files = writeCohortSummaries(settings, out, definition, results, controls);
    const inspect = join(out, INSPECT_FILE);
    writeJsonAtomic(inspect, {
      log: resolve(options.inspectLog),
      log_sha256: sha256,
      status: log.status,
      eval_id: log.eval.eval_id,
      run_id: log.eval.run_id ?? null,
      created: log.eval.created,
      model: log.eval.model,
      task_args: log.eval.task_args ?? {},
      samples: samples.map((s) => ({ id: s.id, episode: s.source, error: s.sample.error?.message.split('\n')[0] ?? null })),
    });
    return {
      episodes: results.length,
      delivered: results.filter((r) => r.artifact_valid).length,
      model: log.eval.model,
      files: { ...files, results: resultsFile, inspect },
    };
  } catch (error) {
    if (fresh) for (const entry of readdirSync(out)) if (entry !== LOCK_FILE) rmSync(join(out, entry), { recursive: true, force: true });
    throw error;
  } finally {
    release();
    await (await worker.catch(() => undefined))?.close();
  }
}

interface ImportContext {
  settings: Settings;
  options: ImportOptions;
  definition: CohortDefinition;
  surfaceOf: (condition: string) => Surface;
  worker: Awaited<ReturnType<typeof startControlsWorker>>;
  /** When the eval was created: a sample's times when the log has none. */
  created: string;
}

/** One sample: its episode copied, ended if the eval left it open, scored from its receipt, checked against the log; its results line. */
async function importSample(context: ImportContext, planned: PlannedEpisode, s: ImportedSample): Promise<string> {
  const { settings, options, definition, surfaceOf, worker } = context;
  const dir = join(options.out, EPISODES_FOLDER, s.id);
  copyEpisode(s.source, dir);
  let reason: string | undefined;
  if (!(await episodeStatus(settings, dir)).closed) {
    reason = openReason(s.sample);
    await endEpisode(settings, dir, reason);
  }
  const status = await episodeStatus(settings, dir);
  const scored = await scoreEpisode(settings, dir, { worker });
  const logged = s.sample.scores?.episode_score;
  if (logged && reason === undefined) {
    const differs = scoreDifference(logged.metadata ?? {}, scored as unknown as Record<string, unknown>);
    if (differs !== undefined || logged.value !== scored.effect_recovery)
      throw new UserError(
        `sample ${s.id}: the score its log records is not what its episode's receipt gives (${differs ?? 'value'} differs)`,
      );
  }
  const { shared_degree1_score, shared_degree2_score, shared_gp_score, recovery_gain_over_shared, ...score } = scored;
  // the cohort's time form (milliseconds, UTC); Inspect writes microseconds and an offset
  const started = new Date(s.sample.started_at ?? context.created).toISOString();
  const outcome: AgentOutcome = {
    exit_code: null,
    signal: null,
    stopped: pastDeadline(s.sample) ? 'deadline' : null,
    left_children: false,
    wall_seconds: s.sample.total_time ?? 0,
    stdout_bytes: 0,
    stderr_bytes: 0,
    output_truncated: false,
  };
  return resultLine({
    planned,
    labels: definition.labels,
    agent: definition.agent,
    cohort: recordCohort(definition.labels, options.out),
    surface: surfaceOf(s.condition),
    observations: status.observations.map((o) => [o.mask, o.utility] as const),
    score: score.delivered ? (score as GradeResult) : undefined,
    undeliveredReason: score.delivered ? undefined : (score.ended?.reason ?? reason),
    calculationCalls: score.calls_used,
    process: outcome,
    shared: { shared_degree1_score, shared_degree2_score, shared_gp_score, recovery_gain_over_shared } as SharedScores,
    startedAt: started,
    finishedAt: s.sample.completed_at ? new Date(s.sample.completed_at).toISOString() : started,
  });
}
