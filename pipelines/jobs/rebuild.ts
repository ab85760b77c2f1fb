// `wwref rebuild`: every configuration of every selected condition runs natively on an executor;
// each record goes through executeRecord (hash here, metric recomputed independently) and into the
// condition's journal, then into one Arrow table per condition and the reference manifest.
// Steps: prepare inputs -> check the runtime -> read truths -> resume journals -> execute -> write.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Catalog, CatalogCondition, LoadedPlan } from '../catalog/catalog.ts';
import { FAMILIES } from '../catalog/families.ts';
import { allMasks } from '../catalog/masks.ts';
import { UserError } from '../core/errors.ts';
import { canonicalJson, sha256Hex } from '../core/hashing.ts';
import { checkOutputPath } from '../core/containment.ts';
import type { Settings } from '../core/settings.ts';
import { Progress, type ProgressTimeline } from '../core/progress.ts';
import { REFERENCES_DIR } from '../core/paths.ts';
import { executeRecord, recordOfRun, type RecordTask } from '../execution/execute-record.ts';
import { TRUTH_TIMEOUT_SECONDS, type Executor, type PreparedInput } from '../execution/executor.ts';
import { gitIdentity, versionDrift, workflowsSha256, type GitIdentity } from '../execution/identity.ts';
import { Journal, reverifyRun, UTILITY_RULES, type JournalIdentity } from '../execution/journal.ts';
import { executorRecord, type ExecutorChoice, type ExecutorRecord } from '../execution/executors.ts';
import { numericsIdentity, platformDrift, recordNumerics } from '../execution/numerics.ts';
import type { NumericalProfile } from '../core/profiles.ts';
import type { HelloResult, RunResult } from '../execution/protocol.ts';
import { THREAD_ENV } from '../execution/launcher.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import type { Truth } from '../execution/verification/verify.ts';
import { checkDeclared, checkPaired } from '../references/equivalences.ts';
import { type ConditionEntry, GENERATOR, type ReferenceManifest } from '../references/manifest.ts';
import { conditionEntry, ReferenceStore } from '../references/store.ts';
import { tableFile, tableMetadata } from '../references/surface.ts';
import { tableBytes } from '../references/tables.ts';
import type { AcquireOptions } from '../sources/acquire.ts';
import { hashPreparedFiles, manifestPath, prepareSources, readManifest } from '../sources/prepare.ts';
import { runJob } from './job.ts';

export interface RebuildOptions extends AcquireOptions {
  conditions?: string[];
  workers?: number;
  /** Ignore journals of earlier interrupted runs. */
  fresh?: boolean;
  allowVersionDrift?: boolean;
  /** Let families reuse an expensive stage across masks (retrieval term counts); off = cold path. */
  reuseSharedStage?: boolean;
  quiet?: boolean;
  log?: (line: string) => void;
  /** Folder of the reference tables and manifest.json (default the settings' reference folder). */
  referencesDir?: string;
  /** Numerical profile of the execution workers (default: the configured one). */
  profile?: NumericalProfile;
  /** What runs the records (default the local pool). */
  executor?: ExecutorChoice;
  /** Rebuild conditions whose plan changed since their references were written (recorded as superseded). */
  force?: boolean;
  /** Where the caller writes the run report: checked before any work. */
  report?: string;
}

export interface ConditionOutcome {
  condition: string;
  records: number;
  failed: number;
  nativeSeconds: number;
  violations: string[];
  /** Records that failed: the condition's table and manifest entry were left as they were. */
  failures: { mask: string; error: string }[];
  table?: string;
  /** The records came out as the table in place holds them: table and manifest entry left byte for byte. */
  kept?: boolean;
  error?: string;
}

export interface RebuildSummary {
  conditions: ConditionOutcome[];
  records: number;
  failed: number;
  resumed: number;
  wallSeconds: number;
  nativeSeconds: number;
  /** Worker processes: the local pool's size, or the Dask workers admitted when the job ended. */
  workers: number;
  /** When each executed record finished (the run's progress, for a slow run's why). */
  progress?: ProgressTimeline;
}

