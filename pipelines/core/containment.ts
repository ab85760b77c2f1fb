// Containment of paths that come from plans and manifests (a raw file's mirror_path, a package path, a
// table name): such a path must stay inside the folder it is relative to, after `..` and symbolic links
// are resolved, or it is refused before anything is read, written or deleted. Raw inputs are read only
// when they are regular files (a FIFO, a device or a directory is refused without being opened), and
// the leftovers of killed processes (`<name>.staging-<pid>`) are removed without following a link.
// An output path a user names is checked once, before any work (checkOutputPath).
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readSync,
  realpathSync,
  rmSync,
  statSync,
  unlinkSync,
  type Stats,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { basename, dirname, join, resolve, sep } from 'node:path';
import * as z from 'zod';
import { readContract } from './contracts.ts';
import { UserError } from './errors.ts';
import { ROOT } from './paths.ts';
import { CONFIG_FILE } from './config.ts';
import type { Paths } from './settings.ts';

const Naming = z.strictObject({
  file_name_max_characters: z.number().int().positive(),
  path_name_max_characters: z.number().int().positive(),
});
/** The longest plain file name and the longest name of a relative path (contracts/naming.json). */
export const NAME_LIMITS = readContract('naming.json', Naming);

/**
 * A relative path inside a folder: '/'-separated names, none empty, `.` or `..`, no backslash or NUL,
 * each name at most path_name_max_characters (contracts/naming.json: the file-system limit). Lengths
 * count code points, as Python's len() does. Shared by the plan schema and insideRoot.
 */
export const SAFE_RELATIVE_PATH = new RegExp(
  String.raw`^(?!\.\.?(?:\/|$))(?!.*\/\.\.?(?:\/|$))` +
    String.raw`[^/\\\u0000]{1,${NAME_LIMITS.path_name_max_characters}}` +
    String.raw`(?:\/[^/\\\u0000]{1,${NAME_LIMITS.path_name_max_characters}})*$`,
  'su',
);
export const SAFE_RELATIVE_PATH_RULE =
  "a relative path inside its folder ('/'-separated names; no '..', '.', leading '/', backslash or empty name)";
/**
 * One file name (no separator at all) that wwref turns into file names by adding a suffix, e.g. an ECG
 * record (<record>.hea) or a pack's condition (<condition>.json): at most file_name_max_characters.
 */
export const SAFE_FILE_NAME = new RegExp(String.raw`^(?!\.\.?$)[^/\\\u0000]{1,${NAME_LIMITS.file_name_max_characters}}$`, 'su');

/** Why `relative` is not a safe relative path, or undefined when it is. */
export function relativePathProblem(relative: string): string | undefined {
  if (typeof relative !== 'string' || relative === '') return 'is empty';
  if (SAFE_RELATIVE_PATH.test(relative)) return undefined;
  if (relative.startsWith('/')) return 'is absolute';
  if (relative.split('/').includes('..')) return "climbs out with '..'";
  return `is not ${SAFE_RELATIVE_PATH_RULE}`;
}

function within(path: string, folder: string): boolean {
  return path === folder || path.startsWith(folder.endsWith(sep) ? folder : folder + sep);
}

/** What is at `path` (a final link not followed), or undefined: a parent that is a file means nothing is. */
export function lstatOrNothing(path: string): Stats | undefined {
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR') return undefined;
    throw new UserError(`cannot look at ${path}: ${code ?? (error as Error).message}`);
  }
}

const exists = (path: string): boolean => lstatOrNothing(path) !== undefined;

/**
 * The path with symbolic links resolved: the path itself when it exists, else its deepest existing
 * ancestor with the remaining names appended. A dangling or looping link is refused.
 */
export function realPath(path: string): string {
  let head = resolve(path);
  const tail: string[] = [];
  for (;;) {
    if (exists(head)) break;
    if (dirname(head) === head) break;
    tail.unshift(basename(head));
    head = dirname(head);
  }
  try {
    return resolve(realpathSync(head), ...tail);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UserError(
      `cannot resolve ${head}: ` +
        `${code === 'ENOENT' ? 'a dangling symbolic link' : code === 'ELOOP' ? 'a symbolic link loop' : (error as Error).message}`,
    );
  }
}

