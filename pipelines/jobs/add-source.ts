// `wwref add-source PLAN`: a new source from its construction plan, end to end. The plan is validated
// and frozen (its canonical-JSON sha256 recorded) before anything runs; then the one-plan catalog is
// acquired, prepared and executed by rebuild() into a staging folder. Only when every record passed
// and every declared equivalence held are the tables and their manifest entries moved into the target
// reference folder. Undeclared identical prediction hashes are reported as discovered classes.
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { AcquireOptions } from '../sources/acquire.ts';
import { Catalog, loadPlanFile, planFilePath, readPlanText, type LoadedPlan } from '../catalog/catalog.ts';
import { equivalenceClasses } from '../references/equivalences.ts';
import { UserError } from '../core/errors.ts';
import { insideRoot, removeStaleEntries } from '../core/containment.ts';
import { inactivePairs } from '../catalog/masks.ts';
import { writeFileAtomic, writeJsonAtomic } from '../core/fsutil.ts';
import { canonicalJson, digest } from '../core/hashing.ts';
import { ROOT } from '../core/paths.ts';
import type { Paths } from '../core/settings.ts';
import { platformDrift } from '../execution/numerics.ts';
import { profileByName } from '../core/profiles.ts';
import { manifestPath, prepareSources } from '../sources/prepare.ts';
import { problemLines, staticCheck } from '../sources/check.ts';
import type { Condition } from '../catalog/plan.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import type { ConditionEntry, ReferenceManifest } from '../references/manifest.ts';
import { conditionEntry, ReferenceStore } from '../references/store.ts';
import { tableFile } from '../references/surface.ts';
import { rebuild, type RebuildSummary } from './rebuild.ts';
import type { ExecutorChoice } from '../execution/executors.ts';

export interface AddSourceOptions extends AcquireOptions {
  /** Target reference folder (default the settings' reference folder). */
  referencesDir?: string;
  /** Rebuild a source already in the target folder; a changed plan is recorded as superseding. */
  force?: boolean;
  workers?: number;
  /** What runs the records (default the local pool). */
  executor?: ExecutorChoice;
  allowVersionDrift?: boolean;
  quiet?: boolean;
  log?: (line: string) => void;
}

export interface DiscoveredClass {
  masks: string[];
  /** Every mask of the class is tied to the others by the plan's declared equivalences. */
  declared: boolean;
}

export interface AddedCondition {
  condition: string;
  dimensions: number;
  records: number;
  failed: number;
  violations: string[];
  classes: DiscoveredClass[];
  nativeSeconds: number;
  table?: string;
  error?: string;
}

export interface AddSourceResult {
  source: string;
  planFile: string;
  /** sha256 of the plan's canonical JSON, computed before anything ran. */
  planSha256: string;
  referencesDir: string;
  /** Plan hashes this build supersedes (recorded in the manifest entries). */
  supersedes: string[];
  conditions: AddedCondition[];
  /** Why nothing was written to the reference folder (empty when the references were written). */
  problems: string[];
  written: boolean;
  records: number;
  wallSeconds: number;
  nativeSeconds: number;
  workers: number;
}

/** Masks a declaration ties together: every mask with the option off where it applies, and its twin with it on. */
function declaredPairs(condition: Condition): [string, string][] {
  return condition.equivalences.flatMap((eq) => inactivePairs(eq, condition.dimensions));
}

/** Observed equivalence classes (identical prediction hashes), each marked as declared or discovered. */
export function discoveredClasses(condition: Condition, records: ReferenceRecord[]): DiscoveredClass[] {
  const parent = new Map<string, string>();
  const find = (m: string): string => {
    let root = m;
    while (parent.has(root) && parent.get(root) !== root) root = parent.get(root)!;
    parent.set(m, root);
    return root;
  };
  for (const [a, b] of declaredPairs(condition)) {
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent.set(ra, rb);
  }
  return equivalenceClasses(records).map((masks) => ({ masks, declared: masks.every((m) => find(m) === find(masks[0]!)) }));
}

function describeClass(c: DiscoveredClass): string {
  return `{${c.masks.join(', ')}}${c.declared ? ' (declared)' : ''}`;
}

