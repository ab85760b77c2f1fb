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
  readFileSync,
  readSync,
  realpathSync,
  rmSync,
  statSync,
  unlinkSync,
  type Stats,
} from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path';
import * as z from 'zod';
import { readContract } from './contracts.ts';
import { UserError } from './errors.ts';
import { identityOf, otherNames, sameIdentity } from './fsutil.ts';
import { declaredRuntimes, ROOT } from './paths.ts';
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

/** realpathSync of an existing path, a dangling or looping link refused in one line. */
function resolvedLinks(path: string): string {
  try {
    return realpathSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UserError(
      `cannot resolve ${path}: ` +
        `${code === 'ENOENT' ? 'a dangling symbolic link' : code === 'ELOOP' ? 'a symbolic link loop' : (error as Error).message}`,
    );
  }
}

/**
 * `path` made absolute as the system reads it: a `..` leaves the folder reached so far after its
 * links are resolved (`link/..` is the parent of the link's target, not the folder holding the link),
 * where path.resolve would drop `link/..` from the text. Without `..`, path.resolve's answer.
 */
export function systemPath(path: string): string {
  const absolute = isAbsolute(path) ? path : `${process.cwd()}/${path}`;
  const names = absolute.split('/').filter((name) => name !== '' && name !== '.');
  if (!names.includes('..')) return resolve(absolute);
  let current = '/';
  names.forEach((name, k) => {
    if (name === '..') current = dirname(current);
    else {
      current = join(current, name);
      if (k < names.length - 1 && exists(current)) current = resolvedLinks(current);
    }
  });
  return current;
}

/**
 * The path with symbolic links resolved: the path itself when it exists, else its deepest existing
 * ancestor with the remaining names appended. A dangling or looping link is refused.
 */
export function realPath(path: string): string {
  let head = systemPath(path);
  const tail: string[] = [];
  for (;;) {
    if (exists(head)) break;
    if (dirname(head) === head) break;
    tail.unshift(basename(head));
    head = dirname(head);
  }
  return resolve(resolvedLinks(head), ...tail);
}

/**
 * Where a path is, under every name it has: its real path (links and `..` resolved), the same place
 * under every other name of its deepest existing folder (bind mounts, from the mount table: fsutil.ts
 * otherNames) and, when one of its existing folders is one of the `anchors` itself (same device and
 * inode; the project root, or the repository's folders), under that anchor's name, which holds where
 * no mount table can be read; with the identities of its existing folders, compared with a folder's
 * in placeInside.
 */
export interface Place {
  names: string[];
  folders: { dev: number; ino: number }[];
}

export function placeOf(path: string, anchors: readonly string[] = [ROOT]): Place {
  const real = realPath(path);
  let head = real;
  while (!exists(head) && dirname(head) !== head) head = dirname(head);
  const tail = real === head ? '' : real.slice(head.length + (head.endsWith(sep) ? 0 : 1));
  const names = new Set([real, ...otherNames(head).map((name) => join(name, tail))]);
  const anchorAt = new Map<string, string>();
  for (const anchor of anchors) {
    const identity = identityOf(anchor);
    if (identity) anchorAt.set(`${identity.dev}:${identity.ino}`, realPath(anchor));
  }
  const folders: { dev: number; ino: number }[] = [];
  for (let dir = head; ; dir = dirname(dir)) {
    const identity = identityOf(dir);
    if (identity) folders.push(identity);
    const anchor = identity && anchorAt.get(`${identity.dev}:${identity.ino}`);
    if (anchor) names.add(join(anchor, real.slice(dir.length)));
    if (dirname(dir) === dir) break;
  }
  return { names: [...names], folders };
}

/** Whether a place is `folder` or lies inside it: under one of its names, or one of its folders is `folder` itself (device and inode). */
export function placeInside(place: Place, folder: string): boolean {
  const real = realPath(folder);
  if (place.names.some((name) => within(name, real))) return true;
  const identity = identityOf(real);
  return place.folders.some((dir) => sameIdentity(dir, identity));
}

