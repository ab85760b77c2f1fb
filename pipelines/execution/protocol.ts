// The JSON-lines protocol between the orchestrator and workflows/worker.py, validated with zod in
// both directions: every request is built through its schema, every response parsed by one.
import * as z from 'zod';
import { FAMILY_NAMES } from '../catalog/families.ts';

const Family = z.enum(FAMILY_NAMES);

/** The sha256 of each file of a prepared input; the worker checks the bytes it reads against them. */
const FileHashes = z.record(z.string(), z.string().regex(/^[0-9a-f]{64}$/));

/** The requests, by operation. `folder` is the local path of a prepared input, `files` its hashes. */
export const Request = z.discriminatedUnion('op', [
  z.strictObject({ op: z.literal('hello') }),
  z.strictObject({
    op: z.literal('run'),
    family: Family,
    folder: z.string(),
    files: FileHashes,
    mask: z.string(),
    reuse_shared_stage: z.boolean(),
    /** Enforced where the record runs when the executor cannot do it here (the Dask bridge). */
    timeout_seconds: z.number().positive().optional(),
  }),
  z.strictObject({
    op: z.literal('truth'),
    family: Family,
    folder: z.string(),
    files: FileHashes,
    timeout_seconds: z.number().positive().optional(),
  }),
  z.strictObject({
    op: z.literal('prepare'),
    recipe: z.string(),
    params: z.unknown(),
    raw: z.record(z.string(), z.string()),
    out: z.string(),
  }),
  /** A template forks a fresh worker that connects to this Unix socket. */
  z.strictObject({ op: z.literal('fork'), socket: z.string() }),
  /** The Dask bridge (workflows/cluster/bridge.py): its scheduler, the cluster's workers and their admission. */
  z.strictObject({ op: z.literal('connect') }),
  z.strictObject({ op: z.literal('workers'), wait_seconds: z.number().positive() }),
  /** Answered when workers connect after the admission, with their identities. */
  z.strictObject({ op: z.literal('joined') }),
  z.strictObject({ op: z.literal('admit'), workers: z.array(z.string()), retire: z.array(z.string()) }),
  z.strictObject({ op: z.literal('describe') }),
  /** The controls' worker (workflows/evaluation/worker.py): one policy on one condition (pipelines/evaluation/controls/). */
  z.strictObject({ op: z.literal('controls'), task: z.record(z.string(), z.unknown()) }),
  /** The same worker: an estimator fitted on given observations (an estimator submission, shared-estimator scores). */
  z.strictObject({ op: z.literal('fit'), task: z.record(z.string(), z.unknown()) }),
]);
export type Request = z.infer<typeof Request>;

/**
 * An ndarray as dtype (numpy str, e.g. "<f8"), shape and its C-order bytes; or plain JSON. On the wire
 * the bytes are a slice (offset, nbytes) of the response's attachment; python-worker.ts puts them here.
 */
export const Encoded = z.union([
  z.strictObject({
    ndarray: z.strictObject({ dtype: z.string(), shape: z.array(z.number().int().nonnegative()), bytes: z.instanceof(Uint8Array) }),
  }),
  z.strictObject({ json: z.unknown() }),
]);
export type Encoded = z.infer<typeof Encoded>;

export const CapturedWarning = z.strictObject({ category: z.string(), message: z.string() });
export type CapturedWarning = z.infer<typeof CapturedWarning>;

/** A worker's numerical state (workflows/numerics.py): what decides the last bits of its results. */
export const NumericsReport = z.strictObject({
  machine: z.string(),
  cpu_model: z.string(),
  /** The C library (e.g. "glibc 2.36"): NumPy's float64 log1p/expm1 come from it outside AVX-512 loops. */
  libc: z.string(),
  blas: z.array(
    z.strictObject({
      package: z.string(),
      library: z.string(),
      internal_api: z.string().nullable(),
      version: z.string().nullable(),
      architecture: z.string().nullable(),
    }),
  ),
  numpy_simd: z.strictObject({ baseline: z.array(z.string()), dispatched: z.array(z.string()), cpu_features: z.array(z.string()) }),
  /** The C library's math functions as the process resolves them (workflows/libm.py); absent in references built before it. */
  libm: z
    .strictObject({
      /** The loaded libm pin's build identity, or null. */
      pin: z.string().nullable(),
      /** Digest of each probed function's results (contracts/libm.json). */
      functions: z.record(z.string(), z.string()),
      /** Digest of NumPy's ufunc of each pinned function on the same probes. */
      numpy: z.record(z.string(), z.string()),
    })
    .optional(),
  environment: z.record(z.string(), z.string()),
});
export type NumericsReport = z.infer<typeof NumericsReport>;

/** What every process reports of its interpreter (workflows/identity.py); the Dask bridge reports only this. */
export const InterpreterIdentity = z.object({
  python: z.string(),
  /** True unless the interpreter started with PYTHONHASHSEED=0 (then sets of strings iterate in one order under one CPython). */
  hash_randomization: z.boolean(),
  versions: z.record(z.string(), z.string()),
  /** digest of the workflows/ Python code the process loaded (identity.ts workflowsSha256). */
  code_sha256: z.string(),
});
export type InterpreterIdentity = z.infer<typeof InterpreterIdentity>;

export const HelloResult = InterpreterIdentity.extend({
  pid: z.number().int(),
  /** The machine's network name (platform.node()). */
  host: z.string(),
  threadpools: z.array(z.object({ api: z.string().nullable(), num_threads: z.number().nullable() })),
  numerics: NumericsReport,
  /** The families this worker implements: mask widths and prediction-hash rule of each. */
  families: z.record(z.string(), z.strictObject({ dimensions: z.array(z.number().int()), hash_rule: z.string() })),
});
export type HelloResult = z.infer<typeof HelloResult>;

export const RunResult = z.strictObject({
  prediction: Encoded,
  prediction_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  native_metric: z.string(),
  native_value: z.number(),
  utility: z.number(),
  normalization_scale: z.number().nullable(),
  extras: z.record(z.string(), z.unknown()),
  warnings: z.array(CapturedWarning),
  prediction_wall_seconds: z.number().nonnegative(),
  metric_wall_seconds: z.number().nonnegative(),
  wall_seconds: z.number().nonnegative(),
  /** The machine that computed the record, when the executor spans several (Dask). */
  host: z.string().optional(),
});
export type RunResult = z.infer<typeof RunResult>;

export const TruthResult = z.strictObject({ truth: z.record(z.string(), Encoded) });
export type TruthResult = z.infer<typeof TruthResult>;

export const PrepareResult = z.record(z.string(), z.unknown());

/** One response line; a success is followed by `attachment` raw bytes (the ndarrays of its result). */
export const Response = z.union([
  z.strictObject({ id: z.number().int(), ok: z.literal(true), attachment: z.number().int().nonnegative(), result: z.unknown() }),
  z.strictObject({
    id: z.number().int().nullable(),
    ok: z.literal(false),
    error: z.strictObject({ type: z.string(), message: z.string(), traceback: z.string() }),
  }),
]);