/** The same file for two spellings of a path (resolved, links followed where the file exists). */
function samePlanFile(a: string, b: string): boolean {
  const real = (p: string) => {
    const abs = resolve(planFilePath(p));
    try {
      return realpathSync(abs);
    } catch {
      return abs;
    }
  };
  return real(a) === real(b);
}

/** Where a source id or condition id is already in use outside the published catalog. */
interface Claim {
  source: string;
  /** The condition id, for a claim by a reference manifest entry or an example plan's condition. */
  condition?: string;
  planFile: string;
  /** Human description: "sources/examples/diabetes.plan.json", "the reference manifest outputs/examples/manifest.json"... */
  where: string;
  /** A reference manifest entry (the source has references there), not only a plan or a source manifest. */
  added: boolean;
  /** The reference folder of an added claim. */
  folder?: string;
}

function shown(path: string): string {
  const rel = resolve(path).startsWith(`${ROOT}/`) ? resolve(path).slice(ROOT.length + 1) : path;
  return rel;
}

/**
 * The namespaces a new source must not collide with, besides the published catalog: the worked
 * examples (sources/examples/*.plan.json), every reference manifest the project knows (outputs/references,
 * outputs/examples, the default reference folder and the target) and the source manifests (manifests/).
 */
function claims(target: string, targetManifest: ReferenceManifest | undefined, options: AddSourceOptions): Claim[] {
  const found: Claim[] = [];
  const { paths } = options.settings;
  const examples = join(paths.sources, 'examples');
  const exampleFiles = existsSync(examples)
    ? readdirSync(examples)
        .filter((f) => f.endsWith('.plan.json'))
        .sort()
    : [];
  for (const name of exampleFiles) {
    const loaded = loadPlanFile(join(examples, name));
    const where = `the worked example ${loaded.file}`;
    found.push({ source: loaded.plan.source, planFile: loaded.file, where, added: false });
    for (const c of loaded.plan.conditions)
      found.push({ source: loaded.plan.source, condition: c.id, planFile: loaded.file, where, added: false });
  }
  const folders = new Map<string, ReferenceManifest | undefined>();
  for (const dir of [join(ROOT, 'outputs', 'references'), join(ROOT, 'outputs', 'examples'), paths.references, target]) {
    const key = resolve(dir);
    if (!folders.has(key)) folders.set(key, key === resolve(target) ? targetManifest : new ReferenceStore(key, paths).manifest());
  }
  for (const [folder, manifest] of folders) {
    for (const [id, entry] of Object.entries(manifest?.conditions ?? {})) {
      const where = `the reference manifest ${shown(join(folder, 'manifest.json'))}`;
      found.push({ source: entry.source, condition: id, planFile: entry.plan_file, where, added: true, folder });
    }
  }
  const sourceManifests = paths.manifests;
  for (const name of existsSync(sourceManifests)
    ? readdirSync(sourceManifests)
        .filter((f) => f.endsWith('.json'))
        .sort()
    : []) {
    try {
      const manifest = JSON.parse(readFileSync(join(sourceManifests, name), 'utf8')) as { source?: unknown; plan?: { file?: unknown } };
      if (typeof manifest.source === 'string' && typeof manifest.plan?.file === 'string') {
        found.push({
          source: manifest.source,
          planFile: manifest.plan.file,
          where: `the source manifest ${shown(join(sourceManifests, name))}`,
          added: false,
        });
      }
    } catch {
      // a malformed source manifest is reported by audit; it claims nothing here
    }
  }
  return found;
}

