// The catalog: every construction plan in sources/ (plus the sources added with `wwref add-source`)
// and the task conditions they declare.
import { closeSync, constants, existsSync, fstatSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { UserError } from '../core/errors.ts';
import { fsError } from '../core/fsutil.ts';
import type { FamilyName } from './families.ts';
import { digest } from '../core/hashing.ts';
import { parsePlan, type Condition, type Plan } from './plan.ts';
import { MANIFESTS_DIR, ROOT, SOURCES_DIR } from '../core/paths.ts';

export interface LoadedPlan {
  plan: Plan;
  /** Path relative to the repository root. */
  file: string;
  /** sha256 of the plan's canonical JSON (sorted keys, compact): the frozen identity of the plan. */
  sha256: string;
}

export interface CatalogCondition {
  id: string;
  source: string;
  family: FamilyName;
  dimensions: 4 | 6;
  condition: Condition;
  plan: LoadedPlan;
}

/** Largest construction plan wwref reads: 1 MiB (the committed plans are a few kB). */
export const MAX_PLAN_BYTES = 1024 ** 2;

/** Number (1-based) of the first line of `bytes` that is not valid UTF-8 (a newline byte is never inside a character). */
function firstBadLine(bytes: Buffer): number {
  const strict = new TextDecoder('utf-8', { fatal: true });
  let line = 1;
  for (let start = 0; ; line++) {
    const end = bytes.indexOf(0x0a, start);
    try {
      strict.decode(bytes.subarray(start, end < 0 ? bytes.length : end));
    } catch {
      return line;
    }
    if (end < 0) return line;
    start = end + 1;
  }
}

/**
 * The text of a construction plan file, the one way every stage reads one: a regular file (a FIFO or
 * device named by a manifest is refused unopened, never waited on), at most MAX_PLAN_BYTES (never read
 * further), strict UTF-8 without a byte-order mark. Anything else is a one-line UserError.
 */
export function readPlanText(file: string): string {
  const buffer = Buffer.allocUnsafe(MAX_PLAN_BYTES + 1);
  let length = 0;
  let fd: number | undefined;
  try {
    const stats = statSync(file, { throwIfNoEntry: false });
    if (!stats) throw new UserError(`construction plan not found: ${file}`);
    if (!stats.isFile()) throw new UserError(`construction plan ${file} is not a regular file`);
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
    if (!fstatSync(fd).isFile()) throw new UserError(`construction plan ${file} is not a regular file`);
    let n: number;
    do {
      n = readSync(fd, buffer, length, buffer.length - length, null);
      length += n;
    } while (n > 0 && length < buffer.length);
  } catch (error) {
    throw fsError(error, 'read construction plan', file);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  if (length > MAX_PLAN_BYTES)
    throw new UserError(`construction plan ${file} is larger than ${MAX_PLAN_BYTES} bytes (1 MiB), the most a plan may have; refused`);
  const bytes = buffer.subarray(0, length);
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf)
    throw new UserError(`construction plan ${file} starts with a UTF-8 byte-order mark; save it as UTF-8 without one`);
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new UserError(`construction plan ${file} is not UTF-8 text (line ${firstBadLine(bytes)}); save it as UTF-8`);
  }
}

export function loadPlanFile(file: string): LoadedPlan {
  const text = readPlanText(file);
  const rel = relative(ROOT, file);
  const plan = parsePlan(rel.startsWith('..') ? file : rel, text);
  // relative to the repository root; a plan outside the repository keeps its absolute path
  return { plan, file: rel.startsWith('..') ? resolve(file) : rel, sha256: digest(JSON.parse(text)) };
}

function publishedPlanFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.plan.json'))
    .sort()
    .map((f) => join(dir, f));
}

/** Absolute path of a plan_file recorded in a manifest (relative to the repository root, or absolute). */
export function planFilePath(file: string): string {
  return isAbsolute(file) ? file : join(ROOT, file);
}

/** Plans of `files` (recorded plan_file paths) that are not among `known`, nor of a source `known` has. */
function addedPlans(known: LoadedPlan[], planFiles: readonly string[]): LoadedPlan[] {
  const files = new Set(known.map((p) => resolve(planFilePath(p.file))));
  const sources = new Set(known.map((p) => p.plan.source));
  const added: LoadedPlan[] = [];
  for (const file of [...new Set(planFiles)].sort()) {
    const path = resolve(planFilePath(file));
    if (files.has(path) || !existsSync(path)) continue;
    const loaded = loadPlanFile(path);
    if (sources.has(loaded.plan.source)) continue;
    files.add(path);
    sources.add(loaded.plan.source);
    added.push(loaded);
  }
  return added;
}

