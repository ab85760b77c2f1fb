// Cold replay: verify the reference manifest's files (while the workers start), then re-execute every
// record with one computation thread, each condition in a fresh worker that reads its prepared input
// from disk, and compare hash, utility, independent metric, warnings and the beat tolerance table;
// timing ratios are reported (outliers and slowed conditions flagged), never failed. The wall time
// runs from the call: reading and checking the tables counts.
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { loadPlanFile, planFilePath } from '../catalog/catalog.ts';
import { checkDeclared, checkPaired } from '../references/equivalences.ts';
import { UserError } from '../core/errors.ts';
import { DEFAULT_RECORD_TIMEOUT_SECONDS, type Equivalence } from '../catalog/plan.ts';
import type { FamilyName } from '../catalog/families.ts';
import { checkOutputPath, isInside } from '../core/containment.ts';
import { writeJsonAtomic } from '../core/fsutil.ts';
import { canonicalJson, checkFileHashes } from '../core/hashing.ts';
import { versionDrift, workflowsSha256 } from '../execution/identity.ts';
import { THREAD_ENV } from '../execution/launcher.ts';
import { platformDrift, type RecordedNumerics } from '../execution/numerics.ts';
import { metricsAgree } from '../execution/verification/metrics.ts';
import type { Settings } from '../core/settings.ts';
import { executeRecord } from '../execution/execute-record.ts';
import { TRUTH_TIMEOUT_SECONDS, type Executor, type PreparedInput } from '../execution/executor.ts';
import type { ExecutorChoice } from '../execution/executors.ts';
import { runJob } from './job.ts';
import { Progress } from '../core/progress.ts';
import type { CapturedWarning, NumericsReport } from '../execution/protocol.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { type ConditionEntry, GENERATOR, type ReferenceManifest } from '../references/manifest.ts';
import { ReferenceStore } from '../references/store.ts';

export interface ReplayOptions {
  settings: Settings;
  conditions?: string[];
  referencesDir?: string;
  allowVersionDrift?: boolean;
  /** Replay references of another numerical profile or platform, comparing with tolerances. */
  allowPlatformDrift?: boolean;
  /** A record is a timing outlier when its ratio is this many times above (or below) its condition's median. */
  outlierFactor?: number;
  timeoutSeconds?: number;
  /** Worker processes running records at the same time, each with one computation thread (default 1). */
  workers?: number;
  /** What runs the records (default the local pool). */
  executor?: ExecutorChoice;
  /** Extra environment of the workers (a test's double, an experiment's variable). */
  workerEnv?: Record<string, string>;
  quiet?: boolean;
  log?: (line: string) => void;
  /** Where the caller writes the report: checked before any work. */
  report?: string;
}

/** The report path of `options`, checked before any work (core/containment.ts). */
function checkReport(options: ReplayOptions): void {
  if (options.report !== undefined)
    checkOutputPath(options.settings.paths, options.report, 'replay report', {
      generated: options.referencesDir ? [options.referencesDir] : [],
    });
}

export interface CheckFailure {
  check:
    | 'execution'
    | 'verification'
    | 'prediction_sha256'
    | 'utility'
    | 'independent_metric'
    | 'native_value'
    | 'native_metric'
    | 'normalization_scale'
    | 'extras'
    | 'warnings'
    | 'tolerance_table';
  expected: unknown;
  actual: unknown;
}

export interface ReplayedRecord {
  condition: string;
  mask: string;
  passed: boolean;
  failures: CheckFailure[];
  /** Checks relaxed to tolerances under --allow-version-drift / --allow-platform-drift that differed exactly. */
  relaxed: string[];
  /** What this replay produced. */
  prediction_sha256: string | null;
  utility: number | null;
  wall_seconds: number | null;
  recorded_wall_seconds: number | null;
  timing_ratio: number | null;
  timing_outlier: boolean;
  /** The machine that replayed the record. */
  host: string;
}