/** A source is ready when its manifest matches the current plan and its prepared files. */
function preparedIsCurrent(settings: Settings, loaded: LoadedPlan): boolean {
  if (!existsSync(manifestPath(settings.paths, loaded.plan.source))) return false;
  try {
    const manifest = readManifest(settings.paths, loaded.plan.source);
    if (manifest.plan.sha256 !== loaded.sha256) return false;
    const actual = hashPreparedFiles(join(settings.paths.prepared, loaded.plan.source));
    return Object.entries(manifest.prepared_files).every(([f, h]) => actual[f] === h);
  } catch {
    return false;
  }
}

/** Step 1: prepares what is missing or stale; conditions of a source that failed are set aside. */
async function prepareInputs(catalog: Catalog, selected: CatalogCondition[], options: RebuildOptions, log: (line: string) => void) {
  const sources = [...new Set(selected.map((c) => c.source))].map((s) => catalog.source(s));
  const stale = sources.filter((s) => !preparedIsCurrent(options.settings, s));
  const unprepared = new Map<string, string>();
  if (stale.length) {
    log(`preparing ${stale.length} source(s): ${stale.map((s) => s.plan.source).join(', ')}`);
    for (const outcome of await prepareSources(stale, { ...options, log })) {
      if (!outcome.ok) unprepared.set(outcome.source, outcome.error ?? 'preparation failed');
    }
  }
  return { runnable: selected.filter((c) => !unprepared.has(c.source)), unprepared };
}

/**
 * Before anything runs: a condition whose plan changed since its references were written is rebuilt
 * only with --force (the old plan hashes are then recorded as superseded), and only together with
 * every other condition of its source, so that one manifest holds one plan per source. Returns the
 * supersessions to record, by condition.
 */
export function checkPlans(store: ReferenceStore, selected: CatalogCondition[], force = false): Map<string, string[]> {
  const current = store.manifest();
  const supersedes = new Map<string, string[]>();
  for (const c of selected) {
    const entry = current && conditionEntry(current, c.id);
    const earlier = entry?.supersedes_plan_sha256 ?? [];
    if (!entry || entry.plan_sha256 === c.plan.sha256) {
      if (earlier.length) supersedes.set(c.id, earlier);
      continue;
    }
    if (!force) {
      throw new UserError(
        `plan of condition '${c.id}' changed after its references were written (${store.manifestPath} records plan sha256 ${entry.plan_sha256}, ` +
          `${c.plan.file} is now ${c.plan.sha256}); ` +
          'pass --force to rebuild it and record the old plan as superseded',
      );
    }
    supersedes.set(
      c.id,
      [...new Set([...earlier, entry.plan_sha256])].filter((h) => h !== c.plan.sha256),
    );
  }
  const sources = new Set(selected.map((c) => c.source));
  const left = Object.entries(current?.conditions ?? {}).filter(([id, e]) => sources.has(e.source) && !selected.some((c) => c.id === id));
  for (const [id, entry] of left) {
    const plan = selected.find((c) => c.source === entry.source)!.plan;
    if (entry.plan_sha256 !== plan.sha256) {
      throw new UserError(
        `condition '${id}' of source '${entry.source}' was built from another plan (${entry.plan_sha256}); ` +
          `rebuild it together with the others of its source (--condition ${id})`,
      );
    }
  }
  return supersedes;
}

/** Step 2: the executor has checked profile and versions; tables of another platform are not mixed into one manifest. */
async function checkRuntime(executor: Executor, store: ReferenceStore, runnable: CatalogCondition[]): Promise<HelloResult> {
  const [hello] = await executor.describe();
  const previous = store.manifest();
  const kept = Object.keys(previous?.conditions ?? {}).filter((id) => !runnable.some((c) => c.id === id));
  const mixed = kept.length
    ? [...platformDrift(previous!.numerics, executor.profile, hello!.numerics), ...versionDrift(hello!.versions, previous!.versions)]
    : [];
  if (mixed.length) {
    throw new UserError(
      `${mixed.join('; ')}: rebuilding only some conditions of ${store.dir} would mix runtimes in one manifest; ` +
        `rebuild all of them, or build into another folder (--references)`,
    );
  }
  return hello!;
}

