// `wwref rebuild`: every configuration of every selected condition runs natively on an executor;
// each record goes through executeRecord (hash here, metric recomputed independently) and into the
// condition's journal, then into one Arrow table per condition and the reference manifest.
// Steps: prepare inputs -> check the runtime -> resume journals -> read truths -> execute -> write.
import { existsSync } from 'node:fs';
import type { Catalog, CatalogCondition, LoadedPlan } from '../catalog/catalog.ts';
import { FAMILIES } from '../catalog/families.ts';
import { allMasks } from '../catalog/masks.ts';
import { UserError } from '../core/errors.ts';
import { sha256Hex } from '../core/hashing.ts';
import { referencesDir, sourcePreparedDir } from '../core/paths.ts';
import { Progress } from '../core/progress.ts';
import { executeRecord } from '../execution/execute-record.ts';
import { TRUTH_TIMEOUT_SECONDS, type Executor, type PreparedInput } from '../execution/executor.ts';
import { gitIdentity, versionDrift, workflowsSha256, type GitIdentity } from '../execution/identity.ts';
import { Journal } from '../execution/journal.ts';
import { executorRecord, openExecutor, type ExecutorChoice, type ExecutorRecord } from '../execution/executors.ts';
import { numericsIdentity, platformDrift, recordNumerics, type NumericalProfile } from '../execution/numerics.ts';
import type { HelloResult } from '../execution/protocol.ts';
import { THREAD_ENV } from '../execution/python-worker.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import type { Truth } from '../execution/verification/verify.ts';
import { checkDeclared, checkPaired } from '../references/equivalences.ts';
import { readReferenceManifest, type ConditionEntry, type ReferenceManifest } from '../references/manifest.ts';
import { commitReferences } from '../references/commit.ts';
import { readReferenceTable, tableBytes, tablePath } from '../references/tables.ts';
import type { AcquireOptions } from '../sources/acquire.ts';
import { hashPreparedFiles, manifestPath, prepareSources, readManifest } from '../sources/prepare.ts';

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
  /** Numerical profile of the execution workers (default: the configured one). */
  profile?: NumericalProfile;
  /** What runs the records (default the local pool). */
  executor?: ExecutorChoice;
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

/** Step 1: prepares what is missing or stale; conditions of a source that failed are set aside. */
async function prepareInputs(catalog: Catalog, selected: CatalogCondition[], options: RebuildOptions, log: (line: string) => void) {
  const sources = [...new Set(selected.map((c) => c.source))].map((s) => catalog.source(s));
  const stale = sources.filter((s) => !preparedIsCurrent(s));
  const unprepared = new Map<string, string>();
  if (stale.length) {
    log(`preparing ${stale.length} source(s): ${stale.map((s) => s.plan.source).join(', ')}`);
    for (const outcome of await prepareSources(stale, { ...options, log })) {
      if (!outcome.ok) unprepared.set(outcome.source, outcome.error ?? 'preparation failed');
    }
  }
  return { runnable: selected.filter((c) => !unprepared.has(c.source)), unprepared };
}

/** Step 2: the executor has checked profile and versions; tables of another platform are not mixed into one manifest. */
async function checkRuntime(executor: Executor, refDir: string, runnable: CatalogCondition[]): Promise<HelloResult> {
  const [hello] = await executor.describe();
  const previous = readReferenceManifest(refDir);
  const kept = Object.keys(previous?.conditions ?? {}).filter((id) => !runnable.some((c) => c.id === id));
  const mixed = kept.length ? [...platformDrift(previous!.numerics, executor.profile, hello!.numerics), ...versionDrift(hello!.versions, previous!.versions)] : [];
  if (mixed.length) {
    throw new UserError(`${mixed.join('; ')}: rebuilding only some conditions of ${refDir} would mix runtimes in one manifest; rebuild all of them, or build into another folder (--references)`);
  }
  return hello!;
}

function preparedInput(c: CatalogCondition): PreparedInput {
  return { source: c.source, files: readManifest(c.source).prepared_files };
}

/** Mean recorded seconds per record of the condition's current table, if any (to start large work first). */
function previousCost(c: CatalogCondition, refDir: string): number | undefined {
  const path = tablePath(c.id, refDir);
  if (!existsSync(path)) return undefined;
  try {
    const seconds = readReferenceTable(path).records.map((r) => r.wall_seconds ?? 0);
    return seconds.reduce((a, b) => a + b, 0) / Math.max(seconds.length, 1);
  } catch {
    return undefined;
  }
}