export interface ReplayReport {
  /** Our own reference folders: what of the manifest's provenance was checked, and what cannot be. */
  provenance?: Provenance;
  passed: number;
  total: number;
  all_passed: boolean;
  conditions: { condition: string; passed: number; total: number; median_timing_ratio: number | null; slowed: boolean }[];
  median_timing_ratio: number | null;
  /** Timing per machine that replayed records (one entry on one machine; several on a cluster). */
  hosts: { host: string; records: number; median_timing_ratio: number | null }[];
  timing_outliers: { condition: string; mask: string; ratio: number }[];
  /** Declared equivalences (inactive options, paired subcubes) violated by the replayed hashes. */
  equivalence_violations: string[];
  version_drift: string[];
  allow_version_drift: boolean;
  versions: Record<string, string>;
  /** Why the references may not reproduce bit for bit on this machine (relaxed checks when allowed). */
  platform_drift: string[];
  allow_platform_drift: boolean;
  /** The numerical profile of this replay and the state its first worker reported. */
  numerical_profile: string;
  /** Worker processes that ran records at the same time, each with one computation thread. */
  workers: number;
  numerics: NumericsReport | null;
  wall_seconds: number;
  /**
   * Of wall_seconds, the start: until the tables were checked and the first worker was ready (its
   * interpreter started, the libraries imported, its hello admitted). The benchmark's own replay
   * starts its clock after the same (its imports and its pack's checks).
   */
  startup_seconds: number;
  recorded_native_seconds: number;
  replayed_native_seconds: number;
  records: ReplayedRecord[];
}

