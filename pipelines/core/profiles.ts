// Numerical profiles: the kernel choices every Python process of the project runs under. A profile
// is applied through the environment before Python starts, and verified from each worker's own
// report (workflows/numerics.py) before that worker runs anything.
//
// Why: OpenBLAS picks its kernels by CPU when it loads (NumPy and SciPy ship separate copies), and
// NumPy dispatches AVX-512 loops where the CPU has them. Both change the last bits of results, so
// references built on one CPU family would not replay on another. The portable profile pins both to
// code paths that every x86-64-v3 CPU (AVX2 and FMA: Intel since Haswell, AMD since Zen) runs alike.
// Under it NumPy's float64 log1p/expm1 are the C library's, whose variant (glibc's FMA code or its
// generic code) changes bits too; the profile pins them to glibc's generic code, the variant the
// published references were computed with, by preloading the libm pin (native/libm-pin/README.md).
import { join } from 'node:path';
import * as z from 'zod';
import { readContract } from './contracts.ts';
import { UserError } from './errors.ts';
import { declaredRuntimes, ROOT, runtimePins } from './paths.ts';

/** contracts/libm.json: what the pin replaces, how it is built, the probes and each profile's bits. */
const LibmContract = z.object({
  pin: z.object({ functions: z.array(z.string()).min(1), library: z.string(), glibc_files: z.record(z.string(), z.string()) }),
  probes: z.record(z.string(), z.array(z.unknown()).min(1)),
  expected: z.record(z.string(), z.record(z.string(), z.string().regex(/^[0-9a-f]{16}$/))),
});

export interface LibmPin {
  /** The functions the preloaded library replaces. */
  pinned: readonly string[];
  /** The library (absolute path); scripts/build-libm-pin.py builds it. */
  library: string;
  /** The digest each probed function must give in every worker (workflows/libm.py). */
  expected: Readonly<Record<string, string>>;
}

export interface NumericalProfile {
  name: string;
  description: string;
  /** Set in every Python process before it starts. */
  environment: Readonly<Record<string, string>>;
  /** Variables this profile owns: an inherited value that differs from `environment` is refused. */
  controls: readonly string[];
  /** The state every worker must report; a `native` profile expects nothing. */
  expect?: {
    machine: string;
    /** OpenBLAS core type of every loaded BLAS library, as threadpoolctl reports it. */
    blasArchitecture: string;
    /** NumPy's enabled dispatch targets, exactly. */
    numpyDispatched: readonly string[];
  };
  /** The C library's math functions: which are pinned by a preloaded library, and the bits of all probed ones. */
  libm?: LibmPin;
}

/**
 * The profile's NumPy settings in the target names of each NumPy version the project pins (checked on
 * this project's machines; a version not listed is refused by the portable profile, never guessed).
 */
const NUMPY_TARGETS: { numpy: RegExp; disable: readonly string[]; dispatched: readonly string[]; why: string }[] = [
  {
    // NumPy 2.2 names targets by instruction set; its x86-64 wheels' baseline is SSE3. Each target
    // above AVX2 must be named: disabling AVX512F alone leaves AVX512_SKX and later enabled. Naming a
    // target the CPU lacks is accepted silently, so one list serves CPUs with and without AVX-512.
    numpy: /^2\.2\./,
    disable: ['AVX512F', 'AVX512CD', 'AVX512_KNL', 'AVX512_KNM', 'AVX512_SKX', 'AVX512_CLX', 'AVX512_CNL', 'AVX512_ICL'],
    dispatched: ['SSSE3', 'SSE41', 'POPCNT', 'SSE42', 'AVX', 'F16C', 'FMA3', 'AVX2'],
    why: 'NumPy 2.2 target names',
  },
  {
    // NumPy 2.5 names targets by x86-64 level: baseline X86_V2, dispatch X86_V3, X86_V4, AVX512_ICL,
    // AVX512_SPR. It ignores the whole list when one name is unknown, so the 2.2 list cannot serve it.
    numpy: /^2\.5\./,
    disable: ['X86_V4', 'AVX512_ICL', 'AVX512_SPR'],
    dispatched: ['X86_V3'],
    why: 'NumPy 2.5 target names',
  },
];

const CONTROLLED = ['OPENBLAS_CORETYPE', 'NPY_DISABLE_CPU_FEATURES', 'NPY_ENABLE_CPU_FEATURES'] as const;

export const PROFILE_NAMES = ['x86-64-v3', 'native'] as const;

/** The portable profile in the target names of `numpy` (the NumPy version the workers will load). */
function portableProfile(numpy: string | undefined): NumericalProfile {
  const libm = readContract('libm.json', LibmContract);
  const expected = libm.expected['x86-64-v3'];
  if (!expected) throw new UserError("contracts/libm.json gives no bits for numerical profile 'x86-64-v3'");
  const targets = NUMPY_TARGETS.find((t) => numpy !== undefined && t.numpy.test(numpy));
  if (!targets) {
    throw new UserError(
      `numerical profile 'x86-64-v3' knows the SIMD target names of NumPy 2.2 and 2.5, not of NumPy ${numpy ?? '(not pinned)'}; ` +
        `choose the 'native' profile (numerical_profile in wwref.config.json or WWREF_NUMERICAL_PROFILE), ` +
        `or add its names to pipelines/execution/numerics.ts`,
    );
  }
  return {
    name: 'x86-64-v3',
    description:
      'portable bits on every x86-64 CPU with AVX2 and FMA: OpenBLAS Haswell kernels, NumPy SIMD loops up to AVX2 ' +
      `(${targets.why}), glibc's generic ${libm.pin.functions.join('/')} (the libm pin)`,
    environment: { OPENBLAS_CORETYPE: 'Haswell', NPY_DISABLE_CPU_FEATURES: targets.disable.join(' ') },
    controls: CONTROLLED,
    expect: { machine: 'x86_64', blasArchitecture: 'Haswell', numpyDispatched: targets.dispatched },
    libm: { pinned: libm.pin.functions, library: join(ROOT, libm.pin.library), expected },
  };
}

const NATIVE: NumericalProfile = {
  name: 'native',
  description: "the libraries' own choices for this CPU (fastest; bits reproduce only on CPUs that make the same choices)",
  environment: {},
  controls: [],
};

export const DEFAULT_PROFILE = 'x86-64-v3';

/** A profile by name, in the target names of `numpy` (default: the NumPy version of the `pinned` runtime). */
export function profileByName(name: string, numpy: string | undefined = runtimePins(declaredRuntimes()[0]!).numpy): NumericalProfile {
  if (name === 'native') return NATIVE;
  if (name === 'x86-64-v3') return portableProfile(numpy);
  throw new UserError(`unknown numerical profile '${name}' (known: ${PROFILE_NAMES.join(', ')})`);
}

/** The profile's variables; refuses an inherited variable the profile owns with another value. */
export function profileEnvironment(
  profile: NumericalProfile,
  inherited: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  for (const key of profile.controls) {
    const have = inherited[key];
    const want = profile.environment[key];
    if (have !== undefined && have !== want) {
      throw new UserError(
        `${key}=${JSON.stringify(have)} is set in the environment, but numerical profile '${profile.name}' ` +
          `${want === undefined ? 'leaves it unset' : `sets ${JSON.stringify(want)}`}; unset it, or choose another profile ` +
          `(numerical_profile in wwref.config.json or WWREF_NUMERICAL_PROFILE; 'wwref doctor' lists them)`,
      );
    }
  }
  return { ...profile.environment };
}