function preparedInput(settings: Settings, c: CatalogCondition): PreparedInput {
  return { source: c.source, files: readManifest(settings.paths, c.source).prepared_files };
}

/**
 * Mean recorded seconds per record of the condition in the target folder's manifest, else in the
 * committed references (a rebuild into a new folder), if any: to start large work first and for the ETA.
 */
function previousCost(c: CatalogCondition, manifests: (ReferenceManifest | undefined)[]): number | undefined {
  const entry = manifests
    .map((m) => (m ? conditionEntry(m, c.id) : undefined))
    .find((e) => e !== undefined && e.records > 0 && e.native_seconds > 0);
  return entry ? entry.native_seconds / entry.records : undefined;
}

/** The committed references' manifest, when the rebuild writes elsewhere (their timings guide the order and the ETA). */
function committedManifest(store: ReferenceStore, settings: Settings): ReferenceManifest | undefined {
  if (store.dir === REFERENCES_DIR) return undefined;
  try {
    return new ReferenceStore(REFERENCES_DIR, settings.paths).manifest();
  } catch {
    return undefined; // only a guide: a folder that cannot be read guides nothing
  }
}

/** The task of one record of a condition in this rebuild. */
function recordTask(c: CatalogCondition, mask: string, input: PreparedInput, options: RebuildOptions): RecordTask {
  return {
    condition: c.id,
    source: c.source,
    family: c.family,
    dimensions: c.dimensions,
    mask,
    planSha256: c.plan.sha256,
    input,
    timeoutSeconds: c.plan.plan.execution.timeout_seconds,
    reuseSharedStage: options.reuseSharedStage,
  };
}

/** Executes one record; the run of an ok record is journaled (a failed one simply runs again on resume). */
async function runRecord(executor: Executor, task: RecordTask, truth: Truth, journal: Journal): Promise<ReferenceRecord> {
  const seen: { run?: RunResult } = {};
  const record = await executeRecord(executor, task, truth, (run) => (seen.run = run));
  if (record.status === 'ok' && seen.run) journal.append(task.mask, seen.run);
  return record;
}

/**
 * Step 4 for one condition: the journaled runs that verify again as a fresh run does (reverifyRun),
 * as records built like fresh ones. A scale taken from the data (regression, forecasting) cannot be
 * recomputed here but is the same for every mask: it must equal the scale of a record computed now,
 * that of the first mask left to run (it would run anyway) or, when the journal holds every mask, of
 * an extra run of the first mask. `resumed` counts the journaled records kept.
 */
async function resumeJournal(
  c: CatalogCondition,
  journal: Journal,
  executor: Executor,
  truth: Truth,
  task: (mask: string) => RecordTask,
  log: (line: string) => void,
): Promise<{ records: Map<string, ReferenceRecord>; resumed: number }> {
  const masks = allMasks(c.dimensions);
  const runs = journal.resume();
  const records = new Map<string, ReferenceRecord>();
  for (const [mask, run] of runs) {
    if (!masks.includes(mask)) continue;
    const check = reverifyRun(c.family, run, truth);
    if (!check.problems.length) records.set(mask, recordOfRun(task(mask), run, check));
  }
  let anchor: ReferenceRecord | undefined;
  if (UTILITY_RULES[c.family].scale === 'data' && records.size) {
    anchor = await runRecord(executor, task(masks.find((m) => !records.has(m)) ?? masks[0]!), truth, journal);
    for (const [mask, record] of records) {
      if (anchor.status !== 'ok' || record.normalization_scale !== anchor.normalization_scale) records.delete(mask);
    }
  }
  if (runs.size > records.size) log(`journal: ${runs.size - records.size} record(s) of ${c.id} failed re-verification and run again`);
  const resumed = records.size;
  if (anchor && !records.has(anchor.mask)) records.set(anchor.mask, anchor);
  return { records, resumed };
}

