// File-system writes and reads as every stage does them: atomic writes (a temporary sibling, then a
// rename, so a reader never sees half a file), appends that never follow a symlink, file-system
// failures turned into one-line user errors that name the file, and the other names a folder has
// through bind mounts (otherNames), which no resolution of links reveals.
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { UserError } from './errors.ts';
import { refuseNonFinite } from './hashing.ts';

const FS_HINTS: Record<string, string> = {
  ENOSPC: 'the disk is full',
  EDQUOT: 'the disk quota is exhausted',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'the file system is read-only',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a parent is not a directory',
  ENAMETOOLONG: 'the name is too long',
  ELOOP: 'it is a symbolic link',
};

/** A file-system failure as a UserError naming the file; other errors pass unchanged. */
export function fsError(error: unknown, action: string, path: string): Error {
  if (error instanceof UserError) return error;
  const code = (error as NodeJS.ErrnoException).code;
  if (code && FS_HINTS[code]) return new UserError(`cannot ${action} ${path}: ${FS_HINTS[code]} (${code})`);
  // any other system error of the file system (ENOENT under /proc, EEXIST, EIO, ...): still one line
  if (typeof code === 'string' && /^E[A-Z0-9]+$/.test(code) && typeof (error as NodeJS.ErrnoException).syscall === 'string') {
    // "ENOENT: no such file or directory, open '<temporary file>'": the description, not the temporary name
    const description = /^E[A-Z0-9]+: ([^,]+)/.exec((error as Error).message)?.[1] ?? (error as NodeJS.ErrnoException).syscall;
    return new UserError(`cannot ${action} ${path}: ${description} (${code})`);
  }
  return error as Error;
}

/**
 * Creates `dir` and its missing parents one level at a time (Node's recursive mkdir retries forever
 * where mkdir fails with ENOENT on an existing parent, as under /proc).
 */
export function makeDirs(dir: string): void {
  const missing: string[] = [];
  for (let d = resolve(dir); !existsSync(d) && dirname(d) !== d; d = dirname(d)) missing.unshift(d);
  for (const d of missing) {
    try {
      mkdirSync(d);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

/** Attempts at a fresh temporary name before a write is given up (each name is 64 random bits). */
const TEMPORARY_ATTEMPTS = 16;

/**
 * A new temporary sibling of `path`, created by this call and opened for writing: `<name>.<pid>.<random
 * digits>.tmp` (the pid lets a later run remove the leftovers of a killed one; the 64 random bits keep
 * anyone else from naming it in advance). Created with O_EXCL and O_NOFOLLOW, so a file, FIFO or link
 * planted at that name is never opened or written through: another name is drawn instead.
 */
function createTemporary(path: string, mode: number): { tmp: string; fd: number } {
  for (let attempt = 1; ; attempt++) {
    const tmp = `${path}.${process.pid}.${randomBytes(8).readBigUInt64BE()}.tmp`;
    try {
      const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
      return { tmp, fd: openSync(tmp, flags, mode) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= TEMPORARY_ATTEMPTS) throw error;
    }
  }
}

/** Writes all of `bytes` to `fd` (a short write continues). */
function writeAll(fd: number, bytes: Uint8Array): void {
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, bytes.length - done);
}

/**
 * Writes `path` whole or not at all: a new temporary sibling (createTemporary), then a rename over the
 * path (a link at the path is replaced, never followed). Any failure (a full disk, a name taken) removes
 * the temporary file and is one line naming the path (fsError). `mode`: the new file's permissions
 * (before the umask; default 0666, as Node's writeFileSync).
 */
export function writeFileAtomic(path: string, data: string | Uint8Array, options: { mode?: number } = {}): void {
  let created: { tmp: string; fd: number } | undefined;
  let open = false;
  try {
    makeDirs(dirname(path));
    created = createTemporary(path, options.mode ?? 0o666);
    open = true;
    writeAll(created.fd, typeof data === 'string' ? Buffer.from(data) : data);
    open = false;
    closeSync(created.fd);
    renameSync(created.tmp, path);
  } catch (error) {
    if (created) {
      if (open) closeQuietly(created.fd);
      try {
        unlinkSync(created.tmp); // the name is ours (made by O_EXCL): whatever is there now goes
      } catch {
        // gone already, or replaced by a folder: nothing of ours to remove
      }
    }
    throw fsError(error, 'write', path);
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // already failing: the first error is the one to report
  }
}

/** Pretty JSON with a trailing newline, written atomically. */
export function writeJsonAtomic(path: string, value: unknown): void {
  writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`);
}

/**
 * Appends to a file, creating it; refuses to follow a symbolic link at `path`, and anything but a
 * regular file of one name there (opened without blocking: a FIFO never stalls the writer; a hard
 * link, another name of someone else's file, is not written through). The text is written
 * whole (a short write continues); a write that fails part way (a full disk) is cut back, so the file
 * never ends in half a line, unless another writer appended meanwhile (its line is kept).
 */
export function appendNoFollow(path: string, text: string): void {
  let fd: number | undefined;
  let before: number | undefined;
  let written = 0;
  const bytes = Buffer.from(text);
  try {
    makeDirs(dirname(path));
    fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o644);
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw new UserError(`cannot append to ${path}: it is not a regular file (a FIFO or device); remove it`);
    if (stats.nlink > 1) throw new UserError(`cannot append to ${path}: it has ${stats.nlink} hard links (another file's name); remove it`);
    before = stats.size;
    while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written);
  } catch (error) {
    if (fd !== undefined && before !== undefined && written > 0) cutBack(fd, before + written, before);
    throw fsError(error, 'append to', path);
  } finally {
    if (fd !== undefined) closeQuietly(fd);
  }
}

/** After a failed append: the file back to `before` bytes when its size is `grown`, what this append alone made it. */
function cutBack(fd: number, grown: number, before: number): void {
  try {
    if (fstatSync(fd).size === grown) ftruncateSync(fd, before);
  } catch {
    // the file cannot be cut back: the first error is the one to report
  }
}

/** A JSON file, or a UserError naming it (missing, unreadable, not JSON, a number beyond float64). */
export function readJsonFile(path: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new UserError(`${what} not found: ${path}`);
    throw fsError(error, 'read', path);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new UserError(`${what} ${path} is not valid JSON: ${(error as Error).message}`);
  }
  return refuseNonFinite(json, `${what} ${path}`); // JSON.parse reads 1e999 as Infinity
}

