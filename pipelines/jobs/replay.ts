// Cold replay: verify the reference manifest's files, then re-execute every record with one fresh
// worker and one computation thread, reading the prepared input from disk for every record, and
// compare hash, utility, independent metric, warnings, the beat tolerance table and timing.
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { readReferenceTable } from '../references/tables.ts';
import { loadPlanFile } from '../catalog/catalog.ts';
import { checkDeclared, checkPaired } from '../references/equivalences.ts';
import { UserError } from '../core/errors.ts';
import type { Equivalence } from '../catalog/plan.ts';
import type { FamilyName } from '../catalog/families.ts';
import { writeJsonAtomic } from '../core/fsutil.ts';
import { sha256Hex } from '../core/hashing.ts';
import { versionDrift } from '../execution/identity.ts';
import { platformDrift, platformNotes, type RecordedNumerics } from '../execution/numerics.ts';
import { metricsAgree } from '../execution/metrics.ts';
import { referencesDir, ROOT } from '../core/paths.ts';
import { RecordTimeout, WorkerPool } from '../execution/local-pool.ts';
import { sourcePreparedDir } from '../sources/prepare.ts';
import { Progress } from '../core/progress.ts';
import type { CapturedWarning, NumericsReport } from '../execution/protocol.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { readReferenceManifest } from '../references/manifest.ts';
import { independentMetric, predictionHash, type Truth } from '../execution/verify.ts';

export interface ReplayOptions {
  conditions?: string[];
  referencesDir?: string;
  allowVersionDrift?: boolean;
  /** Replay references of another numerical profile or platform, comparing with tolerances. */
  allowPlatformDrift?: boolean;
  /** A record is a timing outlier when its ratio is this many times above (or below) its condition's median. */
  outlierFactor?: number;
  timeoutSeconds?: number;
  /** Extra environment for the worker (test-only switches such as WWREF_TEST_DELAY_SECONDS). */
  workerEnv?: Record<string, string>;
  quiet?: boolean;
}

export interface CheckFailure {
  check: 'execution' | 'prediction_sha256' | 'utility' | 'independent_metric' | 'warnings' | 'tolerance_table';
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
}

export interface ReplayReport {
  passed: number;
  total: number;
  all_passed: boolean;
  conditions: { condition: string; passed: number; total: number; median_timing_ratio: number | null; slowed: boolean }[];
  median_timing_ratio: number | null;
  timing_outliers: { condition: string; mask: string; ratio: number }[];
  /** Declared equivalences (inactive options, paired subcubes) violated by the replayed hashes. */
  equivalence_violations: string[];
  version_drift: string[];
  allow_version_drift: boolean;
  versions: Record<string, string>;
  /** Why the references may not reproduce bit for bit on this machine (relaxed checks when allowed). */
  platform_drift: string[];
  allow_platform_drift: boolean;
  /** Platform differences that may change bits but are not refused (a different C library). */
  platform_notes: string[];
  /** The numerical profile of this replay and the state its first worker reported. */
  numerical_profile: string;
  numerics: NumericsReport | null;
  wall_seconds: number;
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

/** Refuses (UserError naming the file) when a table or prepared input differs from the manifest. */
export function verifyManifestFiles(dir: string, conditions: string[]): void {
  const manifest = readReferenceManifest(dir);
  if (!manifest) throw new UserError(`no reference manifest in ${dir}`);
  for (const id of conditions) {
    const entry = manifest.conditions[id];
    if (!entry) throw new UserError(`condition '${id}' is not in ${join(dir, 'manifest.json')}`);
    const table = join(dir, entry.table);
    if (!existsSync(table)) throw new UserError(`reference table missing: ${table}`);
    const actual = sha256Hex(readFileSync(table));
    if (actual !== entry.table_sha256) {
      throw new UserError(`reference table changed: ${table} (manifest ${entry.table_sha256}, file ${actual}); refusing to replay`);
    }
    for (const [name, expected] of Object.entries(entry.prepared_files)) {
      const path = join(sourcePreparedDir(entry.source), name);
      if (!existsSync(path)) throw new UserError(`prepared input missing: ${path}; run 'wwref prepare --source ${entry.source}'`);
      const hash = sha256Hex(readFileSync(path));
      if (hash !== expected) {
        throw new UserError(`prepared input changed: ${path} (manifest ${expected}, file ${hash}); refusing to replay`);
      }
    }
  }
}

function sameWarnings(a: CapturedWarning[], b: CapturedWarning[]): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
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
}

/** One condition to replay: where its prepared input is and what was saved. */
export interface ReplayTarget {
  condition: string;
  family: FamilyName;
  folder: string;
  records: StoredRecord[];
  /** Declared inactive options and the paired four-option condition, checked on the replayed hashes. */
  equivalences?: Equivalence[];
  pairedWith?: string;
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
    ...(tolerances ? { tolerances } : {}),
  };
}

