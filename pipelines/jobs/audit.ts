// Audit of source manifests: each manifest is checked against itself (content hash), its plan, the
// raw cache, the prepared files and, where they exist, the published facts. Prepared inputs that are
// missing are made first (auditNeeds + sources/prepare.ts prepareMissing, from the CLI) and kept only
// when they have the hashes the manifest records; replayNeeds does the same for replay.
//
// `reprepared` (auditWithReprepare, what `wwref audit` runs): every source, added ones included, is
// prepared afresh from its sha256-checked raw files and its plan, by prepare's own recipe path
// (prepareInto), into <cache>/audit/<source>.audit-<pid>, and each produced file is compared with
// prepared/<source>/ and with the manifest's prepared_files: a prepared input changed and re-sealed
// into its manifest no longer passes. Nothing in prepared/, manifests/ or the raw cache is changed
// (a raw file missing from the cache is acquired into it, as prepare does); the folder is removed
// afterwards, and the ones of killed audits by the next audit.
import { existsSync, lstatSync, mkdirSync, rmSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { acquirePlan, rawCachePath, type AcquireOptions } from '../sources/acquire.ts';
import type { Catalog, LoadedPlan } from '../catalog/catalog.ts';
import { checkDeclared, checkPaired } from '../references/equivalences.ts';
import { UserError } from '../core/errors.ts';
import { digest } from '../core/hashing.ts';
import type { Settings } from '../core/settings.ts';
import { manifestPath, prepareInto, PREPARED_FILES, readManifest, SourceManifest, type PreparedNeed } from '../sources/prepare.ts';
import { insideRoot, lstatOrNothing, readRegularFile, regularFileSha256, removeStaleEntries } from '../core/containment.ts';
import { PREPARE_TIMEOUT_SECONDS } from '../execution/executor.ts';
import { WorkerPool } from '../execution/local/local-pool.ts';
import type { PythonWorker } from '../execution/python-worker.ts';
import { hasPublished, publishedPreparedSha256, publishedSource } from '../catalog/published.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { conditionEntry, ReferenceStore } from '../references/store.ts';

export type CheckState = 'ok' | 'FAIL' | 'missing' | 'n/a';

export interface SourceAudit {
  source: string;
  /** `reprepared` is 'n/a' unless the source was re-prepared (auditWithReprepare). */
  checks: Record<'manifest' | 'plan' | 'raw' | 'prepared' | 'reprepared' | 'published' | 'equivalences', CheckState>;
  problems: string[];
  notes: string[];
}

/** A source manifest larger than this is refused unread. */
const MANIFEST_MAX_BYTES = 16 << 20;

/** sha256 of a regular file, streamed; a link, FIFO, device or folder is recorded in `problems` (undefined returned), never opened. */
function hashOrProblem(path: string, what: string, problems: string[]): string | undefined {
  try {
    return regularFileSha256(path, what);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    problems.push(error.message);
    return undefined;
  }
}

/** Facts compared with the published source block when both have them. */
const COUNT_FIELDS = [
  'raw_rows',
  'rows',
  'removed_duplicate_feature_label_rows',
  'train_rows',
  'evaluation_rows',
  'feature_group_overlap',
  'series_length',
  'training_stop_exclusive',
  'evaluation_points',
  'causally_forward_filled_points',
  'input_sha256',
  'reference_sha256',
  'corpus_rows',
  'corpus_documents',
  'evaluation_queries',
  'query_ids_sha256',
];

export function auditSource(settings: Settings, loaded: LoadedPlan): SourceAudit {
  const { paths } = settings;
  const { plan } = loaded;
  const audit: SourceAudit = {
    source: plan.source,
    checks: { manifest: 'ok', plan: 'ok', raw: 'ok', prepared: 'ok', reprepared: 'n/a', published: 'n/a', equivalences: 'n/a' },
    problems: [],
    notes: [],
  };
  const path = manifestPath(paths, plan.source);
  if (!existsSync(path)) {
    audit.checks = {
      manifest: 'missing',
      plan: 'n/a',
      raw: 'n/a',
      prepared: 'n/a',
      reprepared: 'n/a',
      published: 'n/a',
      equivalences: 'n/a',
    };
    audit.problems.push(`${path} does not exist; run 'wwref prepare --source ${plan.source}'`);
    return audit;
  }
  let manifest: SourceManifest;
  try {
    const parsed = SourceManifest.safeParse(JSON.parse(readRegularFile(path, 'source manifest', MANIFEST_MAX_BYTES).toString('utf8')));
    if (!parsed.success) throw new Error(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    manifest = parsed.data;
  } catch (error) {
    audit.checks = { manifest: 'FAIL', plan: 'n/a', raw: 'n/a', prepared: 'n/a', reprepared: 'n/a', published: 'n/a', equivalences: 'n/a' };
    audit.problems.push(`${path} is malformed: ${(error as Error).message}`);
    return audit;
  }
  const { content_sha256, ...body } = manifest;
  const recomputed = digest(body);
  if (recomputed !== content_sha256) {
    audit.checks.manifest = 'FAIL';
    audit.problems.push(`${path} was edited after it was written: content_sha256 ${content_sha256}, recomputed ${recomputed}`);
  }

  if (manifest.plan.sha256 !== loaded.sha256) {
    audit.checks.plan = 'FAIL';
    audit.problems.push(
      `${loaded.file} changed after ${path} was written: manifest plan sha256 ${manifest.plan.sha256}, plan now ${loaded.sha256}`,
    );
  }

  const planFiles = new Map(plan.raw_files.map((f) => [f.name, f.sha256]));
  for (const raw of manifest.raw_files) {
    if (planFiles.get(raw.name) !== raw.sha256) {
      audit.checks.raw = 'FAIL';
      audit.problems.push(`raw file ${raw.name}: manifest sha256 ${raw.sha256}, plan ${planFiles.get(raw.name) ?? '(not in plan)'}`);
    }
    const cached = rawCachePath(settings, raw.sha256);
    if (!lstatOrNothing(cached)) {
      if (audit.checks.raw === 'ok') audit.checks.raw = 'missing';
      audit.notes.push(`raw file ${raw.name} is not in the cache (${cached}); run 'wwref acquire --source ${plan.source}'`);
      continue;
    }
    // a regular file only, streamed: a link (to /dev/zero, say), FIFO or device is a problem, never read
    const actual = hashOrProblem(cached, 'raw cache file', audit.problems);
    if (actual === undefined) audit.checks.raw = 'FAIL';
    else if (actual !== raw.sha256) {
      audit.checks.raw = 'FAIL';
      audit.problems.push(`raw cache file ${cached} (${raw.name}) changed: expected ${raw.sha256}, got ${actual}`);
    }
  }

  const folder = join(paths.prepared, plan.source);
  for (const name of PREPARED_FILES) {
    const file = join(folder, name);
    const expected = manifest.prepared_files[name];
    if (!lstatOrNothing(file)) {
      audit.checks.prepared = 'missing';
      audit.problems.push(`prepared file ${file} is missing; run 'wwref prepare --source ${plan.source}'`);
      continue;
    }
    const actual = hashOrProblem(file, 'prepared file', audit.problems);
    if (actual === undefined) audit.checks.prepared = 'FAIL';
    else if (actual !== expected) {
      audit.checks.prepared = 'FAIL';
      audit.problems.push(`prepared file ${file} changed: manifest ${expected}, file ${actual}`);
    }
  }

  if (hasPublished(paths.published)) {
    audit.checks.published = 'ok';
    const claimed = plan.published.prepared_match;
    for (const name of PREPARED_FILES) {
      const published = publishedPreparedSha256(paths.published, plan.source, name);
      if (!published) continue;
      const ours = manifest.prepared_files[name];
      const identical = ours === published;
      if (claimed === 'byte_identical' && !identical) {
        audit.checks.published = 'FAIL';
        audit.problems.push(`${name}: the plan claims byte identity with the published file, but ${ours} != published ${published}`);
      } else if (claimed !== 'byte_identical' && identical) {
        audit.notes.push(`${name} is byte-identical to the published file although the plan says '${claimed}'`);
      } else if (!identical) {
        audit.notes.push(`${name} differs from the published file, as the plan declares (${claimed})`);
      }
    }
    const condition = plan.conditions[0]?.id;
    const facts = publishedSource(paths.published, condition ?? '');
    if (facts) {
      for (const field of COUNT_FIELDS) {
        if (!(field in facts) || !(field in manifest.facts)) continue;
        const ours = JSON.stringify(manifest.facts[field]);
        const theirs = JSON.stringify(facts[field]);
        if (ours === theirs) continue;
        if (plan.published.comparable) {
          audit.checks.published = 'FAIL';
          audit.problems.push(`fact ${field}: ours ${ours}, published ${theirs}`);
        } else {
          audit.notes.push(`fact ${field}: ours ${ours}, published ${theirs} (not comparable, as the plan declares)`);
        }
      }
    }
  }
  auditEquivalences(settings, loaded, audit);
  return audit;
}

/** Declared equivalences and paired subcubes, checked on the source's reference tables (if built). */
function auditEquivalences(settings: Settings, loaded: LoadedPlan, audit: SourceAudit): void {
  const store = new ReferenceStore(settings.paths.references, settings.paths);
  const dir = store.dir;
  const manifest = store.manifest();
  const tables = new Map<string, ReferenceRecord[]>();
  // a table the manifest names is read through the store (sha256 and surface checked): a bad one is a problem here
  const records = (id: string) => {
    if (!manifest || !conditionEntry(manifest, id)) return undefined;
    if (!tables.has(id)) tables.set(id, store.table(id, manifest).records);
    return tables.get(id);
  };
  for (const condition of loaded.plan.conditions) {
    let rows: ReferenceRecord[] | undefined;
    let four: ReferenceRecord[] | undefined;
    try {
      rows = records(condition.id);
      four = rows && condition.paired_with ? records(condition.paired_with) : undefined;
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      audit.checks.equivalences = 'FAIL';
      audit.problems.push((error as Error).message);
      continue;
    }
    if (!rows) continue;
    if (audit.checks.equivalences === 'n/a') audit.checks.equivalences = 'ok';
    const violations = checkDeclared(condition.id, condition.equivalences, rows);
    if (four) violations.push(...checkPaired(condition.id, condition.paired_with!, rows, four));
    for (const v of violations) {
      audit.checks.equivalences = 'FAIL';
      audit.problems.push(
        `${join(dir, `${condition.id}.arrow`)}: ${v.declaration} violated by masks ${v.masks.join(' and ')} (${v.detail})`,
      );
    }
  }
}

/**
 * The prepared inputs an audit of `sources` reads: each source manifest's prepared files, for the
 * sources whose plan is still the one the manifest records (a changed plan is the audit's finding,
 * not something to prepare around). For prepareMissing() before auditCatalog().
 */
export function auditNeeds(settings: Settings, catalog: Catalog, sources: readonly string[] = []): PreparedNeed[] {
  return catalog.selectSources(sources).flatMap((loaded) => {
    try {
      const manifest = readManifest(settings.paths, loaded.plan.source);
      return manifest.plan.sha256 === loaded.sha256
        ? [{ source: loaded.plan.source, planFile: loaded.file, planSha256: manifest.plan.sha256, files: manifest.prepared_files }]
        : [];
    } catch {
      return []; // no or a malformed manifest: reported by the audit
    }
  });
}

/** The prepared inputs a replay of `conditions` in reference folder `dir` reads (prepareMissing() before replay()). */
export function replayNeeds(settings: Settings, dir: string, conditions: readonly string[] = []): PreparedNeed[] {
  const store = new ReferenceStore(dir, settings.paths);
  return store.select(store.requireManifest(), [...conditions]).map(([, entry]) => ({
    source: entry.source,
    planFile: entry.plan_file,
    planSha256: entry.plan_sha256,
    files: entry.prepared_files,
  }));
}

export function auditCatalog(settings: Settings, catalog: Catalog, sources: readonly string[] = []): SourceAudit[] {
  return catalog.selectSources(sources).map((loaded) => auditSource(settings, loaded));
}

export function auditFailed(audit: SourceAudit): boolean {
  return audit.problems.length > 0;
}

/** The outcome of re-preparing one source: the `reprepared` check and what it found. */
export interface Reprepared {
  state: CheckState;
  problems: string[];
  notes: string[];
}

export interface ReprepareOptions extends AcquireOptions {
  /** Sources re-prepared at once, one worker each (default 1). */
  workers?: number;
  /** One line per source as it is done (and one before the first). */
  log?: (line: string) => void;
}

/** <cache>/audit: the folders sources are re-prepared into, `<source>.audit-<pid>`. */
export function auditFolder(settings: Settings): string {
  return join(settings.paths.cache, 'audit');
}

const AUDIT_ENTRY = /^[a-z][a-z0-9_]*\.audit-(\d+)$/;

/** Removes a folder of this process (a link is unlinked, not followed). */
function removeOwn(path: string): void {
  const stats = lstatSync(path, { throwIfNoEntry: false });
  if (!stats) return;
  if (stats.isDirectory()) rmSync(path, { recursive: true, force: true });
  else unlinkSync(path);
}

/** The sha256 of a file, or why there is none ('missing', or the refusal of a link, FIFO, …). */
function fileState(path: string, what: string): { sha256?: string; problem?: string } {
  try {
    if (!lstatSync(path, { throwIfNoEntry: false })) return { problem: 'missing' };
    return { sha256: regularFileSha256(path, what) };
  } catch (error) {
    if (!(error instanceof UserError) && !(error as NodeJS.ErrnoException).code) throw error;
    return { problem: (error as Error).message };
  }
}

const shown = (value: unknown) => {
  const text = JSON.stringify(value) ?? 'absent';
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
};

/**
 * Re-prepares one source on `worker` from its raw files (cache, else mirrors, package, upstream, as
 * prepare acquires them) and its plan into its own folder under <cache>/audit, and compares each
 * prepared file and the facts with prepared/<source>/ and the manifest. The folder is removed
 * whatever happens.
 */
async function reprepareSource(
  loaded: LoadedPlan,
  manifest: SourceManifest,
  worker: PythonWorker,
  versions: Record<string, string>,
  options: AcquireOptions,
): Promise<Reprepared> {
  const { plan } = loaded;
  const result: Reprepared = { state: 'ok', problems: [], notes: [] };
  let raw: Record<string, string>;
  try {
    const acquired = await acquirePlan(plan, options);
    for (const f of acquired.filter((a) => a.origin !== 'cache'))
      result.notes.push(`raw file ${f.name} was not in the cache: acquired from ${f.origin} ${f.from}`);
    raw = Object.fromEntries(acquired.map((f) => [f.name, f.path]));
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    const message = error.message
      .split('\n')
      .map((line) => line.trim())
      .join(' ');
    return {
      state: 'missing',
      problems: [
        `not re-prepared, its raw files cannot be acquired: ${message}; ` +
          `put them under a mirror folder (--mirror DIR) and run 'wwref acquire --source ${plan.source}'`,
      ],
      notes: result.notes,
    };
  }
  const folder = insideRoot(auditFolder(options.settings), `${plan.source}.audit-${process.pid}`, 'audit folder of source');
  removeOwn(folder);
  mkdirSync(folder, { recursive: true });
  try {
    const { facts, preparedFiles } = await prepareInto(plan, worker, raw, folder);
    const prepared = join(options.settings.paths.prepared, plan.source);
    for (const name of PREPARED_FILES) {
      const fresh = preparedFiles[name]!;
      const recorded = manifest.prepared_files[name];
      const file = join(prepared, name);
      const present = fileState(file, 'prepared file');
      const differences: string[] = [];
      if (present.sha256 !== undefined && present.sha256 !== fresh) differences.push(`${file} has ${present.sha256}`);
      if (recorded !== fresh) differences.push(`${manifestPath(options.settings.paths, plan.source)} records ${recorded ?? 'no sha256'}`);
      if (differences.length)
        result.problems.push(`${name} re-prepared from the raw files and plan has sha256 ${fresh}, but ${differences.join(' and ')}`);
      if (present.problem) result.notes.push(`${file} could not be compared with the re-prepared file: ${present.problem}`);
    }
    const fields = [...new Set([...Object.keys(manifest.facts), ...Object.keys(facts)])].sort();
    const changed = fields.filter(
      (field) => !(field in manifest.facts) || !(field in facts) || digest(manifest.facts[field]) !== digest(facts[field]),
    );
    for (const field of changed)
      result.problems.push(
        `fact ${field}: ${manifestPath(options.settings.paths, plan.source)} records ${shown(manifest.facts[field])}, ` +
          `re-prepared ${shown(facts[field])}`,
      );
    if (result.problems.length) {
      result.state = 'FAIL';
      const drift = Object.keys({ ...manifest.versions, ...versions }).filter((v) => manifest.versions[v] !== versions[v]);
      if (drift.length)
        result.notes.push(
          `re-prepared with ${drift.map((v) => `${v} ${versions[v] ?? '(none)'}`).join(', ')}; ` +
            `the manifest was written with ${drift.map((v) => `${v} ${manifest.versions[v] ?? '(none)'}`).join(', ')}: ` +
            `other versions may explain a difference`,
        );
    }
    return result;
  } finally {
    removeOwn(folder);
  }
}

/** The manifest to compare a re-prepared source with, or why it is not re-prepared (another check reports it). */
function reprepareTarget(settings: Settings, loaded: LoadedPlan): { manifest: SourceManifest } | { reason: string } {
  let manifest: SourceManifest;
  try {
    const path = manifestPath(settings.paths, loaded.plan.source);
    manifest = SourceManifest.parse(JSON.parse(readRegularFile(path, 'source manifest', MANIFEST_MAX_BYTES).toString('utf8')));
  } catch {
    return { reason: 'not re-prepared: no readable source manifest to compare with (see manifest)' };
  }
  if (manifest.plan.sha256 !== loaded.sha256)
    return {
      reason: 'not re-prepared: its plan changed since the manifest was written (see plan), so the recorded input cannot be made again',
    };
  const changed = loaded.plan.raw_files.filter((file) => {
    const cached = fileState(rawCachePath(settings, file.sha256), 'raw cache entry');
    return cached.problem ? cached.problem !== 'missing' : cached.sha256 !== file.sha256;
  });
  if (changed.length)
    return {
      reason: `not re-prepared: the raw cache holds a changed ${changed.map((f) => f.name).join(', ')} (see raw), which the audit leaves as it is`,
    };
  return { manifest };
}

/**
 * Re-prepares each source from its raw files and plan (reprepareSource), `workers` at once, and
 * returns the `reprepared` check per source. A source without a readable manifest, whose plan
 * changed, or whose raw cache entry changed is left out ('n/a', with the reason as a note): those
 * checks fail on their own.
 */
export async function reprepareSources(plans: readonly LoadedPlan[], options: ReprepareOptions): Promise<Map<string, Reprepared>> {
  const log = options.log ?? (() => {});
  const results = new Map<string, Reprepared>();
  const due: [LoadedPlan, SourceManifest][] = [];
  for (const loaded of plans) {
    const target = reprepareTarget(options.settings, loaded);
    if ('reason' in target) results.set(loaded.plan.source, { state: 'n/a', problems: [], notes: [target.reason] });
    else due.push([loaded, target.manifest]);
  }
  if (!due.length) return results;
  const folder = auditFolder(options.settings);
  mkdirSync(folder, { recursive: true });
  removeStaleEntries(folder, AUDIT_ENTRY);
  const workers = Math.max(1, Math.min(options.workers ?? 1, due.length));
  log(
    `re-preparing ${due.length} source(s) from their raw files and plans (${workers} worker(s)) to compare with prepared/ and the source manifests`,
  );
  const pool = new WorkerPool(workers, { settings: options.settings });
  const started = new Map<string, number>();
  let done = 0;
  try {
    const hello = await pool.hello();
    const versions = { python: hello.python, ...hello.versions };
    await Promise.all(
      due.map(([loaded, manifest]) =>
        pool
          .submit((worker) => {
            started.set(loaded.plan.source, performance.now());
            return reprepareSource(loaded, manifest, worker, versions, options);
          }, PREPARE_TIMEOUT_SECONDS)
          .catch((error: Error): Reprepared => ({ state: 'FAIL', problems: [`could not be re-prepared: ${error.message}`], notes: [] }))
          .then((outcome) => {
            results.set(loaded.plan.source, outcome);
            const summary =
              outcome.state === 'ok'
                ? 'identical to prepared/ and the manifest'
                : `${outcome.state}: ${outcome.problems.length} problem(s)`;
            const seconds = (performance.now() - (started.get(loaded.plan.source) ?? performance.now())) / 1000;
            log(`re-prepared ${loaded.plan.source} (${++done}/${due.length}): ${summary} (${seconds.toFixed(1)} s)`);
          }),
      ),
    );
  } finally {
    await pool.close();
  }
  return results;
}

/**
 * The audit `wwref audit` runs: each selected source re-prepared from its raw files and plan
 * (reprepareSources; a raw file missing from the cache is acquired first), then every check of
 * auditSource, with the `reprepared` column and its problems and notes added.
 */
export async function auditWithReprepare(catalog: Catalog, sources: readonly string[], options: ReprepareOptions): Promise<SourceAudit[]> {
  const plans = catalog.selectSources(sources);
  const reprepared = await reprepareSources(plans, options);
  return plans.map((loaded) => {
    const audit = auditSource(options.settings, loaded);
    const outcome = reprepared.get(loaded.plan.source);
    if (outcome) {
      audit.checks.reprepared = outcome.state;
      audit.problems.push(...outcome.problems);
      audit.notes.push(...outcome.notes);
    }
    return audit;
  });
}
