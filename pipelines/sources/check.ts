// Static checks of a construction plan against the raw files it can reach, before anything runs
// (`wwref add-source --dry-run`): every raw file found in the cache, a mirror or its pinned package is
// measured against its declared size and sha256, and the recipe parameters are read against the file's
// contents as the recipe reads them (workflows/prepare/inspect.py: columns, header row, numeric
// features, target, labels; series columns; images). Each problem is reported once, with the plan
// field it concerns and how to fix it. Nothing is written: no cache entry, no prepared file.
import { closeSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import type { LoadedPlan } from '../catalog/catalog.ts';
import type { RawFile } from '../catalog/plan.ts';
import { UserError } from '../core/errors.ts';
import { hashDescriptor, insideRoot, openRegularFile } from '../core/containment.ts';
import type { Settings } from '../core/settings.ts';
import { runPython, howItEnded } from '../execution/launcher.ts';
import { mirrorsOf, rawCachePath, sitePackages, type AcquireOptions } from './acquire.ts';

export interface PlanProblem {
  /** The plan field, e.g. ['raw_files', 0, 'sha256'] or ['preparation', 'params', 'features', 1]. */
  path: (string | number)[];
  message: string;
  /** What to change. */
  fix?: string;
}

export interface StaticCheck {
  problems: PlanProblem[];
  /** What was checked, and what could not be. */
  notes: string[];
}

interface Candidate {
  path: string;
  /** "mirror /x/y", "package scikit-learn 1.6.1 (…)", "cache …". */
  where: string;
}

/** The files acquisition would try for a raw file, in its order, that exist here (the upstream URL is not fetched). */
function candidates(file: RawFile, index: number, options: AcquireOptions, problems: PlanProblem[]): Candidate[] {
  const found: Candidate[] = [];
  const exists = (path: string) => lstatSync(path, { throwIfNoEntry: false }) !== undefined;
  const cached = rawCachePath(options.settings, file.sha256);
  if (exists(cached)) found.push({ path: cached, where: `the raw cache (${cached})` });
  for (const mirror of mirrorsOf(options)) {
    try {
      const path = insideRoot(mirror, file.mirror_path, `mirror_path of raw file ${file.name}`);
      if (exists(path)) found.push({ path, where: `mirror ${join(mirror, file.mirror_path)}` });
    } catch (error) {
      problems.push({
        path: ['raw_files', index, 'mirror_path'],
        message: (error as Error).message,
        fix: 'name a file inside the mirror folder',
      });
    }
  }
  if (file.package) {
    const base = sitePackages(options.settings);
    if (base) {
      try {
        const path = insideRoot(base, file.package.path, `package.path of raw file ${file.name}`);
        if (exists(path)) found.push({ path, where: `package ${file.package.distribution} ${file.package.version} (${path})` });
        else
          problems.push({
            path: ['raw_files', index, 'package', 'path'],
            message: `${file.package.distribution} ${file.package.version} has no file ${file.package.path} in ${base}`,
            fix: "give the path inside site-packages ('wwref new-source --package DIST:PATH' writes it)",
          });
      } catch (error) {
        problems.push({ path: ['raw_files', index, 'package', 'path'], message: (error as Error).message });
      }
    }
  }
  return found;
}

function measure(path: string): { sha256: string; bytes: number } {
  const { fd } = openRegularFile(path, 'raw file');
  try {
    return hashDescriptor(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Raw files: each reachable one measured against the plan (size and sha256 reported once each, for
 * the first place acquisition would take it from); returns the files whose contents can be read.
 */
function checkRawFiles(loaded: LoadedPlan, options: AcquireOptions, check: StaticCheck): Record<string, string> {
  const readable: Record<string, string> = {};
  const online = options.online ?? options.settings.downloads.online;
  loaded.plan.raw_files.forEach((file, i) => {
    let found: Candidate[];
    try {
      found = candidates(file, i, options, check.problems);
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      check.problems.push({ path: ['raw_files', i], message: error.message });
      return;
    }
    if (!found.length) {
      if (file.upstream_url && online) {
        check.notes.push(
          `${file.name}: not in the cache, a mirror or a package here; size and sha256 are checked when it is downloaded from ${file.upstream_url}`,
        );
      } else {
        const mirrors = mirrorsOf(options);
        check.problems.push({
          path: ['raw_files', i],
          message:
            `${file.name} cannot be acquired: not in the raw cache, ` +
            `not at mirror_path under ${mirrors.length ? mirrors.join(', ') : '(no mirror configured)'}` +
            `${file.package ? ', not in its package' : ', no package'}` +
            `${file.upstream_url ? ' (downloads are off)' : ', no upstream_url'}`,
          fix: `copy the file to <mirror>/${file.mirror_path} (or pass --mirror DIR), or give package or upstream_url`,
        });
      }
      return;
    }
    let measured: (Candidate & { sha256: string; bytes: number })[];
    try {
      measured = found.map((c) => ({ ...c, ...measure(c.path) }));
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      check.problems.push({ path: ['raw_files', i], message: error.message });
      return;
    }
    const match = measured.find((m) => m.sha256 === file.sha256 && m.bytes === file.bytes);
    const used = match ?? measured[0]!;
    readable[file.name] = used.path;
    if (match) {
      check.notes.push(`${file.name}: ${file.bytes} bytes, sha256 ${file.sha256.slice(0, 12)}… as declared (${match.where})`);
      return;
    }
    if (used.sha256 !== file.sha256) {
      check.problems.push({
        path: ['raw_files', i, 'sha256'],
        message: `${file.name} from ${used.where} has sha256 ${used.sha256}, the plan declares ${file.sha256}`,
        fix: `if this is the file you mean, set sha256 to "${used.sha256}"; otherwise correct mirror_path or package`,
      });
    }
    if (used.bytes !== file.bytes) {
      check.problems.push({
        path: ['raw_files', i, 'bytes'],
        message: `${file.name} from ${used.where} has ${used.bytes} bytes, the plan declares ${file.bytes}`,
        fix: `if this is the file you mean, set bytes to ${used.bytes}`,
      });
    }
  });
  return readable;
}

/** The longest an inspection may take (a plan's raw files are read whole by the dry run's check). */
const INSPECT_TIMEOUT_MS = 10 * 60_000;

/** Runs workflows/prepare/inspect.py on one request and returns its JSON answer (stopped past INSPECT_TIMEOUT_MS). */
export function inspectRaw(settings: Settings, request: Record<string, unknown>): Record<string, unknown> {
  const child = runPython(settings, ['-m', 'workflows.prepare.inspect'], {
    input: JSON.stringify(request),
    reject: false,
    maxBuffer: 64 * 1024 * 1024,
    timeout: INSPECT_TIMEOUT_MS,
  });
  if (child.exitCode !== 0) {
    const last = howItEnded(child);
    throw new UserError(`the raw-file inspection failed: ${last}`);
  }
  let answer: Record<string, unknown>;
  try {
    answer = JSON.parse(String(child.stdout)) as Record<string, unknown>;
  } catch {
    throw new UserError('the raw-file inspection answered something that is not JSON');
  }
  if (typeof answer.error === 'string') throw new UserError(answer.error);
  return answer;
}

/** Every static problem of a (schema-valid) plan: raw file identities, then the recipe parameters against the contents. */
export function staticCheck(loaded: LoadedPlan, options: AcquireOptions): StaticCheck {
  const check: StaticCheck = { problems: [], notes: [] };
  const readable = checkRawFiles(loaded, options, check);
  if (Object.keys(readable).length) {
    const { recipe, params } = loaded.plan.preparation;
    try {
      const answer = inspectRaw(options.settings, { mode: 'check', recipe, params, raw: readable }) as {
        problems: PlanProblem[];
        notes: string[];
      };
      check.problems.push(...answer.problems);
      check.notes.push(...answer.notes);
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      check.notes.push(`contents not checked: ${error.message}`);
    }
  }
  // one line per problem, even when two checks find the same thing
  const seen = new Set<string>();
  check.problems = check.problems.filter((p) => {
    const key = `${p.path.join('.')}\u0000${p.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return check;
}

/** "  - raw_files.0.sha256: … (fix: …)", one line per problem. */
export function problemLines(problems: readonly PlanProblem[]): string[] {
  return problems.map((p) => `  - ${p.path.join('.')}: ${p.message}${p.fix ? ` (fix: ${p.fix})` : ''}`);
}
