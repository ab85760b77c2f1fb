// outputs/references/manifest.json: what was built, with what code and runtime, and the sha256 of
// every table and prepared input, so that replay can refuse a changed file before it runs anything.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { UserError } from '../core/errors.ts';
import { RecordedNumerics } from '../execution/numerics.ts';
import { writeJsonAtomic } from '../core/fsutil.ts';
import { referencesDir } from '../core/paths.ts';

export const ConditionEntry = z.strictObject({
  source: z.string(),
  family: z.string(),
  dimensions: z.number().int(),
  records: z.number().int(),
  failed: z.number().int(),
  table: z.string(),
  table_sha256: z.string(),
  plan_file: z.string(),
  plan_sha256: z.string(),
  prepared_files: z.record(z.string(), z.string()),
  published: z.strictObject({ comparable: z.boolean(), prepared_match: z.string() }),
  equivalence_violations: z.array(z.string()),
  native_seconds: z.number(),
  /** Set when the plan's hash changed after this condition's references had been written (add-source --force). */
  supersedes_plan_sha256: z.array(z.string()).optional(),
});
export type ConditionEntry = z.infer<typeof ConditionEntry>;

export const ReferenceManifest = z.strictObject({
  manifest_version: z.literal(1),
  generator: z.string(),
  code: z.strictObject({ git_commit: z.string().nullable(), git_dirty: z.boolean().nullable(), workflows_sha256: z.string() }),
  python: z.string(),
  versions: z.record(z.string(), z.string()),
  threads: z.strictObject({ environment: z.record(z.string(), z.string()), threadpoolctl_limit: z.literal(1) }),
  /** The numerical profile and the building worker's report (absent in manifests written before profiles). */
  numerics: RecordedNumerics.optional(),
  /** What ran the records: executor kind, and the identity and profile of each worker. */
  executor: z
    .strictObject({
      kind: z.string(),
      worker_count: z.number().int(),
      workers: z.array(
        z.strictObject({ host: z.string(), pid: z.number().int(), cpu_model: z.string(), libc: z.string(), blas: z.array(z.string()), profile: z.string() }),
      ),
    })
    .optional(),
  conditions: z.record(z.string(), ConditionEntry),
});
export type ReferenceManifest = z.infer<typeof ReferenceManifest>;

export function referenceManifestPath(dir = referencesDir()): string {
  return join(dir, 'manifest.json');
}

export function readReferenceManifest(dir = referencesDir()): ReferenceManifest | undefined {
  const path = referenceManifestPath(dir);
  if (!existsSync(path)) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new UserError(`reference manifest ${path} is not JSON: ${(error as Error).message}`);
  }
  const parsed = ReferenceManifest.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`reference manifest ${path} is malformed at ${issue.path.join('.')}: ${issue.message}`);
  }
  return parsed.data;
}

export function writeReferenceManifest(manifest: ReferenceManifest, dir = referencesDir()): void {
  const sorted = Object.fromEntries(Object.entries(manifest.conditions).sort(([a], [b]) => a.localeCompare(b)));
  writeJsonAtomic(referenceManifestPath(dir), { ...manifest, conditions: sorted });
}

/** The entries of the named conditions (every condition when none is named), refusing an unknown one. */
export function selectEntries(manifest: ReferenceManifest, dir: string, conditions: readonly string[] = []): [string, ConditionEntry][] {
  const ids = conditions.length ? [...conditions] : Object.keys(manifest.conditions);
  return ids.map((id) => {
    const entry = manifest.conditions[id];
    if (!entry) {
      const known = Object.keys(manifest.conditions);
      const listed = known.length > 8 ? `${known.slice(0, 8).join(', ')}, … (${known.length} in all)` : known.join(', ') || 'nothing';
      throw new UserError(`condition '${id}' is not in the reference manifest ${referenceManifestPath(dir)} (it lists ${listed})`);
    }
    return [id, entry];
  });
}

/** The manifest of a reference folder, or a UserError saying how to make one. */
export function requireReferenceManifest(dir = referencesDir()): ReferenceManifest {
  const manifest = readReferenceManifest(dir);
  if (!manifest) throw new UserError(`no reference manifest in ${dir}; run 'wwref rebuild' (or pass --references DIR)`);
  return manifest;
}