/** Refusals that need no computation: ids taken elsewhere, re-adding, changed plans, tables outside the target. */
function checkTarget(loaded: LoadedPlan, target: ReferenceManifest | undefined, options: AddSourceOptions, targetDir: string): string[] {
  const { plan } = loaded;
  const published = Catalog.loadPublished(options.settings.paths.sources);
  const mine = resolve(planFilePath(loaded.file));
  const publishedPlan = published.plans.get(plan.source);
  if (publishedPlan) {
    const same = resolve(planFilePath(publishedPlan.file)) === mine;
    throw new UserError(
      `source '${plan.source}' is ${same ? 'a plan of' : 'already in'} the published catalog (${publishedPlan.file}); ` +
        `'wwref rebuild' rebuilds published sources, add-source only adds new ones (choose another source name)`,
    );
  }
  const known = claims(targetDir, target, options);
  for (const claim of known) {
    if (claim.source === plan.source && !samePlanFile(claim.planFile, loaded.file)) {
      throw new UserError(
        `source '${plan.source}' is already taken by ${claim.where}` +
          `${claim.where.includes(claim.planFile) ? '' : ` (plan ${claim.planFile})`}; choose another source name ` +
          `(only the same plan file can be added again, with --force)`,
      );
    }
  }
  for (const condition of plan.conditions) {
    const taken = published.conditions.get(condition.id);
    if (taken)
      throw new UserError(
        `condition '${condition.id}' is already declared by the published catalog (${taken.plan.file}); choose another condition id`,
      );
    const entry = target && conditionEntry(target, condition.id);
    if (entry && entry.source !== plan.source) {
      throw new UserError(
        `condition '${condition.id}' already holds references of source '${entry.source}' in the target manifest; choose another condition id`,
      );
    }
    const elsewhere = known.find((c) => c.condition === condition.id && c.source !== plan.source);
    if (elsewhere)
      throw new UserError(
        `condition '${condition.id}' is already used by source '${elsewhere.source}' in ${elsewhere.where}; choose another condition id`,
      );
  }
  // the same plan file already added to another reference folder shares prepared/<source>/ and its source manifest
  const addedElsewhere = known.find((c) => c.added && c.source === plan.source && c.folder !== resolve(targetDir));
  if (addedElsewhere && !options.force) {
    throw new UserError(
      `source '${plan.source}' was already added to ${addedElsewhere.folder} from this plan (${addedElsewhere.where}); ` +
        `adding it again rewrites its prepared input and source manifest: pass --force to do so`,
    );
  }
  const existing = Object.entries(target?.conditions ?? {}).filter(([, e]) => e.source === plan.source);
  if (!existing.length) return [];
  // the tables this run may replace or delete: each must resolve inside the target folder (no link out)
  for (const [id] of existing) {
    try {
      insideRoot(targetDir, tableFile(id), `table of condition '${id}'`);
    } catch (error) {
      throw new UserError(`${(error as Error).message}: add-source replaces or deletes only files inside ${targetDir}`);
    }
  }
  const recorded = [...new Set(existing.map(([, e]) => e.plan_sha256))];
  const changed = recorded.filter((h) => h !== loaded.sha256);
  if (!options.force) {
    if (changed.length) {
      throw new UserError(
        `plan of source '${plan.source}' changed after its references were written: the reference manifest ` +
          `records plan sha256 ${changed.join(', ')} ` +
          `(${existing.map(([id]) => id).join(', ')}), the plan is now ${loaded.sha256}. ` +
          `Refusing to overwrite; pass --force to rebuild it and record the supersession`,
      );
    }
    throw new UserError(
      `source '${plan.source}' was already added: the reference manifest holds ${existing.map(([id]) => id).join(', ')} ` +
        `built from this plan (sha256 ${loaded.sha256}); ` +
        `refusing to re-add it (pass --force to rebuild it anyway)`,
    );
  }
  // --force: earlier supersessions are kept, and every recorded hash other than the new one is added.
  const earlier = existing.flatMap(([, e]) => e.supersedes_plan_sha256 ?? []);
  return [...new Set([...earlier, ...changed])].filter((h) => h !== loaded.sha256);
}

/**
 * Numbers written with a fraction or exponent but integral in value (1.0, 2e3): Python reads them as
 * floats and hashes "1.0", JSON.parse as the integer 1, so the plan hash would depend on the reader.
 */
export function ambiguousNumbers(text: string): string[] {
  const outsideStrings = text.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  return (outsideStrings.match(/-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g) ?? []).filter((t) => /[.eE]/.test(t) && Number.isInteger(Number(t)));
}

