// The reference store: the only reader and writer of a reference folder (manifest.json and one Arrow
// table per condition). Every read is bounded and contained: the manifest and each table are regular
// files inside the folder, read once, no larger than their limits; a table's sha256 is computed from
// the very bytes then decoded, and its surface is checked against the manifest (surface.ts). Every
// write is one commit under the folder's lock (lock.ts): the manifest is read afresh under the lock,
// tables are swapped in, the manifest is written last (the commit point), and what a killed commit
// left behind is rolled back or removed by the next one.
import { lstatSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { insideRoot, lstatOrNothing, processAlive, readRegularFile } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';
import { writeFileAtomic, writeJsonAtomic } from '../core/fsutil.ts';
import { fileSha256, sha256Hex } from '../core/hashing.ts';
import type { Settings } from '../core/settings.ts';
import { Catalog } from '../catalog/catalog.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { checkReferenceFolder, type GuardedPaths } from './folder.ts';
import { lockFolder, LOCK_WAIT_SECONDS } from './lock.ts';
import { ReferenceManifest, type ConditionEntry } from './manifest.ts';
import { manifestProblems, tableFile, tableProblems } from './surface.ts';
import { decodeTable, type LoadedTable } from './tables.ts';

/** A reference manifest larger than this is refused unread (the catalog's is about 60 KiB). */
export const MANIFEST_MAX_BYTES = 32 << 20;
/** A table may hold this much per record (the catalog's largest rows are about 2 KiB), plus a fixed allowance. */
const TABLE_BYTES_PER_RECORD = 256 << 10;
const TABLE_BYTES_FIXED = 1 << 20;
const MANIFEST_FILE = 'manifest.json';

/** Leftovers of an interrupted write: `<name>.<pid>.<ms>.(new|old|tmp)`, possibly with a temporary suffix. */
const LEFTOVER = /^(.+?)\.(\d+)\.(\d+)\.(new|old|tmp)(?:\.\d+\.\d+\.tmp)?$/;

export { checkReferenceFolder, type GuardedPaths } from './folder.ts';

/** The manifest's entry of condition `id`, or undefined: an own key only ('constructor' or 'toString' is no inherited member). */
export function conditionEntry(manifest: ReferenceManifest, id: string): ConditionEntry | undefined {
  return Object.hasOwn(manifest.conditions, id) ? manifest.conditions[id] : undefined;
}

export interface ReferenceChange {
  manifest: ReferenceManifest;
  /** New table bytes by condition. */
  tables: Map<string, Uint8Array>;
  /** Conditions whose tables are removed (they must no longer be in `manifest`). */
  remove?: string[];
}

export class ReferenceStore {
  readonly dir: string;

  constructor(dir: string, paths: GuardedPaths) {
    this.dir = checkReferenceFolder(dir, paths);
  }

  get manifestPath(): string {
    return join(this.dir, MANIFEST_FILE);
  }

  /** The folder's manifest, validated (schema and consistency), or undefined when there is none. */
  manifest(): ReferenceManifest | undefined {
    const path = this.manifestPath;
    if (!lstatOrNothing(path)) return undefined;
    let json: unknown;
    try {
      json = JSON.parse(readRegularFile(path, 'reference manifest', MANIFEST_MAX_BYTES).toString('utf8'));
    } catch (error) {
      if (error instanceof UserError) throw error;
      throw new UserError(`reference manifest ${path} is not JSON: ${(error as Error).message}`);
    }
    const parsed = ReferenceManifest.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new UserError(`reference manifest ${path} is malformed at ${issue.path.join('.')}: ${issue.message}`);
    }
    const problems = manifestProblems(parsed.data);
    if (problems.length) throw new UserError(`reference manifest ${path} is inconsistent: ${summarize(problems)}`);
    return parsed.data;
  }

  /** The manifest, or a UserError saying how to make one. */
  requireManifest(): ReferenceManifest {
    const manifest = this.manifest();
    if (!manifest) throw new UserError(`no reference manifest in ${this.dir}; run 'wwref rebuild' (or pass --references DIR)`);
    return manifest;
  }

  /** The entries of the named conditions (each once; every condition when none is named), refusing an unknown one. */
  select(manifest: ReferenceManifest, conditions: readonly string[] = []): [string, ConditionEntry][] {
    const ids = conditions.length ? [...new Set(conditions)] : Object.keys(manifest.conditions);
    return ids.map((id) => {
      const entry = conditionEntry(manifest, id);
      if (!entry) {
        const known = Object.keys(manifest.conditions);
        const listed = known.length > 8 ? `${known.slice(0, 8).join(', ')}, … (${known.length} in all)` : known.join(', ') || 'nothing';
        throw new UserError(`condition '${id}' is not in the reference manifest ${this.manifestPath} (it lists ${listed})`);
      }
      return [id, entry];
    });
  }

  /** A condition's table: contained, bounded, its sha256 checked on the bytes decoded, its surface checked. */
  table(id: string, manifest: ReferenceManifest): LoadedTable {
    const entry = conditionEntry(manifest, id);
    if (!entry) throw new UserError(`condition '${id}' is not in the reference manifest ${this.manifestPath}`);
    const path = insideRoot(this.dir, entry.table, `reference table of condition '${id}'`);
    // a link in the folder is no table wwref wrote: named as such, not read through (its target is not blamed)
    const named = join(this.dir, entry.table);
    if (lstatOrNothing(named)?.isSymbolicLink())
      throw new UserError(`reference table ${named} is a symbolic link; wwref writes tables as files: replace it by the table itself`);
    const bytes = readRegularFile(path, 'reference table', TABLE_BYTES_FIXED + entry.records * TABLE_BYTES_PER_RECORD);
    const actual = sha256Hex(bytes);
    if (actual !== entry.table_sha256) {
      throw new UserError(
        `reference table changed: ${path} has sha256 ${actual}, the manifest records ${entry.table_sha256}; ` +
          `rebuild the condition, or restore the file`,
      );
    }
    const table = decodeTable(bytes, path, entry.records);
    const problems = tableProblems(id, entry, manifest, table);
    if (problems.length) throw new UserError(`reference table ${path} does not hold what the manifest says: ${summarize(problems)}`);
    return table;
  }

  /** The table of `id` if the manifest names one and it passes every check; undefined otherwise. */
  tableIfValid(id: string, manifest: ReferenceManifest | undefined): LoadedTable | undefined {
    if (!manifest || !conditionEntry(manifest, id)) return undefined;
    try {
      return this.table(id, manifest);
    } catch (error) {
      if (error instanceof UserError) return undefined;
      throw error;
    }
  }

  /** Every record of the selected conditions (all when none named), in manifest order, each table checked. */
  records(conditions: readonly string[] = []): ReferenceRecord[] {
    const manifest = this.requireManifest();
    return this.select(manifest, conditions).flatMap(([id]) => this.table(id, manifest).records);
  }

  /** Plan files the manifest names (for the catalog's added sources), each once, sorted. */
  planFiles(): string[] {
    const manifest = this.manifest();
    return [...new Set(Object.values(manifest?.conditions ?? {}).map((e) => e.plan_file))].sort();
  }

  /**
   * Applies `change(current manifest)` under the folder's lock: the manifest is read afresh (no lost
   * update), leftovers of killed commits are cleaned, then tables are swapped in (old ones kept aside)
   * and the manifest written; if that fails, the old tables are put back. `change` returning undefined
   * writes nothing. Returns the manifest now in the folder.
   */
  async commit(
    change: (current: ReferenceManifest | undefined) => ReferenceChange | undefined,
    options: { waitSeconds?: number } = {},
  ): Promise<ReferenceManifest | undefined> {
    const release = await lockFolder(this.dir, options.waitSeconds ?? LOCK_WAIT_SECONDS);
    try {
      const current = this.manifest();
      this.cleanLeftovers(current);
      const planned = change(current);
      if (!planned) return current;
      for (const id of [...planned.tables.keys(), ...(planned.remove ?? [])])
        insideRoot(this.dir, tableFile(id), `reference table of condition '${id}'`);
      const problems = manifestProblems(planned.manifest);
      if (problems.length) throw new Error(`refusing to write an inconsistent manifest: ${summarize(problems)}`);
      this.swap(planned);
      const written = this.manifest()!;
      for (const id of planned.tables.keys()) this.table(id, written); // what was written reads back whole
      return written;
    } finally {
      release();
    }
  }

  private swap({ manifest, tables, remove = [] }: ReferenceChange): void {
    const tag = `${process.pid}.${Date.now()}`;
    const setAside: { file: string; backup?: string }[] = [];
    try {
      for (const [id, bytes] of tables) {
        const path = join(this.dir, tableFile(id));
        const fresh = `${path}.${tag}.new`;
        writeFileAtomic(fresh, bytes);
        const backup = lstatSync(path, { throwIfNoEntry: false }) ? `${path}.${tag}.old` : undefined;
        if (backup) renameSync(path, backup);
        setAside.push({ file: path, backup });
        renameSync(fresh, path);
      }
      for (const id of remove) {
        const path = join(this.dir, tableFile(id));
        if (!lstatSync(path, { throwIfNoEntry: false })) continue;
        renameSync(path, `${path}.${tag}.old`);
        setAside.push({ file: path, backup: `${path}.${tag}.old` });
      }
      const sorted = Object.fromEntries(Object.entries(manifest.conditions).sort(([a], [b]) => a.localeCompare(b)));
      writeJsonAtomic(this.manifestPath, { ...manifest, conditions: sorted });
    } catch (error) {
      for (const { file, backup } of setAside.reverse()) {
        if (backup) renameSync(backup, file);
        else rmSync(file, { force: true });
      }
      for (const id of tables.keys()) rmSync(join(this.dir, `${tableFile(id)}.${tag}.new`), { force: true });
      throw error;
    }
    for (const { backup } of setAside) if (backup) rmSync(backup, { force: true });
  }

  /**
   * What a killed writer left: a table set aside (`.old`) is put back when the manifest still names
   * its bytes and the file in place is not them (the kill came before the manifest, the commit point);
   * every other leftover of a dead process is removed.
   */
  private cleanLeftovers(current: ReferenceManifest | undefined): void {
    const byTable = new Map(Object.values(current?.conditions ?? {}).map((e) => [e.table, e.table_sha256]));
    for (const name of readdirSync(this.dir)) {
      const match = LEFTOVER.exec(name);
      if (!match || Number(match[2]) === process.pid || processAlive(Number(match[2]))) continue;
      const path = join(this.dir, name);
      if (!lstatSync(path).isFile()) continue;
      const [, base, , , kind] = match;
      const recorded = byTable.get(base!);
      if (kind === 'old' && recorded) {
        const target = join(this.dir, base!);
        const inPlace = lstatSync(target, { throwIfNoEntry: false })?.isFile() ? fileSha256(target) : undefined;
        if (inPlace !== recorded && fileSha256(path) === recorded) {
          renameSync(path, target);
          continue;
        }
      }
      rmSync(path, { force: true });
    }
  }
}

/** The published catalog plus the sources added to the settings' reference folder (the plans its manifest names). */
export function loadCatalog(settings: Settings): Catalog {
  return Catalog.load(
    settings.paths.sources,
    new ReferenceStore(settings.paths.references, settings.paths).planFiles(),
    settings.paths.manifests,
  );
}

/** At most five problems in one line, and how many more. */
function summarize(problems: string[]): string {
  return `${problems.slice(0, 5).join('; ')}${problems.length > 5 ? `; … ${problems.length - 5} more` : ''}`;
}