/** Whether `path` is `folder` or lies inside it, after resolving symlinks and `..`. */
export function isInside(path: string, folder: string): boolean {
  return within(realPath(path), realPath(folder));
}

/**
 * `root`/`relative` as a real path (symbolic links resolved), or a UserError naming `what` when
 * `relative` is absolute, climbs out with `..`, or resolves (through a link) outside `root`.
 */
export function insideRoot(root: string, relative: string, what: string): string {
  const problem = relativePathProblem(relative);
  if (problem) throw new UserError(`${what} '${relative}' ${problem}; refused`);
  const base = resolve(root);
  if (!within(resolve(base, relative), base)) throw new UserError(`${what} '${relative}' leaves ${base}; refused`);
  const realBase = realPath(base);
  const real = realPath(join(base, relative));
  if (!within(real, realBase)) throw new UserError(`${what} '${relative}' resolves to ${real}, outside ${realBase}; refused`);
  return real;
}

function kind(stats: Stats): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isFIFO()) return 'a FIFO';
  if (stats.isSymbolicLink()) return 'a symbolic link';
  if (stats.isSocket()) return 'a socket';
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/**
 * Opens a regular file for reading, never blocking: the path is checked with lstat first (a FIFO,
 * device, directory or link is refused unopened), opened without following a link and without
 * blocking, and checked again on the open descriptor. Returns the descriptor and the size.
 */