/** Step 3: held-out truth per condition, for the independent metric (requested together: on a cluster each is a round trip). */
async function readTruths(executor: Executor, settings: Settings, runnable: CatalogCondition[]): Promise<Map<string, Truth>> {
  const truth = async (c: CatalogCondition) =>
    [
      c.id,
      await executor.truth({ family: c.family, input: preparedInput(settings, c) }, { timeoutSeconds: TRUTH_TIMEOUT_SECONDS }),
    ] as const;
  return new Map<string, Truth>(await Promise.all(runnable.map(truth)));
}

/**
 * Step 4: journals of interrupted runs, valid only for the same plan, inputs, runtime, code, versions
 * and numerics, and each run only once it verifies again (after the truths: a run is verified against them).
 */
async function resumeJournals(
  executor: Executor,
  runnable: CatalogCondition[],
  truths: Map<string, Truth>,
  options: RebuildOptions & { identity: Pick<JournalIdentity, 'runtime' | 'code' | 'versions' | 'numerics'>; log: (line: string) => void },
) {
  const { settings } = options;
  const journals = new Map<string, Journal>();
  for (const c of runnable) {
    const prepared = readManifest(settings.paths, c.source).prepared_files;
    const journal = new Journal(settings.paths.cache, c.id, { condition: c.id, plan: c.plan.sha256, prepared, ...options.identity });
    if (options.fresh) journal.drop();
    journals.set(c.id, journal);
  }
  const kept = await Promise.all(
    runnable.map((c) => {
      const input = preparedInput(settings, c);
      return resumeJournal(c, journals.get(c.id)!, executor, truths.get(c.id)!, (mask) => recordTask(c, mask, input, options), options.log);
    }),
  );
  const done = new Map(runnable.map((c, i) => [c.id, kept[i]!.records]));
  return { journals, done, resumed: kept.reduce((sum, k) => sum + k.resumed, 0) };
}

/** Step 5: every missing record, largest first, each journaled as it finishes. */
async function runMissing(
  executor: Executor,
  runnable: CatalogCondition[],
  truths: Map<string, Truth>,
  journals: Map<string, Journal>,
  done: Map<string, Map<string, ReferenceRecord>>,
  options: RebuildOptions & { costs: (ReferenceManifest | undefined)[]; workers: number },
): Promise<ProgressTimeline> {
  const costOf = (c: CatalogCondition) => previousCost(c, options.costs) ?? FAMILIES[c.family].relativeCost;
  const jobs = runnable.flatMap((c) => {
    const input = preparedInput(options.settings, c);
    return allMasks(c.dimensions)
      .filter((mask) => !done.get(c.id)!.has(mask))
      .map((mask) => ({ c, cost: costOf(c), task: recordTask(c, mask, input, options) }));
  });
  jobs.sort((a, b) => b.cost - a.cost);
  const progress = new Progress('rebuild', jobs.length, { quiet: options.quiet, workers: options.workers });
  for (const c of runnable) progress.expect(c.id, allMasks(c.dimensions).length - done.get(c.id)!.size, costOf(c));
  try {
    await Promise.all(
      jobs.map(async ({ c, task }) => {
        const record = await runRecord(executor, task, truths.get(c.id)!, journals.get(c.id)!);
        done.get(c.id)!.set(task.mask, record);
        progress.tick(c.id, record.status === 'ok', record.wall_seconds);
      }),
    );
  } finally {
    progress.stop();
  }
  return progress.timeline();
}

