// Preparation: raw files (acquired) -> prepared/<source>/{arrays.npz, metadata.json.gz} by the plan's
// recipe in a Python worker, then manifests/<source>.json (raw identities, facts, prepared hashes).
// The recipe writes into prepared/<source>.staging-<pid>, renamed into place on success; the staging
// (and .old-<pid>) folders a killed prepare left behind are removed by the next prepare of the source.
import { existsSync, lstatSync, mkdirSync, renameSync, rmSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as z from 'zod';
import type { AcquireOptions } from './acquire.ts';
import { loadPlanFile, planFilePath, type LoadedPlan } from '../catalog/catalog.ts';
import { UserError } from '../core/errors.ts';
import { insideRoot, lstatOrNothing, regularFileSha256, removeStaleEntries } from '../core/containment.ts';
import { writeJsonAtomic, readJsonFile } from '../core/fsutil.ts';
import { canonicalJson, digest } from '../core/hashing.ts';
import type { Paths } from '../core/settings.ts';
import { ID_RULE, isValidId, type Plan } from '../catalog/plan.ts';
import { PREPARE_TIMEOUT_SECONDS } from '../execution/executor.ts';
import type { PythonWorker } from '../execution/python-worker.ts';

export const PREPARED_FILES = ['arrays.npz', 'metadata.json.gz'] as const;

export const SourceManifest = z.strictObject({
  manifest_version: z.literal(1),
  source: z.string(),
  family: z.string(),
  plan: z.strictObject({ file: z.string(), sha256: z.string() }),
  recipe: z.strictObject({ kind: z.string(), params: z.record(z.string(), z.unknown()) }),
  raw_files: z.array(z.strictObject({ name: z.string(), sha256: z.string(), bytes: z.number() })),
  facts: z.record(z.string(), z.unknown()),
  prepared_files: z.record(z.string(), z.string()),
  versions: z.record(z.string(), z.string()),
  /** digest of every other field: a manifest edited by hand no longer matches. */
  content_sha256: z.string(),
});
export type SourceManifest = z.infer<typeof SourceManifest>;

/** A source id as a file name: refused unless it follows the id rule (catalog/plan.ts). */
function sourceName(source: string): string {
  if (!isValidId(source))
    throw new UserError(`invalid source id '${source.length > 80 ? `${source.slice(0, 80)}…` : source}': expected ${ID_RULE}`);
  return source;
}

export function manifestPath(paths: Pick<Paths, 'manifests'>, source: string): string {
  return join(paths.manifests, `${sourceName(source)}.json`);
}

/**
 * Removes prepared/<source>.staging-<pid> and prepared/<source>.old-<pid> of processes that no longer
 * exist (a killed prepare); a link is removed itself, never followed. Returns the removed paths.
 */
export function removeStaleStaging(paths: Pick<Paths, 'prepared'>, source: string): string[] {
  return removeStaleEntries(paths.prepared, new RegExp(`^${sourceName(source)}\\.(?:staging|old)-(\\d+)$`));
}

/** Removes a folder of this process (a link is unlinked, not followed). */
function removeOwn(path: string): void {
  const stats = lstatSync(path, { throwIfNoEntry: false });
  if (!stats) return;
  if (stats.isDirectory()) rmSync(path, { recursive: true, force: true });
  else unlinkSync(path);
}

export function hashPreparedFiles(folder: string): Record<string, string> {
  const hashes: Record<string, string> = {};
  for (const name of PREPARED_FILES) {
    const path = join(folder, name);
    if (!lstatOrNothing(path)) throw new UserError(`prepared input is missing ${path}; run 'wwref prepare'`);
    hashes[name] = regularFileSha256(path, 'prepared input'); // streamed; a link, FIFO or device is refused unopened
  }
  return hashes;
}

export function sealManifest(body: Omit<SourceManifest, 'content_sha256'>): SourceManifest {
  return { ...body, content_sha256: digest(body) };
}

export function readManifest(paths: Pick<Paths, 'manifests'>, source: string): SourceManifest {
  const path = manifestPath(paths, source);
  if (!existsSync(path)) throw new UserError(`source manifest not found: ${path}; run 'wwref prepare --source ${source}'`);
  const parsed = SourceManifest.safeParse(readJsonFile(path, 'source manifest'));
  if (!parsed.success) throw new UserError(`source manifest ${path} is malformed: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

export interface PrepareSourceOptions extends AcquireOptions {
  /**
   * The prepared-file hashes a manifest already records (replay, audit): the new files must have
   * exactly these, or nothing is kept; an existing source manifest is then left as it is.
   */
  expected?: Readonly<Record<string, string>>;
}

/**
 * Runs the plan's recipe on `worker` over its raw files (name -> acquired path) into the folder `out`,
 * made empty by the caller: the one preparation path, of prepare (into its staging folder) and of
 * audit (into a folder of its own, compared with prepared/). Returns the recipe's facts and the sha256
 * of each prepared file.
 */
export async function prepareInto(
  plan: Plan,
  worker: PythonWorker,
  raw: Readonly<Record<string, string>>,
  out: string,
): Promise<{ facts: Record<string, unknown>; preparedFiles: Record<string, string> }> {
  const facts = await worker.prepare(plan.preparation.recipe, plan.preparation.params, { ...raw }, out);
  return { facts, preparedFiles: hashPreparedFiles(out) };
}

/** Prepares one source on `worker`, replacing prepared/<source>/ and its manifest only on success. */
export async function prepareSource(
  loaded: LoadedPlan,
  worker: PythonWorker,
  versions: Record<string, string>,
  options: PrepareSourceOptions,
): Promise<SourceManifest> {
  const { plan } = loaded;
  // every path written below must stay inside prepared/ and manifests/, links resolved
  const { paths } = options.settings;
  const final = insideRoot(paths.prepared, sourceName(plan.source), 'prepared folder of source');
  const manifestFile = insideRoot(paths.manifests, `${plan.source}.json`, 'source manifest');
  // loaded when a source is prepared, not by the many readers of its manifests (it starts Python)
  const { acquirePlan } = await import('./acquire.ts');
  const acquired = await acquirePlan(plan, options);
  const raw = Object.fromEntries(acquired.map((f) => [f.name, f.path]));
  mkdirSync(dirname(final), { recursive: true });
  removeStaleStaging(paths, plan.source);
  const staging = `${final}.staging-${process.pid}`;
  removeOwn(staging);
  mkdirSync(staging);
  try {
    const { facts, preparedFiles } = await prepareInto(plan, worker, raw, staging);
    const differing = Object.entries(options.expected ?? {}).filter(([name, sha]) => preparedFiles[name] !== sha);
    if (differing.length) {
      throw new UserError(
        `the prepared input of ${plan.source} made here differs from the one the manifest records ` +
          `(${differing.map(([name, sha]) => `${name}: ${preparedFiles[name] ?? 'missing'}, expected ${sha}`).join('; ')}); nothing was kept`,
      );
    }
    const manifest = sealManifest({
      manifest_version: 1,
      source: plan.source,
      family: plan.family,
      plan: { file: loaded.file, sha256: loaded.sha256 },
      recipe: { kind: plan.preparation.recipe, params: plan.preparation.params },
      raw_files: acquired.map(({ name, sha256, bytes }) => ({ name, sha256, bytes })),
      facts,
      prepared_files: preparedFiles,
      versions,
    });
    const old = `${final}.old-${process.pid}`;
    removeOwn(old);
    if (lstatSync(final, { throwIfNoEntry: false })) renameSync(final, old);
    renameSync(staging, final);
    removeOwn(old);
    if (!options.expected || !existsSync(manifestFile)) {
      const kept = unchangedManifest(manifestFile, manifest);
      if (kept) return kept;
      writeJsonAtomic(manifestFile, manifest);
    }
    return manifest;
  } finally {
    removeOwn(staging);
  }
}

export interface PrepareOutcome {
  source: string;
  ok: boolean;
  manifest?: SourceManifest;
  error?: string;
}

/** Prepares several sources over a worker pool; a failure of one source does not stop the others. */
/**
 * The source manifest in place when it says what `fresh` says of the same bytes (intact, same plan,
 * raw files, facts and prepared hashes; only the versions that prepared it may differ): it is kept
 * byte for byte, so preparing again under another runtime leaves the committed manifests as they are.
 */
function unchangedManifest(file: string, fresh: SourceManifest): SourceManifest | undefined {
  let old: SourceManifest;
  try {
    const parsed = SourceManifest.safeParse(readJsonFile(file, 'source manifest'));
    if (!parsed.success) return undefined;
    old = parsed.data;
  } catch {
    return undefined;
  }
  const body = ({ versions: _v, content_sha256: _c, ...rest }: SourceManifest) => canonicalJson(rest);
  const { content_sha256, ...sealed } = old;
  return digest(sealed) === content_sha256 && body(old) === body(fresh) ? old : undefined;
}

export async function prepareSources(
  plans: LoadedPlan[],
  options: AcquireOptions & {
    workers?: number;
    log?: (line: string) => void;
    expected?: (source: string) => Record<string, string> | undefined;
  },
): Promise<PrepareOutcome[]> {
  const log = options.log ?? (() => {});
  const { WorkerPool } = await import('../execution/local/local-pool.ts'); // as acquirePlan: loaded on use
  const pool = new WorkerPool(options.workers ?? 1, { settings: options.settings });
  try {
    const hello = await pool.hello();
    const versions = { python: hello.python, ...hello.versions };
    return await Promise.all(
      plans.map((loaded) =>
        pool
          .submit(
            (worker) => prepareSource(loaded, worker, versions, { ...options, expected: options.expected?.(loaded.plan.source) }),
            PREPARE_TIMEOUT_SECONDS,
          )
          .then((manifest): PrepareOutcome => {
            log(
              `prepared ${loaded.plan.source}: ${Object.entries(manifest.prepared_files)
                .map(([f, h]) => `${f} ${h.slice(0, 12)}`)
                .join(', ')}`,
            );
            return { source: loaded.plan.source, ok: true, manifest };
          })
          .catch((error: Error): PrepareOutcome => {
            log(`FAILED ${loaded.plan.source}: ${error.message}`);
            return { source: loaded.plan.source, ok: false, error: error.message };
          }),
      ),
    );
  } finally {
    await pool.close();
  }
}

/** A prepared input a manifest names: its source, the plan that makes it and the sha256 of each file. */
export interface PreparedNeed {
  source: string;
  /** The plan file (relative to the repository root, or absolute). */
  planFile: string;
  /** The plan hash the manifest records; a plan that changed since is refused, not prepared. */
  planSha256?: string;
  files: Readonly<Record<string, string>>;
}

/** Whether a prepared file named by `need` is absent from prepared/<source>/. */
export function preparedMissing(paths: Pick<Paths, 'prepared'>, need: PreparedNeed): boolean {
  return Object.keys(need.files).some((name) => !existsSync(join(paths.prepared, need.source, name)));
}

/**
 * Replay and audit: prepares the sources whose prepared files are missing (acquiring their raw files
 * from the cache, mirrors, packages or upstream, as rebuild does) and keeps the result only when
 * every file has the sha256 the manifest records. Returns the sources prepared; a source that cannot
 * be prepared, or comes out different, is a UserError naming it.
 */
export async function prepareMissing(
  needs: readonly PreparedNeed[],
  options: AcquireOptions & { workers?: number; log?: (line: string) => void },
): Promise<string[]> {
  const bySource = new Map<string, PreparedNeed>();
  for (const need of needs)
    if (preparedMissing(options.settings.paths, need) && !bySource.has(need.source)) bySource.set(need.source, need);
  if (!bySource.size) return [];
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const plans = [...bySource.values()].map((need) => {
    const loaded = loadPlanFile(planFilePath(need.planFile));
    if (need.planSha256 && loaded.sha256 !== need.planSha256) {
      throw new UserError(
        `prepared input of ${need.source} is missing and its plan ${need.planFile} changed since the manifest was written ` +
          `(plan sha256 ${loaded.sha256}, recorded ${need.planSha256}): it cannot be made again as recorded`,
      );
    }
    return loaded;
  });
  log(
    `preparing ${plans.length} source(s) whose prepared input is missing: ` +
      `${plans.map((p) => p.plan.source).join(', ')} (checked against the manifest)`,
  );
  // a failure is reported once, by the error below, not also by the pool's log line
  const quiet = (line: string) => (line.startsWith('FAILED ') ? undefined : log(line));
  const outcomes = await prepareSources(plans, {
    ...options,
    workers: Math.min(options.workers ?? 1, plans.length),
    log: quiet,
    expected: (source) => ({ ...bySource.get(source)!.files }),
  });
  const failed = outcomes.filter((o) => !o.ok);
  if (failed.length) throw new UserError(failed.map((o) => `cannot prepare ${o.source}: ${o.error}`).join('; '));
  return outcomes.map((o) => o.source);
}