export function openRegularFile(path: string, what: string): { fd: number; size: number } {
  const before = exists(path) ? lstatSync(path) : undefined;
  if (!before) throw new UserError(`${what} ${path} does not exist`);
  if (!before.isFile()) throw new UserError(`${what} ${path} is ${kind(before)}, not a regular file; refused`);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw new UserError(`cannot open ${what} ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const stats = fstatSync(fd);
  if (!stats.isFile()) {
    closeSync(fd);
    throw new UserError(`${what} ${path} is ${kind(stats)}, not a regular file; refused`);
  }
  return { fd, size: stats.size };
}

/**
 * sha256 and length of what remains to be read from `fd`, read in 1 MiB blocks (never whole); with
 * `limit`, reading stops after limit + 1 bytes (the length then tells that the file is too large).
 */
export function hashDescriptor(
  fd: number,
  onBlock?: (block: Uint8Array) => void,
  limit = Number.MAX_SAFE_INTEGER,
): { sha256: string; bytes: number } {
  const hash = createHash('sha256');
  const block = Buffer.allocUnsafe(1 << 20);
  let bytes = 0;
  while (bytes <= limit) {
    const n = readSync(fd, block, 0, Math.min(block.length, limit + 1 - bytes), null);
    if (n === 0) break;
    const chunk = block.subarray(0, n);
    hash.update(chunk);
    onBlock?.(chunk);
    bytes += n;
  }
  return { sha256: hash.digest('hex'), bytes };
}

/**
 * The whole of a regular file, read without blocking (a FIFO, device, directory or link is refused
 * unopened) and never more than `maxBytes`: a larger file is refused after maxBytes + 1 bytes.
 */
export function readRegularFile(path: string, what: string, maxBytes: number): Buffer {
  const { fd, size } = openRegularFile(path, what);
  try {
    if (size > maxBytes) throw new UserError(`${what} ${path} is ${size} bytes, more than the ${maxBytes} allowed; refused`);
    const blocks: Uint8Array[] = [];
    const { bytes } = hashDescriptor(fd, (block) => blocks.push(Buffer.from(block)), maxBytes);
    if (bytes > maxBytes) throw new UserError(`${what} ${path} grew past the ${maxBytes} bytes allowed while it was read; refused`);
    return Buffer.concat(blocks);
  } finally {
    closeSync(fd);
  }
}

/** sha256 of a regular file, streamed (never read whole); FIFOs, devices, folders and links are refused unopened. */
export function regularFileSha256(path: string, what: string): string {
  const { fd } = openRegularFile(path, what);
  try {
    return hashDescriptor(fd).sha256;
  } finally {
    closeSync(fd);
  }
}

/** Whether a process with this id exists (a process of another user counts: EPERM). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the entries of `dir` whose name matches `pattern` (its first group is a process id) and
 * whose process no longer exists: the leftovers of a killed run. A link is removed itself, never
 * what it points to; a folder is removed without following the links inside it. Returns the paths.
 */
export function removeStaleEntries(dir: string, pattern: RegExp): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const match = pattern.exec(name);
    const pid = match ? Number(match[1]) : NaN;
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || processAlive(pid)) continue;
    const path = join(dir, name);
    const stats = lstatSync(path, { throwIfNoEntry: false });
    if (!stats) continue;
    if (stats.isDirectory())
      rmSync(path, { recursive: true, force: true }); // lstat-based: links inside are unlinked, not followed
    else unlinkSync(path);
    removed.push(path);
  }
  return removed;
}

/** The project's own code, plans and contracts: no command writes a user-named output there. */
export const SOURCE_FOLDERS = ['workflows', 'sources', 'pipelines', 'contracts', 'bin', 'scripts', 'test'].map((name) => join(ROOT, name));

/** Folders only wwref itself writes: the reference folders (the one in use and the committed ones), prepared inputs, source manifests. */
export function generatedFolders(paths: Pick<Paths, 'references' | 'prepared' | 'manifests'>): string[] {
  return [paths.references, join(ROOT, 'outputs', 'references'), join(ROOT, 'outputs', 'examples'), paths.prepared, paths.manifests];
}

/** Runs git in the repository (real path `root`) and returns what it printed. */
function git(root: string, args: string[]): string {
  return execFileSync('git', ['-C', root, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
    timeout: 20_000,
    maxBuffer: 64 << 20,
  });
}

let gitFolders: string[] | undefined;
/**
 * The repository's git folders (a worktree's own and the common one), real absolute paths, asked of
 * git once; only `.git` when ROOT is no git work tree (the other rules still hold).
 */
function repositoryGitDirs(): string[] {
  if (!gitFolders) {
    const root = realPath(ROOT);
    gitFolders = [join(root, '.git')];
    try {
      const dirs = git(root, ['rev-parse', '--path-format=absolute', '--git-dir', '--git-common-dir']).split('\n').filter(Boolean);
      gitFolders.push(...dirs.map((d) => realPath(d)));
    } catch {
      // no git, or not a work tree
    }
  }
  return gitFolders;
}

let trackedFiles: Set<string> | undefined;
/**
 * The repository's tracked files, real absolute paths, asked of git once (a second git process: only
 * a path inside the repository, or around it, needs them); none when ROOT is no git work tree.
 */
function repositoryTrackedFiles(): Set<string> {
  if (!trackedFiles) {
    const root = realPath(ROOT);
    trackedFiles = new Set();
    try {
      for (const name of git(root, ['ls-files', '-z']).split('\0')) if (name) trackedFiles.add(join(root, name));
    } catch {
      // no git, or not a work tree
    }
  }
  return trackedFiles;
}

/** The nearest folder at or above `path` holding a reference manifest (`manifest.json` with `manifest_version`), if any. */
function referenceFolderAbove(path: string): string | undefined {
  for (let dir = path; ; dir = dirname(dir)) {
    const manifest = join(dir, 'manifest.json');
    if (lstatOrNothing(manifest)?.isFile()) {
      try {
        if (readRegularFile(manifest, 'manifest', 1 << 20).includes('"manifest_version"')) return dir;
      } catch {
        // unreadable or too large: not a manifest this rule can recognise
      }
    }
    if (dirname(dir) === dir) return undefined;
  }
}

export interface OutputCheck {
  /** A file the command writes (default), or a folder it fills. */
  kind?: 'file' | 'folder';
  /** Further folders only wwref writes, e.g. the reference folder a command reads. */
  generated?: readonly string[];
  /** The output may lie in `sources/` (a plan, the plan schema): only there among the project's source folders. */
  inSources?: boolean;
  /**
   * Whether the existing file at the (real) path is one this same command writes (the committed plan
   * schema is plan-schema's): only such a file among the repository's tracked files may be replaced.
   */
  ownFile?: (path: string) => boolean;
}

/**
 * Why writing `path` would replace part of the project, or undefined. The rule, after `..` and links
 * are resolved: never inside `.git/`, the configuration, a reference folder (any folder holding a
 * reference manifest), a folder only wwref writes (prepared inputs, source manifests, the reference
 * folders of the settings), the project's source folders (`sources/` alone for plans); never over a
 * tracked file of the repository unless it is one the same command wrote (`ownFile`); a folder
 * output never holds a tracked file.
 */
function projectClash(paths: Pick<Paths, 'references' | 'prepared' | 'manifests'>, path: string, check: OutputCheck): string | undefined {
  const real = realPath(path);
  const root = realPath(ROOT);
  const gitDir = repositoryGitDirs().find((dir) => within(real, dir));
  if (gitDir) return `inside ${gitDir}, the repository itself`;
  if (real === join(root, CONFIG_FILE)) return `the project's configuration (${CONFIG_FILE})`;
  for (const dir of SOURCE_FOLDERS) {
    if (check.inSources && dir === join(ROOT, 'sources')) continue;
    if (isInside(path, dir)) return `inside ${dir}, the project's own source`;
  }
  for (const dir of [...generatedFolders(paths), ...(check.generated ?? [])]) {
    if (isInside(path, dir)) return `inside ${dir}, which only wwref itself writes`;
  }
  const references = referenceFolderAbove(real);
  if (references) return `inside ${references}, a reference folder (it holds a manifest), which only wwref itself writes`;
  // every tracked file lies in the repository: none is at, or in, a path neither in it nor around it
  if (!within(real, root) && !within(root, real)) return undefined;
  const tracked = repositoryTrackedFiles();
  if ((check.kind ?? 'file') === 'folder') {
    const prefix = real.endsWith(sep) ? real : real + sep;
    for (const file of tracked) if (file.startsWith(prefix)) return `a folder holding ${file}, a file of the repository (tracked by git)`;
  } else if (tracked.has(real) && !check.ownFile?.(real))
    return 'a file of the repository (tracked by git), which this command did not write';
  return undefined;
}

/** What is at `path` (the link itself with `link`), or undefined, a parent that is a file included. */
function outputStats(path: string, what: string, shown: string, link = false): Stats | undefined {
  try {
    return (link ? lstatSync : statSync)(path, { throwIfNoEntry: false });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR') return undefined;
    throw new UserError(`${what} ${shown} cannot be written: ${code ?? (error as Error).message}`);
  }
}

/**
 * The one check of an output path a user names (`what`: "--out", "report file"), made before any
 * work, for every command that writes one: refused where it would replace part of the project
 * (projectClash: `.git/`, the configuration, a reference folder, prepared inputs, the sources, a
 * tracked file unless the command's own), and when it cannot be written: a file output that is a folder, a
 * symbolic link, a device, FIFO or socket; a folder output that is a file; a parent that is a file;
 * a nearest existing folder that is not writable. Returns the absolute path.
 */
export function checkOutputPath(
  paths: Pick<Paths, 'references' | 'prepared' | 'manifests'>,
  path: string,
  what: string,
  check: OutputCheck = {},
): string {
  const kind = check.kind ?? 'file';
  if (path.trim() === '') throw new UserError(`${what} needs a path`);
  const clash = projectClash(paths, path, check);
  if (clash) throw new UserError(`${what} ${path} is ${clash}; choose another path`);
  const target = resolve(path);
  if (kind === 'file' && outputStats(target, what, path, true)?.isSymbolicLink()) {
    throw new UserError(
      `${what} ${path} is a symbolic link; name the file itself (wwref replaces its outputs, it does not write through links)`,
    );
  }
  const stats = outputStats(target, what, path);
  if (stats?.isDirectory() && kind === 'file') throw new UserError(`${what} ${path} is a directory; name a file`);
  // an atomic write renames a new file over the path: never over a device, FIFO or socket
  if (stats && !stats.isDirectory() && !stats.isFile())
    throw new UserError(`${what} ${path} is not a regular file (a device, FIFO or socket); name a file`);
  if (stats && !stats.isDirectory() && kind === 'folder') throw new UserError(`${what} ${path} is a file; name a folder`);
  let existing = stats && kind === 'folder' ? target : dirname(target);
  while (!existsSync(existing) && dirname(existing) !== existing) existing = dirname(existing);
  if (!outputStats(existing, what, path)?.isDirectory())
    throw new UserError(`${what} ${path} cannot be written: ${existing} is a file, not a folder`);
  try {
    accessSync(existing, constants.W_OK);
  } catch (error) {
    throw new UserError(`${what} ${path} cannot be written: ${existing} is not writable (${(error as NodeJS.ErrnoException).code})`);
  }
  return target;
}
