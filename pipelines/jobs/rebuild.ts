// The execute stage: every configuration of every selected condition runs natively in the worker pool;
// each prediction is hashed here and its metric recomputed independently; finished records go to a
// journal (an interrupted rebuild resumes), then to one Arrow table per condition and the manifest.
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { AcquireOptions } from '../sources/acquire.ts';
import { readReferenceTable, writeReferenceTable } from '../references/tables.ts';
import type { Catalog, CatalogCondition, LoadedPlan } from '../catalog/catalog.ts';
import { checkDeclared, checkPaired } from '../references/equivalences.ts';
import { UserError } from '../core/errors.ts';
import { allMasks } from '../catalog/families.ts';
import { digest, sha256Hex } from '../core/hashing.ts';
import { gitIdentity, pinnedVersions, versionDrift, workflowsSha256 } from '../execution/identity.ts';
import { numericsIdentity, platformDrift, recordNumerics, type NumericalProfile } from '../execution/numerics.ts';
import { cacheDir, referencesDir } from '../core/paths.ts';
import { hashPreparedFiles, manifestPath, prepareSources, readManifest, sourcePreparedDir } from '../sources/prepare.ts';
import { Progress } from '../core/progress.ts';
import { readReferenceManifest, writeReferenceManifest, type ConditionEntry, type ReferenceManifest } from '../references/manifest.ts';
import { ReferenceRecord } from '../execution/records.ts';
import { RecordTimeout, WorkerPool } from '../execution/local-pool.ts';
import { THREAD_ENV } from '../execution/python-worker.ts';
import { verifyRun, type Truth } from '../execution/verify.ts';

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
  /** Folder of the reference tables and manifest.json (default WWREF_REFERENCES_DIR or outputs/references). */
  referencesDir?: string;
  /** Numerical profile of the execution workers (default: activeProfile()). */
  profile?: NumericalProfile;
}

export interface ConditionOutcome {
  condition: string;
  records: number;
  failed: number;
  nativeSeconds: number;
  violations: string[];
  table?: string;
  error?: string;
}

export interface RebuildSummary {
  conditions: ConditionOutcome[];
  records: number;
  failed: number;
  resumed: number;
  wallSeconds: number;
  nativeSeconds: number;
  workers: number;
}

/** Rough relative cost per record, used to start the largest records first when no earlier table exists. */
const FAMILY_COST: Record<string, number> = {
  retrieval: 5,
  clustering: 0.3,
  classification: 0.3,
  beat_detection: 0.1,
  image_restoration: 0.05,
  graph_link_prediction: 0.05,
  regression: 0.02,
  forecasting: 0.01,
};

export function tablePath(condition: string, dir = referencesDir()): string {
  return join(dir, `${condition}.arrow`);
}

function journalPath(condition: string): string {
  return join(cacheDir(), 'journal', `${condition}.jsonl`);
}

/** A source is ready when its manifest matches the current plan and its prepared files. */
function preparedIsCurrent(loaded: LoadedPlan): boolean {
  if (!existsSync(manifestPath(loaded.plan.source))) return false;
  try {
    const manifest = readManifest(loaded.plan.source);
    if (manifest.plan.sha256 !== loaded.sha256) return false;
    const actual = hashPreparedFiles(sourcePreparedDir(loaded.plan.source));
    return Object.entries(manifest.prepared_files).every(([f, h]) => actual[f] === h);
  } catch {
    return false;
  }
}

interface Job {
  condition: CatalogCondition;
  mask: string;
  cost: number;
}

