// The journal of a rebuild: each finished ok record of a condition is appended as one JSON line
// holding the worker's raw run (prediction, its hash, native value, utility, scale, extras, warnings,
// timings) under the identity of what produced it (plan, prepared input, runtime, code, versions,
// numerics). The journal is not trusted: on resume a run of the same identity becomes a record only
// after reverifyRun has checked it as a fresh run is checked, plus the family's utility rule
// (rebuild.ts binds a scale taken from the data to a record computed now). The line checksum only
// catches accidental damage: anyone can recompute it. The journal is dropped once the table is written.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import type { FamilyName } from '../catalog/families.ts';
import { lstatOrNothing, readRegularFile } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';
import { appendNoFollow } from '../core/fsutil.ts';
import { digest } from '../core/hashing.ts';
import { RunResult, type Encoded } from './protocol.ts';
import { independentMetric, verifyRun, type Truth, type Verification } from './verification/verify.ts';

export interface JournalIdentity {
  condition: string;
  plan: string;
  prepared: Record<string, string>;
  /** The runtime's name (settings.runtime): versions alone do not tell two runtimes with the same pins apart. */
  runtime: string;
  code: string;
  versions: Record<string, string>;
  numerics: string;
}

/**
 * Predictions above this many bytes are journaled without their bytes, so their records run again
 * on resume instead of being trusted. The largest predictions of the catalog are the images of
 * image_restoration (astronaut: 256×256 float64 = 512 KiB; coffee and rocket 342 KiB) and they compute
 * in under 0.1 s; everything else is under 60 KiB (dry_bean's labels). 1 MiB keeps every catalog
 * prediction with room for a larger image, and bounds a 64-mask journal to about 90 MB of base64,
 * which resume reads at once; a prediction beyond that is cheaper to recompute than to keep.
 */
export const KEPT_PREDICTION_BYTES = 1024 * 1024;
/** A journal larger than this is damaged (64 masks of at most KEPT_PREDICTION_BYTES, each run a few times): refused unread. */
export const JOURNAL_MAX_BYTES = 256 << 20;

/** A prediction as the journal keeps it: ndarray bytes as base64, JSON as it is. */
const KeptPrediction = z.union([
  z.strictObject({ ndarray: z.strictObject({ dtype: z.string(), shape: z.array(z.number().int().nonnegative()), base64: z.base64() }) }),
  z.strictObject({ json: z.unknown() }),
]);
type KeptPrediction = z.infer<typeof KeptPrediction>;

/** One line: the run of `mask`, its prediction null when it was too large to keep. */
const Entry = z.strictObject({
  identity: z.string(),
  mask: z.string(),
  run: RunResult.extend({ prediction: KeptPrediction.nullable() }),
  sha256: z.string(),
});
type Entry = z.infer<typeof Entry>;

function predictionBytes(prediction: Encoded): number {
  return 'ndarray' in prediction ? prediction.ndarray.bytes.byteLength : Buffer.byteLength(JSON.stringify(prediction.json) ?? '');
}

