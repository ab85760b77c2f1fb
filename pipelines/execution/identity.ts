// Code and runtime identity recorded in manifests and journals.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { simpleGit } from 'simple-git';
import { digest, sha256Hex } from '../core/hashing.ts';
import { ROOT, WORKFLOWS_DIR } from '../core/paths.ts';

function requirementLines(): string[] {
  return readFileSync(join(WORKFLOWS_DIR, 'requirements.txt'), 'utf8').split('\n');
}

/** Exact versions of workflows/requirements.txt (name -> version). */
export function pinnedVersions(): Record<string, string> {
  const pins: Record<string, string> = {};
  for (const line of requirementLines()) {
    const match = /^\s*([A-Za-z0-9_.-]+)==([^\s#]+)/.exec(line);
    if (match) pins[match[1]!.toLowerCase()] = match[2]!;
  }
  return pins;
}

/** The packages whose versions decide the bits of a record: marked "decides bits" in workflows/requirements.txt. */
export const REPLAY_PACKAGES: readonly string[] = requirementLines()
  .filter((line) => line.includes('==') && line.includes('# decides bits'))
  .map((line) => line.split('==')[0]!.trim().toLowerCase());

/** Installed versions that differ from the pins, as readable lines. */
export function versionDrift(installed: Record<string, string>, expected: Record<string, string>): string[] {
  return REPLAY_PACKAGES.filter((p) => expected[p] !== undefined && installed[p] !== expected[p]).map(
    (p) => `${p}: expected ${expected[p]}, installed ${installed[p] ?? 'none'}`,
  );
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
