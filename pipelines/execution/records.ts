// One reference record per (condition, mask): what the native run produced and what verified it.
import * as z from 'zod';
import { CapturedWarning } from './protocol.ts';

export const RecordStatus = z.enum(['ok', 'failed']);

export const ReferenceRecord = z.strictObject({
  condition: z.string(),
  source: z.string(),
  family: z.string(),
  dimensions: z.number().int(),
  mask: z.string(),
  status: RecordStatus,
  /** Why a failed record failed (exception, timeout, crash, disagreeing hash or metric). */
  error: z.string().nullable(),
  utility: z.number().nullable(),
  native_metric: z.string().nullable(),
  native_value: z.number().nullable(),
  /** The same metric recomputed by the independent TypeScript implementation. */
  independent_value: z.number().nullable(),
  normalization_scale: z.number().nullable(),
  prediction_sha256: z.string().nullable(),
  warnings: z.array(CapturedWarning),
  wall_seconds: z.number().nullable(),
  prediction_wall_seconds: z.number().nullable(),
  metric_wall_seconds: z.number().nullable(),
  plan_sha256: z.string(),
  /** Family-specific fields, e.g. the beat-detection tolerance table. */
  extras: z.record(z.string(), z.unknown()),
});
export type ReferenceRecord = z.infer<typeof ReferenceRecord>;