/** A hint for a source prepared from a plan outside sources/ (added with add-source to another reference folder). */
function addedElsewhere(source: string, manifestsDir: string): string {
  try {
    const manifest = JSON.parse(readFileSync(join(manifestsDir, `${source}.json`), 'utf8')) as { plan?: { file?: string } };
    const file = manifest.plan?.file;
    if (!file) return '';
    return (
      `; '${source}' was prepared from ${file}: if it was added with 'wwref add-source --references DIR', ` +
      `point the commands at that folder with --references DIR`
    );
  } catch {
    return '';
  }
}

export class Catalog {
  readonly plans = new Map<string, LoadedPlan>();
  readonly conditions = new Map<string, CatalogCondition>();

  /** `manifestsDir`: where the source manifests are, for the hint about a source added elsewhere. */
  constructor(
    plans: LoadedPlan[],
    private readonly manifestsDir = MANIFESTS_DIR,
  ) {
    for (const loaded of plans) {
      const { plan } = loaded;
      if (this.plans.has(plan.source)) {
        throw new UserError(`two plans declare source '${plan.source}': ${this.plans.get(plan.source)!.file} and ${loaded.file}`);
      }
      this.plans.set(plan.source, loaded);
      for (const condition of plan.conditions) {
        if (this.conditions.has(condition.id)) throw new UserError(`condition '${condition.id}' is declared twice (${loaded.file})`);
        this.conditions.set(condition.id, {
          id: condition.id,
          source: plan.source,
          family: plan.family,
          dimensions: condition.dimensions,
          condition,
          plan: loaded,
        });
      }
    }
  }

  /** Every sources/*.plan.json: the published catalog only (worked examples live in sources/examples/). */
  static loadPublished(dir = SOURCES_DIR): Catalog {
    return new Catalog(publishedPlanFiles(dir).map((f) => loadPlanFile(f)));
  }

  /**
   * The published catalog plus added sources: the plan files a reference manifest names (plan_file;
   * the store's loadCatalog passes them) that are not sources/*.plan.json. A named plan file that no
   * longer exists, or whose source the published catalog already has, is left out.
   */
  static load(dir = SOURCES_DIR, addedPlanFiles: readonly string[] = [], manifestsDir = MANIFESTS_DIR): Catalog {
    const published = publishedPlanFiles(dir).map((f) => loadPlanFile(f));
    return new Catalog([...published, ...addedPlans(published, addedPlanFiles)], manifestsDir);
  }

  source(name: string): LoadedPlan {
    const plan = this.plans.get(name);
    if (!plan)
      throw new UserError(
        `unknown source '${name}' (known: ${[...this.plans.keys()].join(', ')})${addedElsewhere(name, this.manifestsDir)}`,
      );
    return plan;
  }

  condition(id: string): CatalogCondition {
    const condition = this.conditions.get(id);
    if (!condition) {
      const near = closest(id, [...this.conditions.keys()]);
      throw new UserError(
        `unknown condition '${id}' (${near.length ? `did you mean ${near.join(', ')}? ` : ''}see 'wwref list' for the catalog)`,
      );
    }
    return condition;
  }

  /** Selected conditions (each once; all when none named), in the order named. */
  selectConditions(ids: readonly string[] = []): CatalogCondition[] {
    return ids.length ? [...new Set(ids)].map((id) => this.condition(id)) : [...this.conditions.values()];
  }

  selectSources(names: readonly string[] = []): LoadedPlan[] {
    return names.length ? [...new Set(names)].map((n) => this.source(n)) : [...this.plans.values()];
  }
}

/** The names nearest to a mistyped `word` (edit distance, a swap of two neighbours one edit): at most 3, within max(2, a third of its length) edits. */
export function closest(word: string, names: readonly string[]): string[] {
  const distance = (a: string, b: string) => {
    const d = Array.from({ length: a.length + 1 }, (_, i) =>
      Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
    );
    for (let i = 1; i <= a.length; i++)
      for (let j = 1; j <= b.length; j++) {
        const row = d[i]!;
        row[j] = Math.min(d[i - 1]![j]! + 1, row[j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
        if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
      }
    return d[a.length]![b.length]!;
  };
  const scored = names.map((name) => ({ name, d: distance(word.toLowerCase(), name.toLowerCase()) }));
  const best = Math.min(...scored.map((s) => s.d));
  if (!(best <= Math.max(2, Math.ceil(word.length / 3)))) return [];
  return scored
    .filter((s) => s.d === best)
    .slice(0, 3)
    .map((s) => s.name);
}