function kept(prediction: Encoded): KeptPrediction | null {
  if (predictionBytes(prediction) > KEPT_PREDICTION_BYTES) return null;
  if ('json' in prediction) return { json: prediction.json };
  const { dtype, shape, bytes } = prediction.ndarray;
  return { ndarray: { dtype, shape, base64: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64') } };
}

function restored(prediction: KeptPrediction): Encoded {
  if ('json' in prediction) return { json: prediction.json };
  const { dtype, shape, base64 } = prediction.ndarray;
  // a copy of its own: Buffer.from may hand out a slice of a shared pool
  return { ndarray: { dtype, shape, bytes: new Uint8Array(Buffer.from(base64, 'base64')) } };
}

/**
 * The checksum of a line's content (without `sha256`): it catches damage, not edits. The prediction is
 * left out: damage to it fails its hash on resume, and hashing its text here would cost more than
 * computing an image record (about 10 ms for 512 KiB).
 */
function checksum(entry: Omit<Entry, 'sha256'>): string {
  // through JSON, as a reader sees it (no undefined fields)
  return digest(JSON.parse(JSON.stringify({ ...entry, run: { ...entry.run, prediction: null } })));
}

export class Journal {
  readonly path: string;
  readonly identity: string;

  /** `cache`: the settings' cache folder; the journal is <cache>/journal/<condition>.jsonl. */
  constructor(
    cache: string,
    readonly condition: string,
    identity: JournalIdentity,
  ) {
    this.path = join(cache, 'journal', `${condition}.jsonl`);
    this.identity = digest({ ...identity });
  }

  /**
   * The runs of an earlier run with the same identity whose prediction was kept, by mask (the last
   * line of a mask wins). Not yet trusted: each must pass reverifyRun before it becomes a record.
   */
  resume(): Map<string, RunResult> {
    const runs = new Map<string, RunResult>();
    if (!lstatOrNothing(this.path)) return runs;
    // a regular file of bounded size only: a FIFO would block, a link or device is no journal of ours
    let bytes: Buffer;
    try {
      bytes = readRegularFile(this.path, 'journal', JOURNAL_MAX_BYTES);
    } catch (error) {
      if (error instanceof UserError) throw new UserError(`${error.message}; remove it (the condition's records then run again)`);
      throw error;
    }
    for (let start = 0; start < bytes.length; ) {
      const end = bytes.indexOf(0x0a, start) < 0 ? bytes.length : bytes.indexOf(0x0a, start);
      const line = bytes.subarray(start, end).toString('utf8');
      start = end + 1;
      if (!line.trim()) continue;
      try {
        const parsed = Entry.safeParse(JSON.parse(line));
        if (!parsed.success) continue;
        const { sha256, ...content } = parsed.data;
        if (content.identity !== this.identity || sha256 !== checksum(content) || !content.run.prediction) continue;
        runs.set(content.mask, RunResult.parse({ ...content.run, prediction: restored(content.run.prediction) }));
      } catch {
        // a torn last line of an interrupted run: that record is simply run again
      }
    }
    return runs;
  }

  /** Journals the run of an ok record. */
  append(mask: string, run: RunResult): void {
    const content = { identity: this.identity, mask, run: { ...run, prediction: kept(run.prediction) } };
    appendNoFollow(this.path, `${JSON.stringify({ ...content, sha256: checksum(content) })}\n`);
  }

  drop(): void {
    rmSync(this.path, { force: true });
  }
}

/**
 * How a family's worker turns its metric into a utility (README, "How each family turns its metric
 * into a utility"; workflows/families/<family>.py, evaluate): the metric's name, and the scale that
 * divides it (null: the utility is the metric itself; 'data': taken from the prepared input, the same
 * for every mask of a condition, so rebuild.ts compares it with a record computed now).
 */
export const UTILITY_RULES: Record<FamilyName, { metric: string; scale: null | number | 'data' }> = {
  classification: { metric: 'balanced_accuracy', scale: null },
  regression: { metric: 'MAE', scale: 'data' },
  clustering: { metric: 'NMI', scale: null },
  forecasting: { metric: 'one_step_MAE', scale: 'data' },
  image_restoration: { metric: 'pixel_RMSE', scale: 0.1 },
  retrieval: { metric: 'NDCG@10', scale: null },
  beat_detection: { metric: 'event_F1_at_100ms', scale: null },
  graph_link_prediction: { metric: 'ROC_AUC', scale: null },
};

/** What in a run does not follow from its metric: metric name, scale, utility, extras. */
function derivationProblems(family: FamilyName, run: RunResult, truth: Truth): string[] {
  const problems: string[] = [];
  const rule = UTILITY_RULES[family];
  if (run.native_metric !== rule.metric) problems.push(`metric ${run.native_metric}: ${family} reports ${rule.metric}`);
  const scale = rule.scale === 'data' ? run.normalization_scale : rule.scale;
  const valid = rule.scale === null || (typeof scale === 'number' && Number.isFinite(scale) && scale > 0);
  if (run.normalization_scale !== scale || !valid) {
    problems.push(`normalization scale ${run.normalization_scale}: ${family} has ${rule.scale}`);
  } else {
    // Exact, not within a tolerance: Python evaluates the same IEEE operations, 1.0 / (1.0 + value / scale),
    // on the same doubles (all 2,816 committed records of both runtimes and the examples agree bit for bit).
    const utility = scale === null ? run.native_value : 1 / (1 + run.native_value / scale);
    if (run.utility !== utility)
      problems.push(`utility ${run.utility} does not follow from ${run.native_metric} ${run.native_value} (${utility})`);
  }
  // Only beat detection has extras: its tolerance table, which eventF1 recomputes field for field and
  // independentMetric passes on whole (verifyRun compares only the true positives and F1 of each).
  const extras =
    family === 'beat_detection' ? { matching_tolerance_sensitivity: independentMetric(family, run.prediction, truth).tolerances } : {};
  if (digest(run.extras) !== digest(extras)) problems.push('extras do not follow from the prediction');
  return problems;
}

/**
 * A journaled run checked as a fresh one is (verifyRun: the prediction hashed here and compared, the
 * metric recomputed from the prediction and the truth), and its utility, scale, metric name and
 * extras derived again from its metric and prediction.
 */
export function reverifyRun(family: FamilyName, run: RunResult, truth: Truth): Verification {
  try {
    const check = verifyRun(family, run, truth);
    return { ...check, problems: [...check.problems, ...derivationProblems(family, run, truth)] };
  } catch (error) {
    // e.g. bytes that are no array of their dtype
    return { sha256: '', independentValue: null, problems: [`verification failed: ${(error as Error).message}`] };
  }
}