export async function rebuild(catalog: Catalog, options: RebuildOptions = {}): Promise<RebuildSummary> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const started = performance.now();
  const selected = catalog.selectConditions(options.conditions);
  const workers = options.workers ?? 2;
  const refDir = options.referencesDir ?? referencesDir();
  // The code identity as the run starts: what it writes later does not make the code "dirty".
  const git = await gitIdentity();

  const { runnable, unprepared } = await prepareInputs(catalog, selected, { ...options, workers }, log);
  const executor: Executor = await openExecutor(options.executor ?? { kind: 'local' }, { workers, profile: options.profile, allowVersionDrift: options.allowVersionDrift, log });
  const onInterrupt = () => {
    executor.cancel();
    process.stderr.write('\ninterrupted: finished records are kept in the journal; run the same command to resume\n');
    process.exit(130);
  };
  process.once('SIGINT', onInterrupt);
  try {
    const hello = await checkRuntime(executor, refDir, runnable);
    const code = workflowsSha256();
    const numerics = numericsIdentity(executor.profile, hello.numerics);

    // Step 3: journals of interrupted runs, valid only for the same plan, inputs, code, versions and numerics.
    const journals = new Map<string, Journal>();
    const done = new Map<string, Map<string, ReferenceRecord>>();
    let resumed = 0;
    for (const c of runnable) {
      const journal = new Journal(c.id, { condition: c.id, plan: c.plan.sha256, prepared: readManifest(c.source).prepared_files, code, versions: hello.versions, numerics });
      if (options.fresh) journal.drop();
      const records = journal.resume();
      resumed += records.size;
      journals.set(c.id, journal);
      done.set(c.id, records);
    }

    // Step 4: held-out truth per condition, for the independent metric (requested together: on a
    // cluster each is a round trip).
    const truths = new Map<string, Truth>(
      await Promise.all(
        runnable.map(async (c) => [c.id, await executor.truth({ family: c.family, input: preparedInput(c) }, { timeoutSeconds: TRUTH_TIMEOUT_SECONDS })] as const),
      ),
    );

    // Step 5: every missing record, largest first.
    const jobs = runnable.flatMap((c) => {
      const cost = previousCost(c, refDir) ?? FAMILIES[c.family].relativeCost;
      const input = preparedInput(c);
      return allMasks(c.dimensions)
        .filter((mask) => !done.get(c.id)!.has(mask))
        .map((mask) => ({ c, mask, cost, input }));
    });
    jobs.sort((a, b) => b.cost - a.cost);
    const progress = new Progress('rebuild', jobs.length, options.quiet);
    for (const c of runnable) progress.expect(c.id, allMasks(c.dimensions).length - done.get(c.id)!.size);
    await Promise.all(
      jobs.map(async ({ c, mask, input }) => {
        const record = await executeRecord(
          executor,
          {
            condition: c.id,
            source: c.source,
            family: c.family,
            dimensions: c.dimensions,
            mask,
            planSha256: c.plan.sha256,
            input,
            timeoutSeconds: c.plan.plan.execution.timeout_seconds,
            reuseSharedStage: options.reuseSharedStage,
          },
          truths.get(c.id)!,
        );
        done.get(c.id)!.set(mask, record);
        journals.get(c.id)!.append(record);
        progress.tick(c.id, record.status === 'ok');
      }),
    );

    // Step 6: tables, equivalence checks and the manifest.
    const ran = executorRecord(executor, await executor.describe());
    const outcomes = await writeReferences(catalog, runnable, done, journals, { refDir, hello, code, git, profile: executor.profile, executor: ran });
    for (const [source, error] of unprepared) {
      for (const c of selected.filter((s) => s.source === source)) {
        outcomes.push({ condition: c.id, records: 0, failed: 0, nativeSeconds: 0, violations: [], failures: [], error: `source ${source} not prepared: ${error}` });
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
    };
  } finally {
    process.removeListener('SIGINT', onInterrupt);
    await executor.close();
  }
}

/**
 * Step 6: one table per condition whose records all passed, its declared equivalences checked, and
 * the manifest entries, committed together. A condition with a failed record keeps its old table
 * (if any) and its journal; the outcome lists the failures.
 */
async function writeReferences(
  catalog: Catalog,
  runnable: CatalogCondition[],
  done: Map<string, Map<string, ReferenceRecord>>,
  journals: Map<string, Journal>,
  context: { refDir: string; hello: HelloResult; code: string; git: GitIdentity; profile: NumericalProfile; executor: ExecutorRecord },
): Promise<ConditionOutcome[]> {
  const { refDir, hello, code, git, profile, executor } = context;
  const recordsOf = (id: string): ReferenceRecord[] | undefined => {
    const fresh = done.get(id);
    if (fresh) return allMasks(catalog.condition(id).dimensions).map((m) => fresh.get(m)!);
    return existsSync(tablePath(id, refDir)) ? readReferenceTable(tablePath(id, refDir)).records : undefined;
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
        numerical_profile: profile.name,
        workflows_sha256: code,
      }),
    };
    const bytes = tableBytes(records, metadata);
    outcome.table = `${c.id}.arrow`;
    tables.set(outcome.table, bytes);
    entries.set(c.id, {
      source: c.source,
      family: c.family,
      dimensions: c.dimensions,
      records: records.length,
      failed: 0,
      table: outcome.table,
      table_sha256: sha256Hex(bytes),
      plan_file: c.plan.file,
      plan_sha256: c.plan.sha256,
      prepared_files: prepared,
      published: { comparable: c.plan.plan.published.comparable, prepared_match: c.plan.plan.published.prepared_match },
      equivalence_violations: outcome.violations,
      native_seconds: nativeSeconds,
    });
  }
  if (tables.size) {
    await commitReferences(refDir, (current) => {
      const conditions = { ...(current?.conditions ?? {}) };
      for (const [id, entry] of entries) {
        const superseded = current?.conditions[id]?.supersedes_plan_sha256;
        conditions[id] = superseded ? { ...entry, supersedes_plan_sha256: superseded } : entry;
      }
      const manifest: ReferenceManifest = {
        manifest_version: 1,
        generator: 'wwref 0.1.0',
        code: { git_commit: git.commit, git_dirty: git.dirty, workflows_sha256: code },
        python: hello.python,
        versions: hello.versions,
        threads: { environment: { ...THREAD_ENV }, threadpoolctl_limit: 1 },
        numerics: recordNumerics(profile, hello.numerics),
        executor,
        conditions,
      };
      return { manifest, tables };
    });
  }
  for (const id of entries.keys()) journals.get(id)!.drop();
  return outcomes;
}
