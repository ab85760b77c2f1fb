// Acquisition: every raw file of a plan is resolved, sha256-checked, into a content-addressed cache.
// Order: (1) the cache, (2) mirror directories, (3) a file shipped inside a pinned Python package,
// (4) the upstream URL. A file whose size or sha256 differs from the plan never enters the cache.
//
// Paths named by the plan (mirror_path, package.path) must stay inside their folder after `..` and
// symbolic links are resolved, and only regular files are read (core/containment.ts). Nothing is held
// in memory whole: files are copied and downloads streamed in blocks to a temporary file in the cache
// (<cache>/tmp), hashed on the way, and renamed into place only when size and sha256 match. A download
// is aborted as soon as it exceeds the declared size (or MAX_RAW_FILE_BYTES) or sends no data for the
// read timeout; the temporary file is removed on any failure.
import { closeSync, lstatSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { createHash, randomUUID } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { UserError } from '../core/errors.ts';
import { hashDescriptor, insideRoot, openRegularFile, removeStaleEntries } from '../core/containment.ts';
import type { Settings } from '../core/settings.ts';
import { runPython, startPython, howItEnded } from '../execution/launcher.ts';
import { MAX_RAW_FILE_BYTES, type Plan, type RawFile } from '../catalog/plan.ts';

export type Origin = 'cache' | 'mirror' | 'package' | 'upstream';

export interface AcquiredFile {
  name: string;
  sha256: string;
  bytes: number;
  /** The cached copy (content-addressed by sha256). */
  path: string;
  origin: Origin;
  /** Where it came from (mirror path, package file or URL) on this acquisition. */
  from: string;
}

export interface AcquireOptions {
  /** The cache, the mirrors, the runtime (package files) and the download settings. */
  settings: Settings;
  /** Mirrors tried before the settings' ones. */
  mirrors?: readonly string[];
  /** Allow downloads from upstream URLs (default: the settings'). */
  online?: boolean;
  /** A download that sends no data for this many seconds is aborted (default: the settings'). */
  readTimeoutSeconds?: number;
}

export function rawCachePath(settings: Settings, sha256: string): string {
  return join(settings.paths.cache, 'raw', sha256.slice(0, 2), sha256);
}

/** The cache entry of a file, checked to lie inside <cache>/raw (also through links). */
function cacheEntry(cache: string, file: RawFile): string {
  return insideRoot(join(cache, 'raw'), `${file.sha256.slice(0, 2)}/${file.sha256}`, `raw cache entry of ${file.name}`);
}

function readTimeoutSeconds(options: AcquireOptions): number {
  const seconds = options.readTimeoutSeconds ?? options.settings.downloads.readTimeoutSeconds;
  if (!Number.isFinite(seconds) || seconds <= 0)
    throw new UserError(`the download read timeout must be a positive number of seconds, not '${seconds}'`);
  return seconds;
}

/** The mirrors of an acquisition, in the order they are tried. */
export function mirrorsOf(options: Pick<AcquireOptions, 'settings' | 'mirrors'>): string[] {
  const mirrors = [...new Set([...(options.mirrors ?? []).map((m) => resolve(m)), ...options.settings.mirrors])];
  for (const mirror of mirrors) {
    // a mirror is a folder (one not there yet is only empty); a file, FIFO or device is refused, never opened
    let stats: ReturnType<typeof statSync>;
    try {
      stats = statSync(mirror, { throwIfNoEntry: false });
    } catch (error) {
      throw new UserError(`mirror ${mirror} cannot be looked at: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
    if (stats && !stats.isDirectory())
      throw new UserError(`mirror ${mirror} is not a folder (a mirror holds raw files under their mirror_path)`);
  }
  return mirrors;
}

const TEMP_NAME = /^(?:copy|download|member)-(\d+)-[0-9a-f-]{36}\.part$/;

/** A new temporary file name in <cache>/tmp, after removing the ones of processes that no longer exist. */
function tempPath(cache: string, kind: 'copy' | 'download' | 'member'): string {
  const dir = join(cache, 'tmp');
  mkdirSync(dir, { recursive: true });
  removeStaleEntries(dir, TEMP_NAME);
  return join(dir, `${kind}-${process.pid}-${randomUUID()}.part`);
}

const sitePackagesMemo = new Map<string, string>();
/** site-packages of the settings' runtime (where `package.path` of a raw file is looked up), if it runs. */
export function sitePackages(settings: Settings): string | undefined {
  const python = settings.python.executable;
  if (!sitePackagesMemo.has(python)) {
    try {
      const { stdout } = runPython(settings, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])']);
      sitePackagesMemo.set(python, String(stdout).trim());
    } catch {
      sitePackagesMemo.set(python, '');
    }
  }
  return sitePackagesMemo.get(python) || undefined;
}

/** A size or content mismatch: the candidate is skipped and the next origin tried. */
class Mismatch extends UserError {}

/** Moves a temporary file whose size and sha256 were measured into the cache, if they are the plan's. */
function commit(settings: Settings, file: RawFile, tmp: string, measured: { sha256: string; bytes: number }, from: string): string {
  if (measured.bytes !== file.bytes) {
    throw new Mismatch(
      `size mismatch for ${file.name} from ${from}: the plan declares ${file.bytes} bytes, got ${measured.bytes}; not cached`,
    );
  }
  if (measured.sha256 !== file.sha256) {
    throw new Mismatch(`sha256 mismatch for ${file.name} from ${from}: expected ${file.sha256}, got ${measured.sha256}; not cached`);
  }
  const target = cacheEntry(settings.paths.cache, file);
  mkdirSync(dirname(target), { recursive: true });
  renameSync(tmp, target);
  return target;
}

/** Copies a regular file (checked before it is opened) into the cache, hashing it on the way. */
function admitFile(settings: Settings, file: RawFile, path: string, from: string, what: string): string {
  const { fd, size } = openRegularFile(path, what);
  const tmp = tempPath(settings.paths.cache, 'copy');
  let out: number | undefined;
  try {
    if (size !== file.bytes) {
      throw new Mismatch(
        `size mismatch for ${file.name} from ${from}: the plan declares ${file.bytes} bytes, the file has ${size}; not cached`,
      );
    }
    out = openSync(tmp, 'wx', 0o644);
    const target = out;
    const measured = hashDescriptor(fd, (block) => writeSync(target, block), file.bytes);
    closeSync(out);
    out = undefined;
    return commit(settings, file, tmp, measured, from);
  } finally {
    closeSync(fd);
    if (out !== undefined) closeSync(out);
    rmSync(tmp, { force: true });
  }
}

/**
 * Streams `url` into `tmp`, hashing it: aborted when more than `limit` bytes arrive (or are announced)
 * or when no data arrives for `timeoutSeconds`.
 */
async function download(
  url: string,
  tmp: string,
  limit: number,
  limitText: string,
  timeoutSeconds: number,
): Promise<{ sha256: string; bytes: number }> {
  const controller = new AbortController();
  let stalled = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      stalled = true;
      controller.abort();
    }, timeoutSeconds * 1000);
  };
  const hash = createHash('sha256');
  let bytes = 0;
  const out = await open(tmp, 'wx', 0o644);
  try {
    arm();
    const response = await fetch(url, { signal: controller.signal });
    clearTimeout(timer);
    if (!response.ok) throw new UserError(`HTTP ${response.status}`);
    const announced = response.headers.get('content-length');
    if (announced !== null && Number(announced) > limit) {
      throw new UserError(`the server announces ${announced} bytes, more than ${limitText}; not downloaded`);
    }
    if (!response.body) throw new UserError('the response has no body');
    const reader = response.body.getReader();
    for (;;) {
      arm();
      const { done, value } = await reader.read();
      clearTimeout(timer);
      if (done) break;
      bytes += value.byteLength;
      if (bytes > limit) throw new UserError(`the download exceeds ${limitText}: aborted after ${bytes} bytes`);
      hash.update(value);
      await out.write(value);
    }
  } catch (error) {
    if (stalled) throw new UserError(`no data for ${timeoutSeconds} s (after ${bytes} bytes): download aborted`);
    const cause = (error as { cause?: { message?: string; code?: string } }).cause;
    if (!(error instanceof UserError) && cause)
      throw new UserError(`${(error as Error).message}: ${cause.message ?? cause.code ?? String(cause)}`);
    throw error;
  } finally {
    clearTimeout(timer);
    controller.abort(); // closes the connection of a body not read to its end; no effect after a complete read
    await out.close();
  }
  return { sha256: hash.digest('hex'), bytes };
}

/** Extracts one member (a regular file) of a zip or tar archive with Python's standard library, at most `limit` bytes. */
async function extractMember(settings: Settings, archive: string, member: string, out: string, limit: number): Promise<void> {
  const script =
    'import shutil, sys, tarfile, zipfile\n' +
    'p, m, out, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])\n' +
    'if zipfile.is_zipfile(p):\n' +
    '    src = zipfile.ZipFile(p).open(m)\n' +
    'else:\n' +
    '    t = tarfile.open(p)\n' +
    '    info = t.getmember(m)\n' +
    '    if not info.isfile():\n' +
    '        sys.exit(f"member {m} is not a regular file")\n' +
    '    src = t.extractfile(info)\n' +
    'n = 0\n' +
    'with open(out, "xb") as dst:\n' +
    '    while block := src.read(1 << 20):\n' +
    '        n += len(block)\n' +
    '        if n > limit:\n' +
    '            sys.exit(f"member {m} is larger than the {limit} bytes declared")\n' +
    '        dst.write(block)\n';
  const child = await startPython(settings, ['-c', script, archive, member, out, String(limit)], { reject: false });
  if (child.exitCode !== 0) {
    const last = howItEnded(child);
    throw new UserError(`cannot extract ${member}: ${last}`);
  }
}

/** Downloads (and extracts) the upstream file into the cache; every temporary file is removed on failure. */
async function admitUpstream(settings: Settings, file: RawFile, from: string, timeoutSeconds: number): Promise<string> {
  const archive = tempPath(settings.paths.cache, 'download');
  const member = file.upstream_member ? tempPath(settings.paths.cache, 'member') : undefined;
  try {
    // an archive is larger than its member: only the global cap bounds it
    const [limit, limitText] = file.upstream_member
      ? [MAX_RAW_FILE_BYTES, `the ${MAX_RAW_FILE_BYTES} bytes (2 GiB) an archive may have`]
      : [file.bytes, `the ${file.bytes} bytes declared by the plan`];
    const measured = await download(file.upstream_url!, archive, limit, limitText, timeoutSeconds);
    if (!member) return commit(settings, file, archive, measured, from);
    await extractMember(settings, archive, file.upstream_member!, member, file.bytes);
    const { fd } = openRegularFile(member, 'extracted member');
    let hashed: { sha256: string; bytes: number };
    try {
      hashed = hashDescriptor(fd, undefined, file.bytes);
    } finally {
      closeSync(fd);
    }
    return commit(settings, file, member, hashed, from);
  } finally {
    rmSync(archive, { force: true });
    if (member) rmSync(member, { force: true });
  }
}

export async function acquireFile(file: RawFile, options: AcquireOptions): Promise<AcquiredFile> {
  const looked: string[] = [];
  const problems: string[] = [];
  const done = (path: string, origin: Origin, from: string): AcquiredFile => ({
    name: file.name,
    sha256: file.sha256,
    bytes: file.bytes,
    path,
    origin,
    from,
  });
  if (!Number.isSafeInteger(file.bytes) || file.bytes <= 0 || file.bytes > MAX_RAW_FILE_BYTES) {
    throw new UserError(`raw file ${file.name} declares ${file.bytes} bytes; expected 1 to ${MAX_RAW_FILE_BYTES} (2 GiB)`);
  }
  const timeoutSeconds = readTimeoutSeconds(options);

  const cached = cacheEntry(options.settings.paths.cache, file);
  looked.push(`cache ${cached}`);
  const entry = lstatSync(cached, { throwIfNoEntry: false });
  if (entry) {
    let intact = false;
    if (entry.isFile()) {
      const { fd, size } = openRegularFile(cached, 'raw cache entry');
      try {
        intact = size === file.bytes && hashDescriptor(fd, undefined, file.bytes).sha256 === file.sha256;
      } finally {
        closeSync(fd);
      }
    }
    if (intact) return done(cached, 'cache', cached);
    // A corrupted cache entry is dropped (a link itself, not its target) and re-acquired.
    rmSync(cached, { recursive: entry.isDirectory(), force: true });
    problems.push(`cache entry ${cached} was corrupted and removed`);
  }

  for (const mirror of mirrorsOf(options)) {
    const shown = join(mirror, file.mirror_path);
    looked.push(`mirror ${shown}`);
    const candidate = insideRoot(mirror, file.mirror_path, `mirror_path of raw file ${file.name}`);
    if (!lstatSync(candidate, { throwIfNoEntry: false })) continue;
    try {
      return done(admitFile(options.settings, file, candidate, shown, `mirror file of ${file.name}`), 'mirror', shown);
    } catch (error) {
      if (!(error instanceof Mismatch)) throw error;
      problems.push(error.message);
    }
  }

  if (file.package) {
    const base = sitePackages(options.settings);
    const shown = base ? join(base, file.package.path) : undefined;
    looked.push(`package ${file.package.distribution} ${file.package.version}: ${shown ?? '(no Python runtime)'}`);
    if (base && shown) {
      const candidate = insideRoot(base, file.package.path, `package.path of raw file ${file.name}`);
      if (lstatSync(candidate, { throwIfNoEntry: false })) {
        try {
          return done(admitFile(options.settings, file, candidate, shown, `package file of ${file.name}`), 'package', shown);
        } catch (error) {
          if (!(error instanceof Mismatch)) throw error;
          problems.push(error.message);
        }
      }
    }
  }

  const online = options.online ?? options.settings.downloads.online;
  if (file.upstream_url && online) {
    const from = file.upstream_member ? `${file.upstream_url} (member ${file.upstream_member})` : file.upstream_url;
    looked.push(`upstream ${from}`);
    try {
      return done(await admitUpstream(options.settings, file, from, timeoutSeconds), 'upstream', from);
    } catch (error) {
      problems.push(`${from}: ${(error as Error).message}`);
    }
  }

  throw new UserError(
    [
      `raw file ${file.name} (sha256 ${file.sha256}) could not be acquired. Looked in:`,
      ...looked.map((l) => `  - ${l}`),
      ...problems.map((p) => `  ! ${p}`),
    ].join('\n'),
  );
}

export async function acquirePlan(plan: Plan, options: AcquireOptions): Promise<AcquiredFile[]> {
  const files: AcquiredFile[] = [];
  for (const file of plan.raw_files) files.push(await acquireFile(file, options));
  return files;
}
