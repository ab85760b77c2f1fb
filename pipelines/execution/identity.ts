// Code and runtime identity recorded in manifests and journals.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { simpleGit } from 'simple-git';
import { UserError } from '../core/errors.ts';
import { digest, sha256Hex } from '../core/hashing.ts';
import { declaredRuntimes, runtimePins, ROOT, WORKFLOWS_DIR, type RuntimeDeclaration } from '../core/paths.ts';

function requirementLines(file = join(WORKFLOWS_DIR, 'requirements.txt')): string[] {
  return readFileSync(file, 'utf8').split('\n');
}

/**
 * Exact versions of the active runtime (name -> version): workflows/requirements.txt for `pinned`,
 * the runtime's own requirements file for `--runtime NAME` (wwref.config.json).
 */
export function pinnedVersions(runtime: RuntimeDeclaration): Record<string, string> {
  return runtimePins(runtime);
}

/**
 * The packages whose versions decide the bits of a record: marked "decides bits" in
 * workflows/requirements.txt. The worker reads the marks from that file whatever its runtime, so every
 * runtime's requirements file marks the same packages (test/jobs/runtime.test.ts).
 */
export const REPLAY_PACKAGES: readonly string[] = requirementLines()
  .filter((line) => line.includes('==') && line.includes('# decides bits'))
  .map((line) => line.split('==')[0]!.trim().toLowerCase());

/**
 * The declared runtime whose bit-deciding pins are exactly these versions (a reference manifest's
 * `versions` name the runtime that built it), or undefined when none matches.
 */
export function runtimeOfVersions(versions: Readonly<Record<string, string>>): string | undefined {
  return declaredRuntimes().find((r) => {
    const pins = runtimePins(r);
    return REPLAY_PACKAGES.every((p) => versions[p] === undefined || pins[p] === versions[p]) && REPLAY_PACKAGES.some((p) => versions[p] !== undefined);
  })?.name;
}

/**
 * Refuses to write into a reference folder built under another declared runtime (e.g.
 * `rebuild --runtime current` into outputs/references, which holds the pinned references): references
 * of another runtime go into their own folder (--references DIR). A folder without a manifest, or
 * whose versions match no declared runtime, is left to the usual version checks. `versions` are the
 * folder manifest's (read by the reference store).
 */
export function checkRuntimeTarget(dir: string, versions: Record<string, string> | undefined, runtime: RuntimeDeclaration): void {
  const built = versions ? runtimeOfVersions(versions) : undefined;
  if (built && built !== runtime.name) {
    throw new UserError(`${dir} holds references of runtime '${built}'; runtime '${runtime.name}' writes its references into a folder of its own (pass --references DIR, e.g. outputs/${runtime.name})`);
  }
}

/**
 * Installed versions that differ from the expected ones, as readable lines. When the expected
 * versions are the pins of another declared runtime (references built under `--runtime current`,
 * replayed without it), a last line says which runtime to pass.
 */
export function versionDrift(installed: Record<string, string>, expected: Record<string, string>): string[] {
  const drift = REPLAY_PACKAGES.filter((p) => expected[p] !== undefined && installed[p] !== expected[p]).map(
    (p) => `${p}: expected ${expected[p]}, installed ${installed[p] ?? 'none'}`,
  );
  if (!drift.length) return drift;
  const wanted = runtimeOfVersions(expected);
  const running = runtimeOfVersions(installed);
  if (wanted && wanted !== running) drift.push(`the expected versions are runtime '${wanted}' (wwref.config.json): pass --runtime ${wanted}`);
  return drift;
}

function pythonFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === '__pycache__' ? [] : pythonFiles(path);
    return entry.name.endsWith('.py') ? [path] : [];
  });
}

/** digest of {relative path: sha256} over the Python workflow code: what executes the records. */
export function workflowsSha256(): string {
  const files = pythonFiles(WORKFLOWS_DIR).sort();
  return digest(Object.fromEntries(files.map((f) => [relative(ROOT, f), sha256Hex(readFileSync(f))])));
}

export interface GitIdentity {
  commit: string | null;
  dirty: boolean | null;
}

export async function gitIdentity(): Promise<GitIdentity> {
  try {
    const git = simpleGit(ROOT);
    const commit = (await git.revparse(['HEAD'])).trim();
    const status = await git.status();
    return { commit, dirty: !status.isClean() };
  } catch {
    return { commit: null, dirty: null };
  }
}