/** Validates and hashes a plan: the frozen identity add-source records before any execution. */
export function freezePlan(file: string): LoadedPlan {
  const loaded = loadPlanFile(resolve(file));
  const ambiguous = ambiguousNumbers(readPlanText(resolve(file)));
  if (ambiguous.length) {
    throw new UserError(
      `invalid construction plan ${loaded.file}: number(s) ${[...new Set(ambiguous)].join(', ')} are integral but written as floats; ` +
        `write them as integers (e.g. 1 for 1.0) so that the plan sha256 is the same in Python and TypeScript`,
    );
  }
  return loaded;
}

/**
 * The dry run: validation, the frozen hash, the target checks and every static check of the raw files
 * and recipe parameters (sources/check.ts), without running anything. Problems are refused together,
 * one line each with its field path and fix.
 */
export function checkAddSource(planFile: string, options: AddSourceOptions): string[] {
  const loaded = freezePlan(planFile);
  const target = resolve(options.referencesDir ?? options.settings.paths.references);
  const supersedes = checkTarget(loaded, new ReferenceStore(target, options.settings.paths).manifest(), options, target);
  const { plan } = loaded;
  const statics = staticCheck(loaded, options);
  if (statics.problems.length) {
    throw new UserError(
      `construction plan ${loaded.file} has ${statics.problems.length} problem(s) (nothing was run):\n${problemLines(statics.problems).join('\n')}`,
    );
  }
  return [
    `plan ${loaded.file} is valid: source ${plan.source} (${plan.family}), plan sha256 ${loaded.sha256}`,
    ...statics.notes.map((n) => `  ${n}`),
    ...plan.conditions.map(
      (c) =>
        `  ${c.id}: ${c.dimensions} options, ${2 ** c.dimensions} masks, ` +
        `${c.equivalences.length} declared equivalence(s)${c.paired_with ? `, paired with ${c.paired_with}` : ''}`,
    ),
    `target ${target}: ${supersedes.length ? `would supersede plan sha256 ${supersedes.join(', ')}` : 'the source can be added'}`,
  ];
}

/** Step 3: the plan is still the frozen one, every record passed, every declaration held; the discovered classes. */
function verifyStaged(
  planFile: string,
  loaded: LoadedPlan,
  catalog: Catalog,
  summary: RebuildSummary,
  built: ReferenceStore,
): { conditions: AddedCondition[]; problems: string[] } {
  const problems: string[] = [];
  let now = '(missing or not JSON)';
  try {
    now = digest(JSON.parse(readPlanText(resolve(planFile))));
  } catch {
    // reported below
  }
  if (now !== loaded.sha256) problems.push(`the plan changed during the run (frozen sha256 ${loaded.sha256}, now ${now})`);
  const builtManifest = built.manifest();
  const conditions = summary.conditions.map((outcome): AddedCondition => {
    const condition = catalog.condition(outcome.condition).condition;
    const added: AddedCondition = {
      condition: outcome.condition,
      dimensions: condition.dimensions,
      records: outcome.records,
      failed: outcome.failed,
      violations: outcome.violations,
      classes: [],
      nativeSeconds: outcome.nativeSeconds,
      table: outcome.table,
      error: outcome.error,
    };
    if (outcome.error) {
      problems.push(`${outcome.condition}: ${outcome.error}`);
      return added;
    }
    if (outcome.failed) {
      // rebuild writes no table for a condition with a failed record
      problems.push(
        `${outcome.condition}: ${outcome.failed} record(s) failed: ${outcome.failures
          .slice(0, 5)
          .map((f) => `${f.mask} (${f.error})`)
          .join('; ')}`,
      );
      return added;
    }
    added.classes = discoveredClasses(condition, built.table(outcome.condition, builtManifest!).records);
    for (const v of outcome.violations) problems.push(`${outcome.condition}: declared equivalence violated: ${v}`);
    return added;
  });
  return { conditions, problems };
}

/**
 * Step 4: commit under the target's lock, merged into the manifest as it is then (another writer's
 * conditions are kept): the entries of this source replaced, conditions it no longer declares removed.
 */
