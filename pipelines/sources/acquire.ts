// Acquisition: every raw file of a plan is resolved, sha256-checked, into a content-addressed cache.
// Order: (1) the cache, (2) mirror directories, (3) a file shipped inside a pinned Python package,
// (4) the upstream URL. A file whose sha256 differs never enters the cache.
import { execaSync } from 'execa';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../core/errors.ts';
import { sha256Hex } from '../core/hashing.ts';
import { cacheDir, mirrorDirs, pythonExecutable } from '../core/paths.ts';
import type { Plan, RawFile } from '../catalog/plan.ts';

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
  mirrors?: readonly string[];
  /** Allow downloads from upstream URLs (default: on unless WWREF_OFFLINE=1). */
  online?: boolean;
}

export function rawCachePath(sha256: string): string {
  return join(cacheDir(), 'raw', sha256.slice(0, 2), sha256);
}

let sitePackagesMemo: string | undefined;
function sitePackages(): string | undefined {
  if (sitePackagesMemo === undefined) {
    try {
      const { stdout } = execaSync(pythonExecutable(), ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])']);
      sitePackagesMemo = stdout.trim();
    } catch {
      sitePackagesMemo = '';
    }
  }
  return sitePackagesMemo || undefined;
}

/** Copies `bytes` into the cache only if its sha256 is the expected one. */
function admit(file: RawFile, bytes: Uint8Array, from: string): string {
  const actual = sha256Hex(bytes);
  if (actual !== file.sha256) {
    throw new UserError(`sha256 mismatch for ${file.name} from ${from}: expected ${file.sha256}, got ${actual}; not cached`);
  }
  const target = rawCachePath(file.sha256);
  mkdirSync(join(target, '..'), { recursive: true });
  const tmp = `${target}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, target);
  return target;
}

async function download(url: string): Promise<Uint8Array> {
  const response = await fetch(url, { signal: AbortSignal.timeout(60_000) });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/** Extracts one member of a zip or tar archive with Python's standard library. */
function extractMember(archive: Uint8Array, member: string): Uint8Array {
  const dir = join(cacheDir(), 'tmp');
  mkdirSync(dir, { recursive: true });
  const archivePath = join(dir, `archive-${process.pid}-${Date.now()}`);
  writeFileSync(archivePath, archive);
  try {
    const script =
      'import sys, tarfile, zipfile\n' +
      'p, m = sys.argv[1], sys.argv[2]\n' +
      'data = zipfile.ZipFile(p).read(m) if zipfile.is_zipfile(p) else tarfile.open(p).extractfile(m).read()\n' +
      'sys.stdout.buffer.write(data)\n';
    const { stdout } = execaSync(pythonExecutable(), ['-c', script, archivePath, member], { encoding: 'buffer' });
    return new Uint8Array(stdout);
  } finally {
    rmSync(archivePath, { force: true });
  }
}

export async function acquireFile(file: RawFile, options: AcquireOptions = {}): Promise<AcquiredFile> {
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

  const cached = rawCachePath(file.sha256);
  looked.push(`cache ${cached}`);
  if (existsSync(cached)) {
    if (sha256Hex(readFileSync(cached)) === file.sha256) return done(cached, 'cache', cached);
    rmSync(cached); // a corrupted cache entry is dropped and re-acquired
    problems.push(`cache entry ${cached} was corrupted and removed`);
  }

  for (const mirror of mirrorDirs(options.mirrors)) {
    const candidate = join(mirror, file.mirror_path);
    looked.push(`mirror ${candidate}`);
    if (!existsSync(candidate)) continue;
    try {
      return done(admit(file, readFileSync(candidate), candidate), 'mirror', candidate);
    } catch (error) {
      problems.push((error as Error).message);
    }
  }

  if (file.package) {
    const base = sitePackages();
    const candidate = base ? join(base, file.package.path) : undefined;
    looked.push(`package ${file.package.distribution} ${file.package.version}: ${candidate ?? '(no Python runtime)'}`);
    if (candidate && existsSync(candidate)) {
      try {
        return done(admit(file, readFileSync(candidate), candidate), 'package', candidate);
      } catch (error) {
        problems.push((error as Error).message);
      }
    }
  }

  const online = options.online ?? process.env.WWREF_OFFLINE !== '1';
  if (file.upstream_url && online) {
    const from = file.upstream_member ? `${file.upstream_url} (member ${file.upstream_member})` : file.upstream_url;
    looked.push(`upstream ${from}`);
    try {
      let bytes = await download(file.upstream_url);
      if (file.upstream_member) bytes = extractMember(bytes, file.upstream_member);
      return done(admit(file, bytes, from), 'upstream', from);
    } catch (error) {
      problems.push(`${from}: ${(error as Error).message}`);
    }
  }

  throw new UserError(
    [`raw file ${file.name} (sha256 ${file.sha256}) could not be acquired. Looked in:`, ...looked.map((l) => `  - ${l}`), ...problems.map((p) => `  ! ${p}`)].join('\n'),
  );
}

export async function acquirePlan(plan: Plan, options: AcquireOptions = {}): Promise<AcquiredFile[]> {
  const files: AcquiredFile[] = [];
  for (const file of plan.raw_files) files.push(await acquireFile(file, options));
  return files;
}