/** The declarations of a condition in its plan (none when the plan file is not at hand). */
export function declaredFor(condition: string, planFile: string): Pick<ReplayTarget, 'equivalences' | 'pairedWith'> {
  const path = isAbsolute(planFile) ? planFile : join(ROOT, planFile);
  if (!existsSync(path)) return {};
  const declared = loadPlanFile(path).plan.conditions.find((c) => c.id === condition);
  return declared ? { equivalences: declared.equivalences, ...(declared.paired_with ? { pairedWith: declared.paired_with } : {}) } : {};
}

/** Replays our own reference folder (outputs/references layout). */
export async function replay(options: ReplayOptions = {}): Promise<ReplayReport> {
  const dir = options.referencesDir ?? referencesDir();
  const manifest = readReferenceManifest(dir);
  if (!manifest) throw new UserError(`no reference manifest in ${dir}; run 'wwref rebuild' first`);
  const ids = options.conditions?.length ? options.conditions : Object.keys(manifest.conditions);
  verifyManifestFiles(dir, ids);
  const targets = ids.map((id): ReplayTarget => {
    const entry = manifest.conditions[id]!;
    const declared = declaredFor(id, entry.plan_file);
    return {
      condition: id,
      family: entry.family as FamilyName,
      folder: sourcePreparedDir(entry.source),
      records: readReferenceTable(join(dir, entry.table)).records.map(storedFromReference),
      ...declared,
    };
  });
  return replayTargets(targets, { versions: manifest.versions, numerics: manifest.numerics }, options);
}

/**
 * What the replayed records were computed with. `numerics` is the reference manifest's record
 * (undefined when it has none: refused as drift), or 'unrecorded' for a layout that has no such
 * field (published packs), which is then compared exactly and said so in the report.
 */
export interface ReplayExpectation {
  versions: Record<string, string>;
  numerics?: RecordedNumerics | 'unrecorded';
}

