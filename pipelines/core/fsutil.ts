// File-system writes and reads as every stage does them: atomic writes (a temporary sibling, then a
// rename, so a reader never sees half a file), appends that never follow a symlink, and file-system
// failures turned into one-line user errors that name the file.
import { closeSync, constants, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { UserError } from './errors.ts';

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
  const code = (error as NodeJS.ErrnoException).code;
  if (code && FS_HINTS[code]) return new UserError(`cannot ${action} ${path}: ${FS_HINTS[code]} (${code})`);
  return error as Error;
}

/**
 * Test-only fault injection: WWREF_TEST_FAIL_WRITE names a file (basename) whose next atomic write
 * fails as a full disk would, so that recovery from a failed write can be shown to work.
 */
function injectedFailure(path: string): void {
  if (process.env.WWREF_TEST_FAIL_WRITE && process.env.WWREF_TEST_FAIL_WRITE === basename(path)) {
    throw Object.assign(new Error(`ENOSPC: no space left on device, write '${path}'`), { code: 'ENOSPC' });
  }
}

export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  try {
    mkdirSync(dirname(path), { recursive: true });
    injectedFailure(path);
    writeFileSync(tmp, data, { flag: 'wx' });
    renameSync(tmp, path);
  } catch (error) {
    rmSync(tmp, { force: true });
    throw fsError(error, 'write', path);
  }
}

/** Pretty JSON with a trailing newline, written atomically. */
export function writeJsonAtomic(path: string, value: unknown): void {
  writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`);
}

/** Appends to a file, creating it; refuses to follow a symbolic link at `path`. */
export function appendNoFollow(path: string, text: string): void {
  let fd: number | undefined;
  try {
    mkdirSync(dirname(path), { recursive: true });
    fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
    writeSync(fd, text);
  } catch (error) {
    throw fsError(error, 'append to', path);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** A JSON file, or a UserError naming it (missing, unreadable, not JSON). */
export function readJsonFile(path: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new UserError(`${what} not found: ${path}`);
    throw fsError(error, 'read', path);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UserError(`${what} ${path} is not valid JSON: ${(error as Error).message}`);
  }
}
