// Verification of one native run on the TypeScript side: the prediction is decoded, hashed here by
// the family's rule (docs/records.md) and compared with the worker's hash, and the native metric is
// recomputed from the prediction and the held-out truth by the independent implementation.
import type { FamilyName } from '../../catalog/families.ts';
import { FAMILIES } from '../../catalog/families.ts';
import { digest, sha256Hex, type JsonValue } from '../../core/hashing.ts';
import {
  balancedAccuracy,
  eventF1,
  meanAbsoluteError,
  metricsAgree,
  ndcgAt10,
  normalizedMutualInfo,
  pixelRmse,
  rocAucConcordance,
} from './metrics.ts';
import type { Encoded, RunResult } from '../protocol.ts';

type Decoded = Float64Array | Float32Array | BigInt64Array | Int32Array | Int16Array | Int8Array | Uint8Array | Uint32Array;

const TYPED: Record<string, new (buffer: ArrayBuffer) => Decoded> = {
  '<f8': Float64Array,
  '<f4': Float32Array,
  '<i8': BigInt64Array,
  '<i4': Int32Array,
  '<i2': Int16Array,
  '|i1': Int8Array,
  '|u1': Uint8Array,
  '|b1': Uint8Array,
  '<u4': Uint32Array,
};

export interface DecodedArray {
  dtype: string;
  shape: number[];
  bytes: Uint8Array;
  values: Decoded;
}

/** Decoded arrays by their encoded object: a condition's truth is decoded once, not per record. */
const decoded = new WeakMap<object, DecodedArray>();

/** The typed values of an encoded array (read them, never write: the result is shared). */
export function decodeArray(encoded: Extract<Encoded, { ndarray: unknown }>): DecodedArray {
  const known = decoded.get(encoded);
  if (known) return known;
  const { dtype, shape, bytes } = encoded.ndarray;
  const Typed = TYPED[dtype];
  if (!Typed) throw new Error(`unsupported prediction dtype ${dtype}`);
  // A typed array needs its offset aligned to its element size: a view of the received bytes where it
  // is (an attachment is an ArrayBuffer of its own, its first array at 0), a copy where not.
  const width = (Typed as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
  if (bytes.byteLength % width) throw new Error(`${bytes.byteLength} bytes are not a whole number of ${dtype} values`);
  const values =
    bytes.byteOffset % width === 0
      ? new (Typed as unknown as new (b: ArrayBufferLike, offset: number, length: number) => Decoded)(
          bytes.buffer,
          bytes.byteOffset,
          bytes.byteLength / width,
        )
      : new Typed(bytes.slice().buffer);
  const array = { dtype, shape, bytes, values };
  decoded.set(encoded, array);
  return array;
}

export type Truth = Record<string, Encoded>;

function truthArray(truth: Truth, key: string): Decoded {
  const entry = truth[key];
  if (!entry || !('ndarray' in entry)) throw new Error(`truth lacks array '${key}'`);
  return decodeArray(entry).values;
}

function truthJson(truth: Truth, key: string): unknown {
  const entry = truth[key];
  if (!entry) throw new Error(`truth lacks '${key}'`);
  if ('json' in entry) return entry.json;
  const values = decodeArray(entry).values;
  return values.length === 1 ? Number(values[0]) : values;
}

function numbers(values: Decoded): number[] {
  return Array.from(values as ArrayLike<number | bigint>, Number);
}

/** sha256 of the prediction by the family's hash rule. */
export function predictionHash(family: FamilyName, prediction: Encoded): string {
  const rule = FAMILIES[family].hashRule;
  if ('json' in prediction) {
    if (rule !== 'json') throw new Error(`family ${family} expects an array prediction`);
    return digest(prediction.json as JsonValue);
  }
  const array = decodeArray(prediction);
  if (rule === 'raw_bytes') return sha256Hex(array.bytes);
  if (rule === 'json_list') {
    if (array.shape.length !== 1) throw new Error('a tolist() hash is defined here for 1-D predictions only');
    return digest(array.values as JsonValue);
  }
  throw new Error(`family ${family} expects a dict prediction`);
}

export interface IndependentMetric {
  value: number;
  /** Beat detection: the tolerance table, to compare with the native one. */
  tolerances?: Record<string, { true_positive: number; f1: number }>;
}

/** The native metric recomputed from the prediction and the truth, independently of the worker. */
export function independentMetric(family: FamilyName, prediction: Encoded, truth: Truth): IndependentMetric {
  if (family === 'retrieval') {
    if (!('json' in prediction)) throw new Error('retrieval prediction must be a dict');
    const qrels = truthJson(truth, 'qrels') as Record<string, Record<string, number>>;
    return { value: ndcgAt10(prediction.json as Record<string, string[]>, qrels) };
  }
  if (!('ndarray' in prediction)) throw new Error(`family ${family} expects an array prediction`);
  const pred = decodeArray(prediction).values;
  switch (family) {
    case 'classification':
      return { value: balancedAccuracy(truthArray(truth, 'y_eval') as ArrayLike<number | bigint>, pred as ArrayLike<number | bigint>) };
    case 'regression':
      return { value: meanAbsoluteError(numbers(truthArray(truth, 'y_eval')), numbers(pred)) };
    case 'forecasting':
      return { value: meanAbsoluteError(numbers(truthArray(truth, 'series_eval')), numbers(pred)) };
    case 'clustering':
      return { value: normalizedMutualInfo(numbers(truthArray(truth, 'y')), numbers(pred)) };
    case 'image_restoration':
      return { value: pixelRmse(truthArray(truth, 'clean') as Float64Array, pred as Float64Array) };
    case 'beat_detection': {
      const result = eventF1(
        numbers(pred),
        numbers(truthArray(truth, 'true_events')),
        Number(truthJson(truth, 'n_samples')),
        Number(truthJson(truth, 'sample_rate')),
      );
      return { value: result.native, tolerances: result.tolerances };
    }
    case 'graph_link_prediction':
      return { value: rocAucConcordance(numbers(truthArray(truth, 'test_labels')), numbers(pred)) };
  }
}

export interface Verification {
  sha256: string;
  independentValue: number | null;
  /** Empty when every check passed. */
  problems: string[];
}

/** Hash and independent-metric checks of one run (docs/records.md). */
export function verifyRun(family: FamilyName, run: RunResult, truth: Truth): Verification {
  const problems: string[] = [];
  const sha256 = predictionHash(family, run.prediction);
  if (sha256 !== run.prediction_sha256) problems.push(`prediction hash: worker ${run.prediction_sha256}, orchestrator ${sha256}`);
  let independentValue: number | null = null;
  try {
    const independent = independentMetric(family, run.prediction, truth);
    independentValue = independent.value;
    if (!metricsAgree(independent.value, run.native_value)) {
      problems.push(`independent ${run.native_metric}: native ${run.native_value}, independent ${independent.value}`);
    }
    if (independent.tolerances) {
      const native = (run.extras.matching_tolerance_sensitivity ?? {}) as Record<string, { true_positive: number; f1: number }>;
      for (const [tol, counts] of Object.entries(independent.tolerances)) {
        const saved = native[tol];
        if (!saved || saved.true_positive !== counts.true_positive || !metricsAgree(saved.f1, counts.f1)) {
          problems.push(`tolerance ${tol} ms: native ${JSON.stringify(saved)}, independent TP ${counts.true_positive} F1 ${counts.f1}`);
        }
      }
    }
  } catch (error) {
    problems.push(`independent metric failed: ${(error as Error).message}`);
  }
  return { sha256, independentValue, problems };
}