async function commitStaged(
  store: ReferenceStore,
  built: ReferenceStore,
  loaded: LoadedPlan,
  supersedes: string[],
  options: AddSourceOptions & { log: (line: string) => void },
): Promise<boolean> {
  const { plan } = loaded;
  const builtManifest = built.manifest();
  if (!builtManifest) throw new Error(`rebuild wrote no manifest in ${built.dir}`);
  const ids = new Set(plan.conditions.map((c) => c.id));
  const tables = new Map([...ids].map((id) => [id, readFileSync(join(built.dir, builtManifest.conditions[id]!.table))]));
  for (const id of ids) built.table(id, builtManifest); // the staged tables are what their manifest says
  const committed = await store.commit((current) => {
    // what was checked before the run is checked again against the manifest as it is now
    const again = checkTarget(loaded, current, options, store.dir);
    if (canonicalJson(again) !== canonicalJson(supersedes) && !options.force)
      throw new UserError(`${store.dir} changed during the run; run add-source again`);
    const kept = Object.entries(current?.conditions ?? {}).filter(([id, e]) => e.source !== plan.source && !ids.has(id));
    const mixed = kept.length
      ? platformDrift(current!.numerics, profileByName(builtManifest.numerics!.profile), builtManifest.numerics!.effective)
      : [];
    if (mixed.length)
      throw new UserError(
        `${mixed.join('; ')}: adding to ${store.dir} would mix platforms in one manifest; add the source to another folder (--references)`,
      );
    const stale = Object.entries(current?.conditions ?? {})
      .filter(([id, e]) => e.source === plan.source && !ids.has(id))
      .map(([id]) => id);
    for (const id of stale) options.log(`removed ${id}: no longer declared by the plan`);
    const entries = [...ids].map((id): [string, ConditionEntry] => {
      const entry = builtManifest.conditions[id]!;
      return [id, supersedes.length ? { ...entry, supersedes_plan_sha256: supersedes } : entry];
    });
    return { manifest: { ...builtManifest, conditions: Object.fromEntries([...kept, ...entries]) }, tables, remove: stale };
  });
  return committed !== undefined;
}

/** Step 1: validate and freeze the plan, refuse what must not be overwritten, record the frozen identity. */
function freezeForTarget(planFile: string, store: ReferenceStore, options: AddSourceOptions, log: (line: string) => void) {
  const loaded = freezePlan(planFile);
  const { plan } = loaded;
  const supersedes = checkTarget(loaded, store.manifest(), options, store.dir);
  const frozen = join(options.settings.paths.cache, 'add-source', `${plan.source}.frozen.json`);
  const undo = snapshotSource(options.settings.paths, plan.source, frozen);
  writeJsonAtomic(frozen, {
    source: plan.source,
    plan_file: loaded.file,
    plan_sha256: loaded.sha256,
    references: store.dir,
    force: Boolean(options.force),
    supersedes_plan_sha256: supersedes,
    frozen_at: new Date().toISOString(),
  });
  log(`plan ${loaded.file}: source ${plan.source}, ${plan.conditions.length} condition(s), plan sha256 ${loaded.sha256} (frozen)`);
  return { loaded, supersedes, undo };
}

/**
 * The whole run: freeze (1), prepare and execute every mask into a staging folder (2), verify (3),
 * commit (4). Whatever ends it (a failure, a refusal, Ctrl-C or SIGTERM through the job loop), a run
 * that wrote nothing puts back the source manifest, prepared input and frozen plan it found.
 */
