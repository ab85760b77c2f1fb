// The schema of a reference folder's manifest.json: what was built, with what code and runtime, and the
// sha256 of every table and prepared input. Reading and writing it is the store's (store.ts).
import * as z from 'zod';
import { RecordedNumerics } from '../execution/numerics.ts';

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

/** The generator a manifest written by this wwref names. */
export const GENERATOR = 'wwref 0.1.0';

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
        z.strictObject({
          host: z.string(),
          pid: z.number().int(),
          cpu_model: z.string(),
          libc: z.string(),
          blas: z.array(z.string()),
          profile: z.string(),
        }),
      ),
    })
    .optional(),
  conditions: z.record(z.string(), ConditionEntry),
});
export type ReferenceManifest = z.infer<typeof ReferenceManifest>;