/** The replay itself: a fresh single worker per condition, every record cold, every check. */
export async function replayTargets(targets: ReplayTarget[], expected: ReplayExpectation, options: ReplayOptions = {}): Promise<ReplayReport> {
  const started = performance.now();
  const outlierFactor = options.outlierFactor ?? 5;
  const total = targets.reduce((s, t) => s + t.records.length, 0);
  const progress = new Progress('replay', total, options.quiet);
  for (const t of targets) progress.expect(t.condition, t.records.length);

  const records: ReplayedRecord[] = [];
  let versions: Record<string, string> = {};
  let drift: string[] = [];
  let platform: string[] = [];
  let notes: string[] = [];
  let numerics: NumericsReport | null = null;
  let profileName = '';
  for (const [index, { condition: id, family, folder, records: saved }] of targets.entries()) {
    // A fresh single worker per condition: nothing is shared between conditions, and the worker
    // re-reads the prepared input from disk for every record (cold).
    const pool = new WorkerPool(1, { env: options.workerEnv });
    try {
      const hello = await pool.runtime();
      if (index === 0) {
        versions = hello.versions;
        numerics = hello.numerics;
        profileName = pool.profile.name;
        drift = versionDrift(hello.versions, expected.versions);
        if (drift.length && !options.allowVersionDrift) {
          throw new UserError(`installed Python packages differ from the reference manifest:\n  ${drift.join('\n  ')}\npass --allow-version-drift to compare with tolerances instead`);
        }
        platform = expected.numerics === 'unrecorded' ? [] : platformDrift(expected.numerics, pool.profile, hello.numerics);
        notes = expected.numerics === 'unrecorded' ? [] : platformNotes(expected.numerics, hello.numerics);
        if (platform.length && !options.allowPlatformDrift) {
          throw new UserError(`${platform.join('; ')}; bit identity is not expected, so replay refuses: pass --allow-platform-drift to compare with tolerances instead`);
        }
      }
      const tolerant = (options.allowVersionDrift && drift.length > 0) || (options.allowPlatformDrift && platform.length > 0);
      const truth: Truth = (await pool.submit((w) => w.truth(family, folder), 300)).truth;
      for (const record of saved) {
        const failures: CheckFailure[] = [];
        const relaxed: string[] = [];
        let wall: number | null = null;
        let actual: { sha: string; utility: number } | null = null;
        try {
          const run = await pool.submit((w) => w.run(family, folder, record.mask, { cold: true }), options.timeoutSeconds ?? 180);
          wall = run.wall_seconds;
          const sha = predictionHash(family, run.prediction);
          actual = { sha, utility: run.utility };
          if (sha !== record.prediction_sha256) {
            if (tolerant) relaxed.push('prediction_sha256');
            else failures.push({ check: 'prediction_sha256', expected: record.prediction_sha256, actual: sha });
          }
          if (run.utility !== record.utility) {
            if (tolerant && record.utility !== null && metricsAgree(run.utility, record.utility)) relaxed.push('utility');
            else failures.push({ check: 'utility', expected: record.utility, actual: run.utility });
          }
          const independent = independentMetric(family, run.prediction, truth);
          if (record.native_value === null || !metricsAgree(independent.value, record.native_value)) {
            failures.push({ check: 'independent_metric', expected: record.native_value, actual: independent.value });
          }
          if (!sameWarnings(run.warnings, record.warnings)) failures.push({ check: 'warnings', expected: record.warnings, actual: run.warnings });
          if (independent.tolerances && record.tolerances) {
            for (const [tol, counts] of Object.entries(independent.tolerances)) {
              const s = record.tolerances[tol];
              if (!s || s.true_positive !== counts.true_positive || s.f1 !== counts.f1) {
                failures.push({ check: 'tolerance_table', expected: { [tol]: s }, actual: { [tol]: { true_positive: counts.true_positive, f1: counts.f1 } } });
              }
            }
          }
        } catch (error) {
          if (error instanceof UserError) throw error;
          const kind = error instanceof RecordTimeout ? 'timeout' : (error as Error).name;
          failures.push({ check: 'execution', expected: 'a finished run', actual: `${kind}: ${(error as Error).message}` });
        }
        const recorded = record.wall_seconds;
        records.push({
          condition: id,
          mask: record.mask,
          passed: failures.length === 0,
          failures,
          relaxed,
          prediction_sha256: actual?.sha ?? null,
          utility: actual?.utility ?? null,
          wall_seconds: wall,
          recorded_wall_seconds: recorded,
          timing_ratio: wall !== null && recorded ? wall / recorded : null,
          timing_outlier: false,
        });
        progress.tick(id, failures.length === 0);
      }
    } finally {
      await pool.close();
    }
  }

  // Timing: per condition median ratio; a record far from its condition's median is an outlier, and
  // a condition whose median ratio is far above 1 is flagged as slowed down.
  const conditionSummaries = targets.map(({ condition: id }) => {
    const mine = records.filter((r) => r.condition === id);
    const med = median(mine.flatMap((r) => (r.timing_ratio === null ? [] : [r.timing_ratio])));
    for (const r of mine) {
      if (med !== null && r.timing_ratio !== null && (r.timing_ratio > med * outlierFactor || r.timing_ratio < med / outlierFactor)) r.timing_outlier = true;
    }
    return { condition: id, passed: mine.filter((r) => r.passed).length, total: mine.length, median_timing_ratio: med, slowed: med !== null && med > outlierFactor };
  });
  const violations: string[] = [];
  for (const target of targets) {
    const mine = records.filter((r) => r.condition === target.condition);
    const found = checkDeclared(target.condition, target.equivalences ?? [], mine);
    const four = target.pairedWith ? records.filter((r) => r.condition === target.pairedWith) : [];
    if (four.length) found.push(...checkPaired(target.condition, target.pairedWith!, mine, four));
    violations.push(...found.map((v) => `${v.condition}: ${v.declaration}: ${v.masks.join(' vs ')} (${v.detail})`));
  }
  const passed = records.filter((r) => r.passed).length;
  return {
    passed,
    total: records.length,
    all_passed: passed === records.length && violations.length === 0,
    conditions: conditionSummaries,
    median_timing_ratio: median(records.flatMap((r) => (r.timing_ratio === null ? [] : [r.timing_ratio]))),
    timing_outliers: records.filter((r) => r.timing_outlier).map((r) => ({ condition: r.condition, mask: r.mask, ratio: r.timing_ratio! })),
    equivalence_violations: violations,
    version_drift: drift,
    allow_version_drift: Boolean(options.allowVersionDrift),
    versions,
    platform_drift: platform,
    allow_platform_drift: Boolean(options.allowPlatformDrift),
    platform_notes: notes,
    numerical_profile: profileName,
    numerics,
    wall_seconds: (performance.now() - started) / 1000,
    recorded_native_seconds: records.reduce((s, r) => s + (r.recorded_wall_seconds ?? 0), 0),
    replayed_native_seconds: records.reduce((s, r) => s + (r.wall_seconds ?? 0), 0),
    records,
  };
}

export function writeReplayReport(path: string, report: ReplayReport): void {
  if (path.startsWith(referencesDir())) throw new UserError('the replay report must not be written into the references folder');
  writeJsonAtomic(path, report);
}