export async function rebuild(catalog: Catalog, options: RebuildOptions): Promise<RebuildSummary> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const started = performance.now();
  const selected = catalog.selectConditions(options.conditions);
  const workers = options.workers ?? 2;
  const { settings } = options;
  if (options.report !== undefined)
    checkOutputPath(settings.paths, options.report, 'rebuild report', { generated: options.referencesDir ? [options.referencesDir] : [] });
  const store = new ReferenceStore(options.referencesDir ?? settings.paths.references, settings.paths);
  const supersedes = checkPlans(store, selected, options.force);
  const previous = store.manifest();
  // The code identity as the run starts: what it writes later does not make the code "dirty".
  const git = await gitIdentity();

  const { runnable, unprepared } = await prepareInputs(catalog, selected, { ...options, workers }, log);
  const job = {
    settings,
    workers,
    executor: options.executor,
    profile: options.profile,
    allowVersionDrift: options.allowVersionDrift,
    log,
  };
  const interrupted = 'finished records are kept in the journal; run the same command to resume';
  return runJob({ ...job, interrupted }, async ({ executor, signal }) => {
    const hello = await checkRuntime(executor, store, runnable);
    const code = workflowsSha256();
    const numerics = numericsIdentity(executor.profile, hello.numerics);

    const truths = await readTruths(executor, settings, runnable);
    const { journals, done, resumed } = await resumeJournals(executor, runnable, truths, {
      ...options,
      identity: { runtime: settings.runtime.name, code, versions: hello.versions, numerics },
      log,
    });
    // the workers that share the records: the local pool's, or the Dask workers admitted so far
    const sharing = executor.kind === 'local' ? workers : (await executor.describe()).length;
    const costs = [previous, committedManifest(store, settings)];
    const timeline = await runMissing(executor, runnable, truths, journals, done, { ...options, costs, workers: sharing });

    // Step 6: tables, equivalence checks and the manifest (never after a signal: the journal keeps the records).
    signal.throwIfAborted();
    const ran = executorRecord(executor, await executor.describe());
    const outcomes = await writeReferences(catalog, runnable, done, journals, {
      settings,
      store,
      supersedes,
      hello,
      code,
      git,
      profile: executor.profile,
      executor: ran,
    });
    for (const [source, error] of unprepared) {
      for (const c of selected.filter((s) => s.source === source)) {
        outcomes.push({
          condition: c.id,
          records: 0,
          failed: 0,
          nativeSeconds: 0,
          violations: [],
          failures: [],
          error: `source ${source} not prepared: ${error}`,
        });
      }
    }
    const built = outcomes.filter((o) => !o.error);
    return {
      conditions: outcomes,
      records: built.reduce((s, o) => s + o.records, 0),
      failed: built.reduce((s, o) => s + o.failed, 0),
      resumed,
      wallSeconds: (performance.now() - started) / 1000,
      nativeSeconds: built.reduce((s, o) => s + o.nativeSeconds, 0),
      // the local pool runs `workers` processes; a Dask cluster as many as it had admitted at the end
      workers: executor.kind === 'local' ? workers : ran.worker_count,
      progress: timeline,
    };
  });
}

/** Two runs of a record agree when everything but their timings is the same. */
function sameOutcome(a: ReferenceRecord, b: ReferenceRecord): boolean {
  const untimed = ({ wall_seconds, prediction_wall_seconds, metric_wall_seconds, ...rest }: ReferenceRecord) => rest;
  return canonicalJson(untimed(a)) === canonicalJson(untimed(b));
}

/**
 * Step 6: one table per condition whose records all passed, its declared equivalences checked, and
 * the manifest entries, committed together. A condition with a failed record keeps its old table
 * (if any) and its journal; the outcome lists the failures. A condition whose records came out as
 * its table in place holds them (built from the same plan, inputs, versions, profile and code) keeps
 * that table and manifest entry byte for byte: this run's timings go to the run's summary only.
 */
