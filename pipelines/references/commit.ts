// Writing a reference folder: tables and manifest change together, one writer at a time. Under the
// folder's lock the current manifest is read afresh (no lost update from a concurrent writer), the
// new tables replace the old ones, then the manifest is written atomically and checked against every
// table. If the manifest cannot be written, the old tables are put back: the folder is as it was.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { processAlive } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';
import { fsError, writeFileAtomic } from '../core/fsutil.ts';
import { fileSha256 } from '../core/hashing.ts';
import { readReferenceManifest, writeReferenceManifest, type ReferenceManifest } from './manifest.ts';

/** How long a writer waits for another one to finish before it gives up. */
export const LOCK_WAIT_SECONDS = 120;
const LOCK_FILE = '.wwref.lock';

export interface ReferenceChange {
  manifest: ReferenceManifest;
  /** New table bytes by file name (relative to the folder). */
  tables: Map<string, Uint8Array>;
  /** Table files to remove (relative to the folder). */
  remove?: string[];
}

/** Takes the folder's lock (waiting for a live holder, replacing a dead one's); returns its release. */
async function lock(dir: string, waitSeconds: number): Promise<() => void> {
  const path = join(dir, LOCK_FILE);
  mkdirSync(dir, { recursive: true });
  const deadline = Date.now() + waitSeconds * 1000;
  for (;;) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, JSON.stringify({ pid: process.pid, since: new Date().toISOString(), argv: process.argv.slice(2) }));
      closeSync(fd);
      return () => rmSync(path, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw fsError(error, 'lock', dir);
    }
    let holder: { pid?: number } = {};
    try {
      holder = JSON.parse(readFileSync(path, 'utf8')) as { pid?: number };
    } catch {
      // being written right now, or torn: look again shortly
    }
    if (typeof holder.pid === 'number' && !processAlive(holder.pid)) {
      rmSync(path, { force: true }); // its writer is gone: a stale lock
      continue;
    }
    if (Date.now() > deadline) {
      throw new UserError(`${dir} is being written by another wwref process (pid ${holder.pid ?? '?'}, lock ${path}); wait for it to finish, or remove the lock if that process is gone`);
    }
    await sleep(200);
  }
}

/**
 * Applies `change(current manifest)` to the folder under its lock: tables first (old ones kept aside),
 * then the manifest; on a failed manifest write the old tables are restored and the error rethrown.
 */
export async function commitReferences(
  dir: string,
  change: (current: ReferenceManifest | undefined) => ReferenceChange,
  options: { waitSeconds?: number } = {},
): Promise<ReferenceManifest> {
  const release = await lock(dir, options.waitSeconds ?? LOCK_WAIT_SECONDS);
  const tag = `${process.pid}.${Date.now()}`;
  const setAside: { file: string; backup?: string }[] = [];
  try {
    const { manifest, tables, remove = [] } = change(readReferenceManifest(dir));
    try {
      for (const [file, bytes] of tables) {
        const path = join(dir, file);
        const fresh = `${path}.${tag}.new`;
        writeFileAtomic(fresh, bytes);
        const backup = existsSync(path) ? `${path}.${tag}.old` : undefined;
        if (backup) renameSync(path, backup);
        setAside.push({ file: path, backup });
        renameSync(fresh, path);
      }
      for (const file of remove) {
        const path = join(dir, file);
        if (!existsSync(path)) continue;
        renameSync(path, `${path}.${tag}.old`);
        setAside.push({ file: path, backup: `${path}.${tag}.old` });
      }
      writeReferenceManifest(manifest, dir);
    } catch (error) {
      for (const { file, backup } of setAside.reverse()) {
        if (backup) renameSync(backup, file);
        else rmSync(file, { force: true });
      }
      for (const file of tables.keys()) rmSync(join(dir, `${file}.${tag}.new`), { force: true });
      throw error;
    }
    for (const { backup } of setAside) if (backup) rmSync(backup, { force: true });
    // The manifest as written must describe every table this change wrote.
    const written = readReferenceManifest(dir)!;
    for (const entry of Object.values(written.conditions).filter((e) => tables.has(e.table))) {
      const path = join(dir, entry.table);
      if (!existsSync(path) || fileSha256(path) !== entry.table_sha256) {
        throw new UserError(`after writing ${dir}/manifest.json, ${path} does not match its entry; run 'wwref rebuild' for that condition`);
      }
    }
    return written;
  } finally {
    release();
  }
}