export async function rebuild(catalog: Catalog, options: RebuildOptions = {}): Promise<RebuildSummary> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const started = performance.now();
  const selected = catalog.selectConditions(options.conditions);
  const workers = options.workers ?? 2;
  const refDir = options.referencesDir ?? referencesDir();

  // 1. Prepared inputs: prepare what is missing or stale; conditions of a failed source are reported.
  const sources = [...new Set(selected.map((c) => c.source))].map((s) => catalog.source(s));
  const stale = sources.filter((s) => !preparedIsCurrent(s));
  const unprepared = new Map<string, string>();
  if (stale.length) {
    log(`preparing ${stale.length} source(s): ${stale.map((s) => s.plan.source).join(', ')}`);
    for (const outcome of await prepareSources(stale, { ...options, workers, log })) {
      if (!outcome.ok) unprepared.set(outcome.source, outcome.error ?? 'preparation failed');
    }
  }
  const runnable = selected.filter((c) => !unprepared.has(c.source));

  const pool = new WorkerPool(workers, { profile: options.profile });
  const onInterrupt = () => {
    pool.kill();
    process.stderr.write('\ninterrupted: finished records are kept in the journal; run the same command to resume\n');
    process.exit(130);
  };
  process.once('SIGINT', onInterrupt);
  try {
    // 2. Runtime identity: the installed versions must be the pinned ones (the pool has checked the
    //    numerical profile); tables of another platform are not mixed into one manifest.
    const hello = await pool.runtime();
    const drift = versionDrift(hello.versions, pinnedVersions());
    if (drift.length && !options.allowVersionDrift) {
      throw new UserError(`installed Python packages differ from workflows/requirements.txt:\n  ${drift.join('\n  ')}\nrun 'npm run setup' (or pass --allow-version-drift)`);
    }
    const previous = readReferenceManifest(refDir);
    const kept = Object.keys(previous?.conditions ?? {}).filter((id) => !runnable.some((c) => c.id === id));
    const mixed = kept.length ? platformDrift(previous!.numerics, pool.profile, hello.numerics) : [];
    if (mixed.length) {
      throw new UserError(`${mixed.join('; ')}: rebuilding only some conditions of ${refDir} would mix platforms in one manifest; rebuild all of them, or build into another folder (WWREF_REFERENCES_DIR)`);
    }
    const codeSha = workflowsSha256();
    const numerics = numericsIdentity(pool.profile, hello.numerics);

    // 3. Journals of interrupted runs, valid only for the same plan, inputs, code and versions.
    const identities = new Map<string, string>();
    const done = new Map<string, Map<string, ReferenceRecord>>();
    let resumed = 0;
    for (const c of runnable) {
      const prepared = readManifest(c.source).prepared_files;
      const identity = digest({ condition: c.id, plan: c.plan.sha256, prepared, code: codeSha, versions: hello.versions, numerics });
      identities.set(c.id, identity);
      const records = new Map<string, ReferenceRecord>();
      const journal = journalPath(c.id);
      if (existsSync(journal) && !options.fresh) {
        for (const line of readFileSync(journal, 'utf8').split('\n')) {
          if (!line.trim()) continue;
          try {
            const entry = JSON.parse(line) as { identity: string; record: unknown };
            const record = ReferenceRecord.safeParse(entry.record);
            if (entry.identity === identity && record.success && record.data.status === 'ok') records.set(record.data.mask, record.data);
          } catch {
            // a torn last line of an interrupted run: that record is simply run again
          }
        }
        resumed += records.size;
      } else {
        rmSync(journal, { force: true });
      }
      done.set(c.id, records);
    }

    // 4. Held-out truth per condition, for the independent metric.
    const truths = new Map<string, Truth>();
    for (const c of runnable) {
      const folder = sourcePreparedDir(c.source);
      truths.set(c.id, (await pool.submit((w) => w.truth(c.family, folder), 300)).truth);
    }

    // 5. Every missing record, largest first.
    const previousCost = (c: CatalogCondition): number | undefined => {
      const path = tablePath(c.id, refDir);
      if (!existsSync(path)) return undefined;
      try {
        const seconds = readReferenceTable(path).records.map((r) => r.wall_seconds ?? 0);
        return seconds.reduce((a, b) => a + b, 0) / Math.max(seconds.length, 1);
      } catch {
        return undefined;
      }
    };
    const jobs: Job[] = [];
    for (const c of runnable) {
      const cost = previousCost(c) ?? FAMILY_COST[c.family] ?? 1;
      for (const mask of allMasks(c.dimensions)) if (!done.get(c.id)!.has(mask)) jobs.push({ condition: c, mask, cost });
    }
    jobs.sort((a, b) => b.cost - a.cost);
    const progress = new Progress('rebuild', jobs.length, options.quiet);
    for (const c of runnable) progress.expect(c.id, allMasks(c.dimensions).length - done.get(c.id)!.size);
    mkdirSync(join(cacheDir(), 'journal'), { recursive: true });

    await Promise.all(
      jobs.map(async ({ condition: c, mask }) => {
        const timeout = c.plan.plan.execution.timeout_seconds;
        const base = {
          condition: c.id,
          source: c.source,
          family: c.family,
          dimensions: c.dimensions,
          mask,
          plan_sha256: c.plan.sha256,
        };
        let record: ReferenceRecord;
        try {
          const run = await pool.submit((w) => w.run(c.family, sourcePreparedDir(c.source), mask, { reuseSharedStage: options.reuseSharedStage }), timeout);
          const check = verifyRun(c.family, run, truths.get(c.id)!);
          record = {
            ...base,
            status: check.problems.length ? 'failed' : 'ok',
            error: check.problems.length ? check.problems.join('; ') : null,
            utility: run.utility,
            native_metric: run.native_metric,
            native_value: run.native_value,
            independent_value: check.independentValue,
            normalization_scale: run.normalization_scale,
            prediction_sha256: check.sha256,
            warnings: run.warnings,
            wall_seconds: run.wall_seconds,
            prediction_wall_seconds: run.prediction_wall_seconds,
            metric_wall_seconds: run.metric_wall_seconds,
            extras: run.extras,
          };
        } catch (error) {
          const kind = error instanceof RecordTimeout ? 'timeout' : (error as Error).name;
          record = {
            ...base,
            status: 'failed',
            error: `${kind}: ${(error as Error).message}`,
            utility: null,
            native_metric: null,
            native_value: null,
            independent_value: null,
            normalization_scale: null,
            prediction_sha256: null,
            warnings: [],
            wall_seconds: null,
            prediction_wall_seconds: null,
            metric_wall_seconds: null,
            extras: {},
          };
        }
        done.get(c.id)!.set(mask, record);
        appendFileSync(journalPath(c.id), `${JSON.stringify({ identity: identities.get(c.id), record })}\n`);
        progress.tick(c.id, record.status === 'ok');
      }),
    );

    // 6. Tables, equivalence checks and the manifest.
    const git = await gitIdentity();
    const manifest: ReferenceManifest = {
      manifest_version: 1,
      generator: 'wwref 0.1.0',
      code: { git_commit: git.commit, git_dirty: git.dirty, workflows_sha256: codeSha },
      python: hello.python,
      versions: hello.versions,
      threads: { environment: { ...THREAD_ENV }, threadpoolctl_limit: 1 },
      numerics: recordNumerics(pool.profile, hello.numerics),
      conditions: { ...(previous?.conditions ?? {}) },
    };
    const outcomes: ConditionOutcome[] = [];
    const recordsOf = (id: string): ReferenceRecord[] | undefined => {
      const fresh = done.get(id);
      if (fresh) return allMasks(catalog.condition(id).dimensions).map((m) => fresh.get(m)!);
      return existsSync(tablePath(id, refDir)) ? readReferenceTable(tablePath(id, refDir)).records : undefined;
    };
    for (const c of runnable) {
      const records = recordsOf(c.id)!;
      const violations = checkDeclared(c.id, c.condition.equivalences, records);
      if (c.condition.paired_with) {
        const four = recordsOf(c.condition.paired_with);
        if (four) violations.push(...checkPaired(c.id, c.condition.paired_with, records, four));
      }
      const prepared = readManifest(c.source).prepared_files;
      const metadata = {
        wwref: JSON.stringify({
          condition: c.id,
          source: c.source,
          family: c.family,
          dimensions: c.dimensions,
          plan_sha256: c.plan.sha256,
          prepared_files: prepared,
          versions: hello.versions,
          numerical_profile: pool.profile.name,
          workflows_sha256: codeSha,
        }),
      };
      const bytes = writeReferenceTable(tablePath(c.id, refDir), records, metadata);
      rmSync(journalPath(c.id), { force: true });
      const failed = records.filter((r) => r.status !== 'ok').length;
      const nativeSeconds = records.reduce((sum, r) => sum + (r.wall_seconds ?? 0), 0);
      const entry: ConditionEntry = {
        source: c.source,
        family: c.family,
        dimensions: c.dimensions,
        records: records.length,
        failed,
        table: `${c.id}.arrow`,
        table_sha256: sha256Hex(bytes),
        plan_file: c.plan.file,
        plan_sha256: c.plan.sha256,
        prepared_files: prepared,
        published: {
          comparable: c.plan.plan.published.comparable,
          prepared_match: c.plan.plan.published.prepared_match,
        },
        equivalence_violations: violations.map((v) => `${v.declaration}: ${v.masks.join(' vs ')} (${v.detail})`),
        native_seconds: nativeSeconds,
      };
      const superseded = previous?.conditions[c.id];
      if (superseded?.supersedes_plan_sha256) entry.supersedes_plan_sha256 = superseded.supersedes_plan_sha256;
      manifest.conditions[c.id] = entry;
      outcomes.push({ condition: c.id, records: records.length, failed, nativeSeconds, violations: entry.equivalence_violations, table: entry.table });
    }
    writeReferenceManifest(manifest, refDir);
    for (const [source, error] of unprepared) {
      for (const c of selected.filter((s) => s.source === source)) {
        outcomes.push({ condition: c.id, records: 0, failed: 0, nativeSeconds: 0, violations: [], error: `source ${source} not prepared: ${error}` });
      }
    }
    const all = outcomes.filter((o) => !o.error);
    return {
      conditions: outcomes,
      records: all.reduce((s, o) => s + o.records, 0),
      failed: all.reduce((s, o) => s + o.failed, 0),
      resumed,
      wallSeconds: (performance.now() - started) / 1000,
      nativeSeconds: all.reduce((s, o) => s + o.nativeSeconds, 0),
      workers,
    };
  } finally {
    process.removeListener('SIGINT', onInterrupt);
    await pool.close();
  }
}