async function writeReferences(
  catalog: Catalog,
  runnable: CatalogCondition[],
  done: Map<string, Map<string, ReferenceRecord>>,
  journals: Map<string, Journal>,
  context: {
    settings: Settings;
    store: ReferenceStore;
    supersedes: Map<string, string[]>;
    hello: HelloResult;
    code: string;
    git: GitIdentity;
    profile: NumericalProfile;
    executor: ExecutorRecord;
  },
): Promise<ConditionOutcome[]> {
  const { store, supersedes, hello, code, git, profile, executor } = context;
  const before = store.manifest();
  const recordsOf = (id: string): ReferenceRecord[] | undefined => {
    const fresh = done.get(id);
    if (fresh) return allMasks(catalog.condition(id).dimensions).map((m) => fresh.get(m)!);
    return store.tableIfValid(id, before)?.records;
  };
  const top = {
    manifest_version: 1 as const,
    generator: GENERATOR,
    code: { git_commit: git.commit, git_dirty: git.dirty, workflows_sha256: code },
    python: hello.python,
    versions: hello.versions,
    threads: { environment: { ...THREAD_ENV }, threadpoolctl_limit: 1 as const },
    numerics: recordNumerics(profile, hello.numerics),
    executor,
  };
  const outcomes: ConditionOutcome[] = [];
  const tables = new Map<string, Uint8Array>();
  const entries = new Map<string, ConditionEntry>();
  for (const c of runnable) {
    const records = recordsOf(c.id)!;
    const violations = checkDeclared(c.id, c.condition.equivalences, records);
    if (c.condition.paired_with) {
      const four = recordsOf(c.condition.paired_with);
      if (four) violations.push(...checkPaired(c.id, c.condition.paired_with, records, four));
    }
    const failures = records.filter((r) => r.status !== 'ok');
    const nativeSeconds = records.reduce((sum, r) => sum + (r.wall_seconds ?? 0), 0);
    const outcome: ConditionOutcome = {
      condition: c.id,
      records: records.length,
      failed: failures.length,
      nativeSeconds,
      violations: violations.map((v) => `${v.declaration}: ${v.masks.join(' vs ')} (${v.detail})`),
      failures: failures.map((r) => ({ mask: r.mask, error: r.error ?? 'failed' })),
    };
    outcomes.push(outcome);
    if (failures.length) continue;
    const superseded = supersedes.get(c.id);
    const entry: ConditionEntry = {
      source: c.source,
      family: c.family,
      dimensions: c.dimensions,
      records: records.length,
      failed: 0,
      table: tableFile(c.id),
      table_sha256: '',
      plan_file: c.plan.file,
      plan_sha256: c.plan.sha256,
      prepared_files: readManifest(context.settings.paths, c.source).prepared_files,
      published: { comparable: c.plan.plan.published.comparable, prepared_match: c.plan.plan.published.prepared_match },
      equivalence_violations: outcome.violations,
      native_seconds: nativeSeconds,
      ...(superseded?.length ? { supersedes_plan_sha256: superseded } : {}),
    };
    outcome.table = entry.table;
    const metadata = tableMetadata(c.id, entry, top);
    const old = before && conditionEntry(before, c.id);
    const oldTable = store.tableIfValid(c.id, before);
    const untimedEntry = (e: ConditionEntry) => canonicalJson({ ...e, table_sha256: '', native_seconds: 0 });
    if (
      old &&
      oldTable &&
      untimedEntry(old) === untimedEntry(entry) &&
      canonicalJson(oldTable.metadata) === canonicalJson(metadata) &&
      oldTable.records.length === records.length &&
      oldTable.records.every((r, i) => sameOutcome(r, records[i]!))
    ) {
      outcome.kept = true;
      continue;
    }
    const bytes = tableBytes(records, metadata);
    tables.set(c.id, bytes);
    entries.set(c.id, { ...entry, table_sha256: sha256Hex(bytes) });
  }
  if (tables.size) {
    await store.commit((current) => ({
      manifest: { ...top, conditions: { ...(current?.conditions ?? {}), ...Object.fromEntries(entries) } },
      tables,
    }));
  }
  for (const o of outcomes) if (o.table && !o.failed) journals.get(o.condition)!.drop();
  return outcomes;
}
