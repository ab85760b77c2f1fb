// Code and runtime identity recorded in manifests and journals.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { simpleGit } from 'simple-git';
import * as z from 'zod';
import { readContract } from '../core/contracts.ts';
import { UserError } from '../core/errors.ts';
import { digest, sha256Hex } from '../core/hashing.ts';
import { declaredRuntimes, runtimePins, ROOT, type RuntimeDeclaration } from '../core/paths.ts';

/** What the workflow-code digest covers and where the bit-deciding packages are marked (contracts/identity.json). */
const IDENTITY = readContract(
  'identity.json',
  z.strictObject({
    code: z.strictObject({
      folders: z.array(z.strictObject({ folder: z.string().min(1), suffix: z.string().min(1), subfolders: z.boolean() })).min(1),
      skipped_folders: z.array(z.string().min(1)),
    }),
    bit_deciding: z.strictObject({ requirements: z.string().min(1), mark: z.string().min(1) }),
  }),
);

function requirementLines(file = join(ROOT, IDENTITY.bit_deciding.requirements)): string[] {
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
 * workflows/requirements.txt (contracts/identity.json). The worker reads the marks from that file
 * whatever its runtime, so every runtime's requirements file marks the same packages
 * (test/jobs/runtime.test.ts).
 */
export const REPLAY_PACKAGES: readonly string[] = requirementLines()
  .filter((line) => line.includes('==') && line.includes(IDENTITY.bit_deciding.mark))
  .map((line) => line.split('==')[0]!.trim().toLowerCase());

/**
 * The declared runtime whose bit-deciding pins are exactly these versions (a reference manifest's
 * `versions` name the runtime that built it), or undefined when none matches.
 */
export function runtimeOfVersions(versions: Readonly<Record<string, string>>): string | undefined {
  return declaredRuntimes().find((r) => {
    const pins = runtimePins(r);
    return (
      REPLAY_PACKAGES.every((p) => versions[p] === undefined || pins[p] === versions[p]) &&
      REPLAY_PACKAGES.some((p) => versions[p] !== undefined)
    );
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
    throw new UserError(
      `${dir} holds references of runtime '${built}'; ` +
        `runtime '${runtime.name}' writes its references into a folder of its own (pass --references DIR, e.g. outputs/${runtime.name})`,
    );
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
  if (wanted && wanted !== running)
    drift.push(`the expected versions are runtime '${wanted}' (wwref.config.json): pass --runtime ${wanted}`);
  return drift;
}

function codeFiles(dir: string, suffix: string, subfolders: boolean): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory())
      return subfolders && !IDENTITY.code.skipped_folders.includes(entry.name) ? codeFiles(path, suffix, subfolders) : [];
    return entry.name.endsWith(suffix) ? [path] : [];
  });
}

/**
 * {path relative to the repository: sha256} of the files the workers execute or read: the Python
 * workflow code and the contracts it reads (contracts/identity.json says which).
 */
export function workflowFiles(): Record<string, string> {
  const files = IDENTITY.code.folders.flatMap(({ folder, suffix, subfolders }) => codeFiles(join(ROOT, folder), suffix, subfolders)).sort();
  return Object.fromEntries(files.map((f) => [relative(ROOT, f), sha256Hex(readFileSync(f))]));
}

/** digest of workflowFiles(): the identity of what executes the records. */
export function workflowsSha256(): string {
  return digest(workflowFiles());
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