export async function addSource(planFile: string, options: AddSourceOptions): Promise<AddSourceResult> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const started = performance.now();
  const { settings } = options;
  const { paths } = settings;
  const store = new ReferenceStore(options.referencesDir ?? paths.references, paths);
  const { loaded, supersedes, undo } = freezeForTarget(planFile, store, options, log);
  const { plan } = loaded;
  // staging folders of add-source runs that were killed are removed (links unlinked, never followed)
  removeStaleEntries(join(paths.cache, 'add-source'), new RegExp(`^${plan.source}\\.staging-(\\d+)$`));
  const staging = join(paths.cache, 'add-source', `${plan.source}.staging-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  let written = false;
  const identity = { source: plan.source, planFile: loaded.file, planSha256: loaded.sha256, referencesDir: store.dir, supersedes };
  const result = (rest: Pick<AddSourceResult, 'conditions' | 'problems' | 'records' | 'nativeSeconds' | 'workers'>): AddSourceResult => ({
    ...identity,
    ...rest,
    written,
    wallSeconds: (performance.now() - started) / 1000,
  });
  try {
    // Prepare first, on its own: a raw file that cannot be acquired or a recipe error is one problem,
    // reported once (not once per condition), and no execution worker is started for it.
    log(`preparing source ${plan.source}`);
    const [prepared] = await prepareSources([loaded], {
      settings,
      mirrors: options.mirrors,
      online: options.online,
      workers: 1,
      log: (line) => (line.startsWith(`FAILED ${plan.source}:`) ? undefined : log(line)),
    });
    if (!prepared?.ok) {
      const problems = [`source ${plan.source} not prepared: ${prepared?.error ?? 'preparation failed'}`];
      return result({ conditions: [], problems, records: 0, nativeSeconds: 0, workers: 0 });
    }
    const catalog = new Catalog([loaded], paths.manifests);
    const summary = await rebuild(catalog, {
      settings,
      referencesDir: staging,
      workers: options.workers ?? 2,
      mirrors: options.mirrors,
      online: options.online,
      allowVersionDrift: options.allowVersionDrift,
      quiet: options.quiet,
      log,
      executor: options.executor,
    });
    const built = new ReferenceStore(staging, paths);
    const { conditions, problems } = verifyStaged(planFile, loaded, catalog, summary, built);
    if (!problems.length) written = await commitStaged(store, built, loaded, supersedes, { ...options, log });
    return result({ conditions, problems, records: summary.records, nativeSeconds: summary.nativeSeconds, workers: summary.workers });
  } finally {
    rmSync(staging, { recursive: true, force: true });
    if (!written) undo();
  }
}

/**
 * What a failed add-source must put back: the source manifest (restored, or removed if the run
 * created it), prepared/<source>/ if the run created it, and the frozen plan.
 */
function snapshotSource(paths: Paths, source: string, frozen: string): () => void {
  const manifest = manifestPath(paths, source);
  const manifestBefore = existsSync(manifest) ? readFileSync(manifest) : undefined;
  const prepared = join(paths.prepared, source);
  const preparedExisted = existsSync(prepared);
  const frozenBefore = existsSync(frozen) ? readFileSync(frozen) : undefined;
  const restore = (path: string, bytes: Buffer | undefined) => (bytes ? writeFileAtomic(path, bytes) : rmSync(path, { force: true }));
  return () => {
    restore(manifest, manifestBefore);
    restore(frozen, frozenBefore);
    if (!preparedExisted) rmSync(prepared, { recursive: true, force: true });
  };
}

/** What the CLI prints for a finished add-source run. */
export function addSourceLines(result: AddSourceResult): string[] {
  const lines: string[] = [];
  for (const c of result.conditions) {
    const status = c.error ? `NOT BUILT: ${c.error}` : `${c.records - c.failed}/${c.records} ok`;
    lines.push(`${c.condition.padEnd(22)} ${c.dimensions} options  ${status}  native ${c.nativeSeconds.toFixed(1)} s`);
    for (const v of c.violations) lines.push(`    VIOLATED ${v}`);
    const declared = c.classes.filter((k) => k.declared);
    const found = c.classes.filter((k) => !k.declared);
    if (declared.length) lines.push(`    ${declared.length} declared equivalence class(es) observed`);
    if (found.length) {
      lines.push(`    ${found.length} discovered (undeclared) equivalence class(es) of identical prediction hashes:`);
      for (const k of found.slice(0, 12)) lines.push(`      ${describeClass(k)}`);
      if (found.length > 12) lines.push(`      … ${found.length - 12} more`);
    }
  }
  if (result.supersedes.length) lines.push(`supersedes plan sha256 ${result.supersedes.join(', ')}`);
  for (const p of result.problems) lines.push(`FAILED ${p}`);
  lines.push(
    result.written
      ? `source ${result.source} added: ${result.records} records in ${result.conditions.length} table(s) written to ${result.referencesDir} ` +
          `(plan sha256 ${result.planSha256}); ` +
          `wall ${result.wallSeconds.toFixed(1)} s, native ${result.nativeSeconds.toFixed(1)} s, ${result.workers} worker(s)`
      : `source ${result.source} NOT added: nothing was written to ${result.referencesDir}`,
  );
  return lines;
}