/** Whether `path` is `folder` or lies inside it, after resolving symlinks and `..`, bind mounts included (placeOf). */
export function isInside(path: string, folder: string): boolean {
  return placeInside(placeOf(path), folder);
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

/**
 * Whether a process with this id exists (a process of another user counts: EPERM) and still runs: a
 * zombie (ended, not yet reaped by its parent, state Z in /proc/PID/stat) holds nothing any more.
 */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return true; // no /proc to ask (or the process ended just now): taken as alive, the safe side
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

/** The project's runtime, made by its setup (npm ci, scripts/setup-python): dependencies, the built command line, the Python runtimes, tools and the libm pin. */
export function runtimeFolders(): string[] {
  return [join(ROOT, 'node_modules'), join(ROOT, 'dist'), join(ROOT, '.tools'), ...declaredRuntimes().map((runtime) => runtime.venv)];
}

/** Folders only wwref itself writes: the reference folders (the one in use and the committed ones), prepared inputs, source manifests. */
export function generatedFolders(paths: Pick<Paths, 'references' | 'prepared' | 'manifests'>): string[] {
  return [paths.references, join(ROOT, 'outputs', 'references'), join(ROOT, 'outputs', 'examples'), paths.prepared, paths.manifests];
}

let repository: { tracked: Set<string>; gitDirs: string[]; folders: string[] } | undefined;
/**
 * The repository's tracked files, its git folders (a worktree's own and the common one) and the
 * folders holding tracked files (the root among them), real absolute paths, asked of git once; none
 * when ROOT is no git work tree (the other rules still hold).
 */
function repositoryFiles(): { tracked: Set<string>; gitDirs: string[]; folders: string[] } {
  if (!repository) {
    const root = realPath(ROOT);
    const git = (args: string[]) =>
      execFileSync('git', ['-C', root, ...args], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        timeout: 20_000,
        maxBuffer: 64 << 20,
      });
    repository = { tracked: new Set(), gitDirs: [join(root, '.git')], folders: [root] };
    try {
      for (const name of git(['ls-files', '-z']).split('\0')) if (name) repository.tracked.add(join(root, name));
      const dirs = git(['rev-parse', '--path-format=absolute', '--git-dir', '--git-common-dir']).split('\n').filter(Boolean);
      repository.gitDirs.push(...dirs.map((d) => realPath(d)));
      const folders = new Set([root]);
      for (const file of repository.tracked)
        for (let dir = dirname(file); !folders.has(dir) && within(dir, root); dir = dirname(dir)) folders.add(dir);
      repository.folders = [...folders];
    } catch {
      // no git, or not a work tree
    }
  }
  return repository;
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

/** The file of `files` that the existing regular file at `path` is another hard link of, if any (asked only of a file with several links). */
function hardLinkedFile(path: string, files: readonly string[]): string | undefined {
  const stats = lstatOrNothing(path);
  if (!stats?.isFile() || stats.nlink < 2) return undefined;
  return files.find((file) => sameIdentity(identityOf(file), stats));
}

/**
 * Why writing `path` would replace part of the project, or undefined. The rule holds for every name of
 * the place (placeOf: `..`, links and bind mounts resolved; folders compared by device and inode too):
 * never inside the project's runtime (node_modules/, dist/, .tools/, the Python runtimes), `.git/`, the configuration, a reference folder (any folder holding a
 * reference manifest), a folder only wwref writes (prepared inputs, source manifests, the reference
 * folders of the settings), the project's source folders (`sources/` alone for plans); never over a
 * tracked file of the repository (or a hard link of one) unless it is one the same command wrote
 * (`ownFile`); a folder output never holds a tracked file.
 */
function projectClash(paths: Pick<Paths, 'references' | 'prepared' | 'manifests'>, path: string, check: OutputCheck): string | undefined {
  const { tracked, gitDirs, folders } = repositoryFiles();
  const place = placeOf(path, [...folders, ...gitDirs]);
  const root = realPath(ROOT);
  const git = gitDirs.find((dir) => placeInside(place, dir));
  if (git) return `inside ${git}, the repository itself`;
  if (place.names.includes(join(root, CONFIG_FILE))) return `the project's configuration (${CONFIG_FILE})`;
  for (const dir of SOURCE_FOLDERS) {
    if (check.inSources && dir === join(ROOT, 'sources')) continue;
    if (placeInside(place, dir)) return `inside ${dir}, the project's own source`;
  }
  for (const dir of runtimeFolders()) {
    if (placeInside(place, dir)) return `inside ${dir}, the project's runtime, which only its setup writes`;
  }
  for (const dir of [...generatedFolders(paths), ...(check.generated ?? [])]) {
    if (placeInside(place, dir)) return `inside ${dir}, which only wwref itself writes`;
  }
  for (const name of place.names) {
    const references = referenceFolderAbove(name);
    if (references) return `inside ${references}, a reference folder (it holds a manifest), which only wwref itself writes`;
  }
  if ((check.kind ?? 'file') === 'folder') {
    for (const name of place.names) {
      const prefix = name.endsWith(sep) ? name : name + sep;
      for (const file of tracked) if (file.startsWith(prefix)) return `a folder holding ${file}, a file of the repository (tracked by git)`;
    }
  } else {
    const file = place.names.find((name) => tracked.has(name)) ?? hardLinkedFile(place.names[0]!, [...tracked, join(root, CONFIG_FILE)]);
    if (file && !check.ownFile?.(file)) return `${file}, a file of the repository (tracked by git), which this command did not write`;
  }
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
  const target = systemPath(path);
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
