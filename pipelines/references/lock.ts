// The one-writer lock of a reference folder: `.wwref.lock`, holding the writer's pid. It is created
// whole (written to a private file, then hard-linked into place, which fails if the lock exists), so
// a lock file is never seen empty while its writer lives: an empty or unreadable lock, or one whose
// pid is gone, is stale. A stale lock is taken over under a short-lived guard file, re-examined under
// that guard, so that of two writers finding the same stale lock only one removes it. Every wait
// sleeps and ends at its deadline; a guard older than GUARD_STALE_MS, or seen unchanged for that
// long (one dated in the future), is a killed writer's and removed; the private file never outlives
// the attempt.
import { closeSync, linkSync, lstatSync, openSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { processAlive, readRegularFile, removeStaleEntries } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';
import { fsError, makeDirs } from '../core/fsutil.ts';

/** How long a writer waits for another one to finish before it gives up. */
export const LOCK_WAIT_SECONDS = 120;
export const LOCK_FILE = '.wwref.lock';
/** A lock holds a pid and a time: a larger file is none of wwref's and is not read past this. */
const LOCK_MAX_BYTES = 4096;
/** A takeover guard older than this was left by a writer killed in the middle of a takeover. */
const GUARD_STALE_MS = 10_000;

interface Holder {
  pid?: number;
  inode: number;
}

/** The lock's holder as it is now, or undefined when there is no lock. */
function holderOf(path: string): Holder | undefined {
  const stats = lstatSync(path, { throwIfNoEntry: false });
  if (!stats) return undefined;
  // a folder, FIFO or link is no lock of ours: refused (reading a FIFO would block)
  if (!stats.isFile()) throw new UserError(`the lock ${path} is not a regular file (wwref never makes it so); remove it`);
  let pid: number | undefined;
  try {
    const parsed = JSON.parse(readRegularFile(path, 'lock', LOCK_MAX_BYTES).toString('utf8')) as { pid?: unknown };
    if (typeof parsed.pid === 'number' && Number.isSafeInteger(parsed.pid) && parsed.pid > 0) pid = parsed.pid;
  } catch {
    // empty, torn or larger than any lock wwref writes (never read whole): no live writer leaves it so
  }
  return { pid, inode: stats.ino };
}

const stale = (holder: Holder) => holder.pid === undefined || !processAlive(holder.pid);

/** When this process first saw each takeover guard (by inode and mtime): one seen too long is stale whatever its date. */
const guardsSeen = new Map<string, number>();

/** Removes the lock if it is still the stale one seen (same inode), under the takeover guard. */
function takeOver(path: string, seen: Holder): void {
  const guard = `${path}.takeover`;
  const guardStats = lstatSync(guard, { throwIfNoEntry: false });
  if (guardStats) {
    const key = `${guard}:${guardStats.ino}:${guardStats.mtimeMs}`;
    const first = guardsSeen.get(key) ?? Date.now();
    guardsSeen.set(key, first);
    if (Date.now() - guardStats.mtimeMs > GUARD_STALE_MS || Date.now() - first > GUARD_STALE_MS) {
      rmSync(guard, { force: true });
      guardsSeen.delete(key);
    }
  }
  let fd: number;
  try {
    fd = openSync(guard, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return; // another writer is taking over: look again
    throw fsError(error, 'lock', path);
  }
  try {
    const now = holderOf(path);
    if (now && now.inode === seen.inode && stale(now)) unlinkSync(path);
  } finally {
    closeSync(fd);
    rmSync(guard, { force: true });
  }
}

let attempts = 0;
/** The private files of killed writers: `.wwref.lock.<pid>.<n>.tmp`. */
const STALE_PRIVATE = /^\.wwref\.lock\.(\d+)\.\d+\.tmp$/;

/** Takes the folder's lock (waiting for a live holder, taking over a stale one); returns its release. */
export async function lockFolder(dir: string, waitSeconds = LOCK_WAIT_SECONDS): Promise<() => void> {
  makeDirs(dir);
  const path = join(dir, LOCK_FILE);
  // unique within this process too: two actions of one server may ask in the same millisecond
  const mine = `${path}.${process.pid}.${++attempts}.tmp`;
  const deadline = Date.now() + waitSeconds * 1000;
  removeStaleEntries(dir, STALE_PRIVATE);
  try {
    try {
      // written whole (a short write continues) before it is linked into place; removed below whatever happens
      writeFileSync(mine, JSON.stringify({ pid: process.pid, since: new Date().toISOString(), argv: process.argv.slice(2) }), {
        flag: 'wx',
      });
    } catch (error) {
      throw fsError(error, 'lock', dir);
    }
    for (;;) {
      try {
        linkSync(mine, path);
        const inode = lstatSync(path).ino;
        return () => {
          // release only our own lock (never one that replaced it)
          if (lstatSync(path, { throwIfNoEntry: false })?.ino === inode) rmSync(path, { force: true });
        };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw fsError(error, 'lock', dir);
      }
      const holder = holderOf(path);
      if (holder && stale(holder)) {
        takeOver(path, holder);
        if (!lstatSync(path, { throwIfNoEntry: false })) continue; // taken over: link again at once
      }
      if (Date.now() > deadline) {
        throw new UserError(
          `${dir} is being written by another wwref process (pid ${holder?.pid ?? '?'}, lock ${path}); ` +
            `wait for it to finish, or remove the lock if that process is gone`,
        );
      }
      await sleep(100 + Math.random() * 100);
    }
  } finally {
    rmSync(mine, { force: true });
  }
}