/** Device and inode of what `path` names (links followed), or undefined when nothing can be found there. */
export function identityOf(path: string): { dev: number; ino: number } | undefined {
  try {
    const stats = statSync(path, { throwIfNoEntry: false });
    return stats && { dev: stats.dev, ino: stats.ino };
  } catch {
    return undefined; // unreadable, a parent that is a file, a link loop: no identity to compare
  }
}

/** Whether two identities are known and the same file. */
export const sameIdentity = (a: { dev: number; ino: number } | undefined, b: { dev: number; ino: number } | undefined): boolean =>
  a !== undefined && b !== undefined && a.dev === b.dev && a.ino === b.ino;

interface Mount {
  /** The device as the mount table spells it (major:minor): mounts of one file system share it. */
  device: string;
  /** The folder of that file system this mount shows (`/` for the whole file system, else a bind mount's source). */
  root: string;
  /** Where it is shown. */
  point: string;
}

/** The mount table's escapes (a space is \040, a backslash \134) undone. */
const unescapeMountPath = (field: string): string =>
  field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));

/** This process's mounts, in the order they were made (Linux's /proc/self/mountinfo); none where it cannot be read. */
function mounts(): Mount[] {
  let text: string;
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .map((line) => line.split(' '))
    .filter((fields) => fields.length > 5)
    .map((fields) => ({ device: fields[2]!, root: unescapeMountPath(fields[3]!), point: unescapeMountPath(fields[4]!) }));
}

const inside = (path: string, folder: string): boolean => path === folder || path.startsWith(folder === '/' ? '/' : `${folder}/`);
const below = (path: string, folder: string): string => (path === folder ? '' : path.slice(folder === '/' ? 1 : folder.length + 1));

/**
 * Every other absolute name of the existing file or folder `real` (a path whose links are resolved):
 * where the file system holding it is also shown at another mount point (a bind mount of the folder
 * or of one above it), the same place under that mount point. A name is kept only when the device
 * and inode found there are those of `real`, so a covered or stale mount gives no name.
 */
export function otherNames(real: string): string[] {
  const identity = identityOf(real);
  if (!identity) return [];
  const table = mounts();
  // the mount that shows `real`: the deepest mount point above it, the last one made when stacked
  let shown: Mount | undefined;
  for (const mount of table) if (inside(real, mount.point) && (!shown || mount.point.length >= shown.point.length)) shown = mount;
  if (!shown) return [];
  const inFileSystem = join(shown.root, below(real, shown.point));
  const names = new Set<string>();
  for (const mount of table) {
    if (mount.device !== shown.device || !inside(inFileSystem, mount.root)) continue;
    const name = join(mount.point, below(inFileSystem, mount.root));
    if (name === real) continue;
    if (sameIdentity(identityOf(name), identity)) names.add(name);
  }
  return [...names];
}