export function median(values: number[]): number | null {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * Why the references' code is not this checkout's: the workflow-code digest the manifest records
 * against the one of workflows/ here (refused like version drift unless allowed).
 */
export function codeDrift(manifest: ReferenceManifest): string[] {
  const here = workflowsSha256();
  return manifest.code.workflows_sha256 === here
    ? []
    : [`workflow code: the references were built with workflows_sha256 ${manifest.code.workflows_sha256}, this checkout has ${here}`];
}

/** CPython versions whose records wwref builds and replays (3.13 gives the published records' bits too). */
const PYTHONS = /^3\.1[23]\.\d+/;

/**
 * The manifest's provenance fields that replay checks before running: the Python that built the
 * records (a version wwref builds with) and the thread settings they ran under (wwref's one thread).
 * A difference is drift, refused like version drift unless --allow-version-drift.
 */
export function provenanceDrift(manifest: ReferenceManifest): string[] {
  const drift: string[] = [];
  if (!PYTHONS.test(manifest.python))
    drift.push(`Python: the references claim to be built by Python ${manifest.python}; wwref builds with CPython 3.12 (3.13 accepted)`);
  if (canonicalJson(manifest.threads.environment) !== canonicalJson(THREAD_ENV))
    drift.push(
      `threads: the references claim the thread settings ${canonicalJson(manifest.threads.environment)}; wwref computes with one thread (${canonicalJson(THREAD_ENV)})`,
    );
  return drift;
}

/** What replay says of the manifest's provenance: what it checked, and what no replay can check. */
export interface Provenance {
  checked: string[];
  /** Claims a replay cannot verify: they describe the machine and checkout that built the references. */
  unverifiable: { field: string; value: unknown }[];
  /** The manifest's generator, when it is not this wwref's. */
  other_generator?: string;
}

function provenance(manifest: ReferenceManifest): Provenance {
  return {
    checked: ['python', 'threads', 'versions', 'code.workflows_sha256', 'numerics', 'every table and prepared input (sha256)'],
    unverifiable: [
      { field: 'code.git_commit', value: manifest.code.git_commit },
      { field: 'code.git_dirty', value: manifest.code.git_dirty },
      { field: 'executor', value: manifest.executor ?? null },
    ],
    ...(manifest.generator === GENERATOR ? {} : { other_generator: manifest.generator }),
  };
}

/** What a replay compares against: one saved record, from our tables or a published-layout pack. */
export interface StoredRecord {
  mask: string;
  utility: number | null;
  native_value: number | null;
  prediction_sha256: string | null;
  warnings: CapturedWarning[];
  wall_seconds: number | null;
  /** Beat detection: the saved tolerance table (true_positive and f1 per tolerance), when saved. */
  tolerances?: Record<string, { true_positive: number; f1: number }>;
  /**
   * Our tables: every other value the replay recomputes, compared exactly (published packs have no
   * such record; their native value is compared with the metric tolerance).
   */
  recomputed?: Pick<ReferenceRecord, 'native_value' | 'independent_value' | 'normalization_scale' | 'native_metric' | 'extras'>;
}

/** One condition to replay: where its prepared input is and what was saved. */
export interface ReplayTarget {
  condition: string;
  family: FamilyName;
  /** The prepared input, by source and content hashes. */
  input: PreparedInput;
  /** Where to find it when not under prepared/ (a pack's inputs/ folder). */
  inputRoot?: string;
  records: StoredRecord[];
  /** Declared inactive options and the paired four-option condition, checked on the replayed hashes. */
  equivalences?: Equivalence[];
  pairedWith?: string;
  /** Per-record timeout of the condition's plan (default DEFAULT_RECORD_TIMEOUT_SECONDS). */
  timeoutSeconds?: number;
}

export function storedFromReference(record: ReferenceRecord): StoredRecord {
  const tolerances = record.extras.matching_tolerance_sensitivity as StoredRecord['tolerances'];
  return {
    mask: record.mask,
    utility: record.utility,
    native_value: record.native_value,
    prediction_sha256: record.prediction_sha256,
    warnings: record.warnings,
    wall_seconds: record.wall_seconds,
    recomputed: {
      native_value: record.native_value,
      independent_value: record.independent_value,
      normalization_scale: record.normalization_scale,
      native_metric: record.native_metric,
      extras: record.extras,
    },
    ...(tolerances ? { tolerances } : {}),
  };
}

/**
 * The declarations of a condition in its plan (the plan file must exist), after checking
 * that the manifest entry is what the plan implies: the plan's hash, source and family, and the
 * condition declared there with the entry's number of options.
 */
export function declaredFor(
  condition: string,
  entry: Pick<ConditionEntry, 'plan_file' | 'plan_sha256' | 'source' | 'family' | 'dimensions'>,
): Pick<ReplayTarget, 'equivalences' | 'pairedWith' | 'timeoutSeconds'> {
  const path = planFilePath(entry.plan_file);
  if (!existsSync(path))
    throw new UserError(
      `condition '${condition}': its plan ${entry.plan_file} (named by the manifest) does not exist, ` +
        `so the references cannot be checked against it; refusing to replay`,
    );
  const loaded = loadPlanFile(path);
  const { plan } = loaded;
  const declared = plan.conditions.find((c) => c.id === condition);
  const problems = [
    loaded.sha256 !== entry.plan_sha256
      ? `the plan is now sha256 ${loaded.sha256}, the references were built from ${entry.plan_sha256} (rebuild it, with --force)`
      : '',
    plan.source !== entry.source ? `the plan's source is '${plan.source}', the manifest says '${entry.source}'` : '',
    plan.family !== entry.family ? `the plan's family is ${plan.family}, the manifest says ${entry.family}` : '',
    !declared
      ? 'the plan does not declare this condition'
      : declared.dimensions !== entry.dimensions
        ? `the plan gives it ${declared.dimensions} options, the manifest ${entry.dimensions}`
        : '',
  ].filter(Boolean);
  if (problems.length)
    throw new UserError(`condition '${condition}' does not match its plan ${entry.plan_file}: ${problems.join('; ')}; refusing to replay`);
  return {
    equivalences: declared!.equivalences,
    timeoutSeconds: plan.execution.timeout_seconds,
    ...(declared!.paired_with ? { pairedWith: declared!.paired_with } : {}),
  };
}

/**
 * Replays our own reference folder (outputs/references layout). Every table is read and checked
 * (sha256 and surface), and every prepared input, before any record runs: while the workers start.
 */
export async function replay(options: ReplayOptions): Promise<ReplayReport> {
  const started = performance.now();
  const { settings } = options;
  checkReport(options);
  const store = new ReferenceStore(options.referencesDir ?? settings.paths.references, settings.paths);
  const manifest = store.requireManifest();
  const entries = store.select(manifest, options.conditions);
  const load = (): ReplayTarget[] => {
    const targets = entries.map(([id, entry]): ReplayTarget => {
      const records = store.table(id, manifest).records.map(storedFromReference);
      checkFileHashes(
        join(settings.paths.prepared, entry.source),
        entry.prepared_files,
        'prepared input',
        `run 'wwref prepare --source ${entry.source}'`,
      );
      return {
        condition: id,
        family: entry.family as FamilyName,
        input: { source: entry.source, files: entry.prepared_files },
        records,
        ...declaredFor(id, entry),
      };
    });
    const code = [...codeDrift(manifest), ...provenanceDrift(manifest)];
    if (code.length && !options.allowVersionDrift)
      throw new UserError(`${code.join('; ')}; refusing to replay (pass --allow-version-drift to replay anyway)`);
    expected.codeDrift = code;
    return targets;
  };
  const expected: ReplayExpectation = { versions: manifest.versions, numerics: manifest.numerics };
  const report = await replayJob(load, expected, options, { started, inputRoots: [] });
  return { ...report, provenance: provenance(manifest) };
}

/**
 * What the replayed records were computed with. `numerics` is the reference manifest's record
 * (undefined when it has none: refused as drift), or 'unrecorded' for a layout that has no such
 * field (published packs), which is then compared exactly and said so in the report.
 */
export interface ReplayExpectation {
  versions: Record<string, string>;
  /** Workflow-code differences already allowed (--allow-version-drift): reported with the version drift. */
  codeDrift?: string[];
  numerics?: RecordedNumerics | 'unrecorded';
}

/** Compares a replayed record with the stored one; hash and utility relax to tolerances when `tolerant`. */
function compareWithStored(
  record: ReferenceRecord,
  stored: StoredRecord,
  tolerant: boolean,
): { failures: CheckFailure[]; relaxed: string[] } {
  const failures: CheckFailure[] = [];
  const relaxed: string[] = [];
  if (record.prediction_sha256 === null) {
    failures.push({ check: 'execution', expected: 'a finished run', actual: record.error });
    return { failures, relaxed };
  }
  if (record.status !== 'ok') failures.push({ check: 'verification', expected: 'worker and orchestrator agree', actual: record.error });
  if (record.prediction_sha256 !== stored.prediction_sha256) {
    if (tolerant) relaxed.push('prediction_sha256');
    else failures.push({ check: 'prediction_sha256', expected: stored.prediction_sha256, actual: record.prediction_sha256 });
  }
  if (record.utility !== stored.utility) {
    if (tolerant && stored.utility !== null && record.utility !== null && metricsAgree(record.utility, stored.utility))
      relaxed.push('utility');
    else failures.push({ check: 'utility', expected: stored.utility, actual: record.utility });
  }
  if (stored.native_value === null || record.independent_value === null || !metricsAgree(record.independent_value, stored.native_value)) {
    failures.push({ check: 'independent_metric', expected: stored.native_value, actual: record.independent_value });
  }
  // every other stored value this run recomputes is compared too: a re-sealed table cannot carry another
  // scale, metric name or extras (exact; the values relax to tolerances with the hash and utility)
  const saved = stored.recomputed;
  const exact: [CheckFailure['check'], unknown, unknown, boolean][] = saved
    ? [
        ['native_value', saved.native_value, record.native_value, true],
        ['independent_metric', saved.independent_value, record.independent_value, true],
        ['normalization_scale', saved.normalization_scale, record.normalization_scale, true],
        ['native_metric', saved.native_metric, record.native_metric, false],
        ['extras', saved.extras, record.extras, false],
      ]
    : [];
  for (const [check, want, got, numeric] of exact) {
    if (canonicalJson(want) === canonicalJson(got)) continue;
    if (numeric && tolerant && typeof want === 'number' && typeof got === 'number' && metricsAgree(got, want)) relaxed.push(check);
    else if (!failures.some((f) => f.check === check)) failures.push({ check, expected: want, actual: got });
  }
  if (JSON.stringify(record.warnings) !== JSON.stringify(stored.warnings))
    failures.push({ check: 'warnings', expected: stored.warnings, actual: record.warnings });
  const tolerances = record.extras.matching_tolerance_sensitivity as StoredRecord['tolerances'];
  if (tolerances && stored.tolerances) {
    for (const [tol, counts] of Object.entries(tolerances)) {
      const saved = stored.tolerances[tol];
      if (!saved || saved.true_positive !== counts.true_positive || saved.f1 !== counts.f1) {
        failures.push({
          check: 'tolerance_table',
          expected: { [tol]: saved },
          actual: { [tol]: { true_positive: counts.true_positive, f1: counts.f1 } },
        });
      }
    }
  }
  return { failures, relaxed };
}

/** One target's records, each run cold (its isolation key: a fresh worker of its own) and compared with the stored one. */
function replayTarget(
  executor: Executor,
  target: ReplayTarget,
  tolerant: boolean,
  progress: Progress,
  options: ReplayOptions,
): Promise<ReplayedRecord[]> {
  const localHost = hostname();
  const isolation = target.condition;
  const truth = executor.truth({ family: target.family, input: target.input, isolation }, { timeoutSeconds: TRUTH_TIMEOUT_SECONDS });
  truth.catch(() => {}); // awaited by every record, which reports its failure
  const outcomes = target.records.map(async (stored): Promise<ReplayedRecord> => {
    let host = localHost;
    const task = {
      condition: target.condition,
      source: target.input.source,
      family: target.family,
      dimensions: stored.mask.length,
      mask: stored.mask,
      planSha256: '',
      input: target.input,
      timeoutSeconds: options.timeoutSeconds ?? target.timeoutSeconds ?? DEFAULT_RECORD_TIMEOUT_SECONDS,
      isolation,
    };
    const record = await executeRecord(executor, task, truth, (run) => (host = run.host ?? localHost));
    const { failures, relaxed } = compareWithStored(record, stored, tolerant);
    progress.tick(target.condition, failures.length === 0, record.wall_seconds);
    return {
      condition: target.condition,
      mask: stored.mask,
      passed: failures.length === 0,
      failures,
      relaxed,
      prediction_sha256: record.prediction_sha256,
      utility: record.utility,
      wall_seconds: record.wall_seconds,
      recorded_wall_seconds: stored.wall_seconds,
      timing_ratio: record.wall_seconds !== null && stored.wall_seconds ? record.wall_seconds / stored.wall_seconds : null,
      timing_outlier: false,
      host,
    };
  });
  return Promise.all(outcomes);
}

/**
 * Timing per condition: the median ratio; a record far from its condition's median is marked an
 * outlier, and a condition whose median ratio is far above 1 is flagged as slowed down.
 */
function timingSummaries(targets: readonly ReplayTarget[], records: ReplayedRecord[], outlierFactor: number): ReplayReport['conditions'] {
  return targets.map(({ condition: id }) => {
    const mine = records.filter((r) => r.condition === id);
    const med = median(mine.flatMap((r) => (r.timing_ratio === null ? [] : [r.timing_ratio])));
    for (const r of mine) {
      if (med !== null && r.timing_ratio !== null && (r.timing_ratio > med * outlierFactor || r.timing_ratio < med / outlierFactor))
        r.timing_outlier = true;
    }
    return {
      condition: id,
      passed: mine.filter((r) => r.passed).length,
      total: mine.length,
      median_timing_ratio: med,
      slowed: med !== null && med > outlierFactor,
    };
  });
}

/** Declared equivalences (inactive options, paired subcubes) the replayed hashes contradict. */
function equivalenceViolations(targets: readonly ReplayTarget[], records: ReplayedRecord[]): string[] {
  const violations: string[] = [];
  for (const target of targets) {
    const mine = records.filter((r) => r.condition === target.condition);
    const found = checkDeclared(target.condition, target.equivalences ?? [], mine);
    const four = target.pairedWith ? records.filter((r) => r.condition === target.pairedWith) : [];
    if (four.length) found.push(...checkPaired(target.condition, target.pairedWith!, mine, four));
    violations.push(...found.map((v) => `${v.condition}: ${v.declaration}: ${v.masks.join(' vs ')} (${v.detail})`));
  }
  return violations;
}

/** The replay of targets already read (a published-layout pack): every record cold, every check. */
export function replayTargets(targets: ReplayTarget[], expected: ReplayExpectation, options: ReplayOptions): Promise<ReplayReport> {
  const started = performance.now();
  checkReport(options);
  return replayJob(() => targets, expected, options, {
    started,
    inputRoots: [...new Set(targets.flatMap((t) => (t.inputRoot ? [t.inputRoot] : [])))],
  });
}

/** The progress line of a replay of `targets`, its ETA weighting each condition's records by their recorded seconds. */
function replayProgress(targets: readonly ReplayTarget[], options: ReplayOptions): Progress {
  const total = targets.reduce((s, t) => s + t.records.length, 0);
  const progress = new Progress('replay', total, { quiet: options.quiet, workers: options.workers ?? 1 });
  for (const t of targets) {
    const timed = t.records.flatMap((r) => (typeof r.wall_seconds === 'number' ? [r.wall_seconds] : []));
    progress.expect(t.condition, t.records.length, timed.length ? timed.reduce((a, b) => a + b, 0) / timed.length : undefined);
  }
  return progress;
}

/**
 * The replay itself: a fresh worker per condition, every record cold, every check. `load` reads and
 * checks the targets while the workers start; the wall time runs from `started` (the caller's start).
 */
async function replayJob(
  load: () => ReplayTarget[],
  expected: ReplayExpectation,
  options: ReplayOptions,
  { started, inputRoots }: { started: number; inputRoots: string[] },
): Promise<ReplayReport> {
  const outlierFactor = options.outlierFactor ?? 5;
  let targets: ReplayTarget[] = [];
  let progress: Progress | undefined;
  // One executor for the whole replay; every condition gets fresh worker processes of its own (its
  // isolation key), forked from a template that has computed nothing.
  const job = {
    settings: options.settings,
    executor: options.executor,
    workers: options.workers ?? 1,
    env: options.workerEnv,
    expectedVersions: expected.versions,
    allowVersionDrift: options.allowVersionDrift,
    inputRoots,
    log: options.log ?? ((line: string) => process.stderr.write(`${line}\n`)),
    interrupted: 'nothing was written; the replay can be started again',
    whileStarting: () => {
      targets = load();
      progress = replayProgress(targets, options);
    },
  };
  const replayed = new Map<string, ReplayedRecord[]>();
  let versions: Record<string, string> = {};
  let drift: string[] = [];
  let platform: string[] = [];
  let numerics: NumericsReport | null = null;
  // The local pool runs `workers` processes; a Dask cluster as many as it had admitted at the end.
  let workerCount = options.workers ?? 1;
  // the progress line's timer ends with the job, however the job ends
  let ready = started;
  const profile = await runJob(job, async ({ executor, hello }) => {
    ready = performance.now();
    versions = hello!.versions;
    numerics = hello!.numerics;
    drift = [...versionDrift(hello!.versions, expected.versions), ...(expected.codeDrift ?? [])];
    platform = expected.numerics === 'unrecorded' ? [] : platformDrift(expected.numerics, executor.profile, hello!.numerics);
    if (platform.length && !options.allowPlatformDrift) {
      throw new UserError(
        `${platform.join('; ')}; bit identity is not expected, so replay refuses: pass --allow-platform-drift to compare with tolerances instead`,
      );
    }
    const tolerant =
      (Boolean(options.allowVersionDrift) && drift.length > 0) || (Boolean(options.allowPlatformDrift) && platform.length > 0);
    // Every request is queued at once, in condition order; the pool runs `workers` of them at a time.
    await Promise.all(
      targets.map(async (target) => replayed.set(target.condition, await replayTarget(executor, target, tolerant, progress!, options))),
    );
    if (executor.kind !== 'local') workerCount = (await executor.describe()).length;
    return executor.profile;
  }).finally(() => progress?.stop());
  const records = targets.flatMap((t) => replayed.get(t.condition) ?? []);

  const conditionSummaries = timingSummaries(targets, records, outlierFactor);
  const violations = equivalenceViolations(targets, records);
  const passed = records.filter((r) => r.passed).length;
  return {
    passed,
    total: records.length,
    all_passed: passed === records.length && violations.length === 0,
    conditions: conditionSummaries,
    median_timing_ratio: median(records.flatMap((r) => (r.timing_ratio === null ? [] : [r.timing_ratio]))),
    hosts: [...new Set(records.map((r) => r.host))].sort().map((host) => {
      const mine = records.filter((r) => r.host === host);
      return {
        host,
        records: mine.length,
        median_timing_ratio: median(mine.flatMap((r) => (r.timing_ratio === null ? [] : [r.timing_ratio]))),
      };
    }),
    timing_outliers: records.filter((r) => r.timing_outlier).map((r) => ({ condition: r.condition, mask: r.mask, ratio: r.timing_ratio! })),
    equivalence_violations: violations,
    version_drift: drift,
    allow_version_drift: Boolean(options.allowVersionDrift),
    versions,
    platform_drift: platform,
    allow_platform_drift: Boolean(options.allowPlatformDrift),
    numerical_profile: profile.name,
    workers: workerCount,
    numerics,
    wall_seconds: (performance.now() - started) / 1000,
    startup_seconds: (ready - started) / 1000,
    recorded_native_seconds: records.reduce((s, r) => s + (r.recorded_wall_seconds ?? 0), 0),
    replayed_native_seconds: records.reduce((s, r) => s + (r.wall_seconds ?? 0), 0),
    records,
  };
}

/** Writes the report; the CLI has already refused a path inside a reference or prepared folder. */
export function writeReplayReport(settings: Settings, path: string, report: ReplayReport): void {
  if (isInside(path, settings.paths.references)) throw new UserError('the replay report must not be written into the references folder');
  writeJsonAtomic(path, report);
}
