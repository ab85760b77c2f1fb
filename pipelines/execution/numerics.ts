// Numerical profiles: the kernel choices every Python process of the project runs under. A profile
// is applied through the environment before Python starts, and verified from each worker's own
// report (workflows/numerics.py) before that worker runs anything.
//
// Why: OpenBLAS picks its kernels by CPU when it loads (NumPy and SciPy ship separate copies), and
// NumPy dispatches AVX-512 loops where the CPU has them. Both change the last bits of results, so
// references built on one CPU family would not replay on another. The portable profile pins both to
// code paths that every x86-64-v3 CPU (AVX2 and FMA: Intel since Haswell, AMD since Zen) runs alike.
import { z } from 'zod';
import { UserError } from '../core/errors.ts';
import { declaredRuntimes } from '../core/paths.ts';
import { pinnedVersions } from './identity.ts';
import { NumericsReport } from './protocol.ts';

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
  const targets = NUMPY_TARGETS.find((t) => numpy !== undefined && t.numpy.test(numpy));
  if (!targets) {
    throw new UserError(
      `numerical profile 'x86-64-v3' knows the SIMD target names of NumPy 2.2 and 2.5, not of NumPy ${numpy ?? '(not pinned)'}; ` +
        `choose the 'native' profile (numerical_profile in wwref.config.json or WWREF_NUMERICAL_PROFILE), or add its names to pipelines/execution/numerics.ts`,
    );
  }
  return {
    name: 'x86-64-v3',
    description: `portable bits on every x86-64 CPU with AVX2 and FMA: OpenBLAS Haswell kernels, NumPy SIMD loops up to AVX2 (${targets.why})`,
    environment: { OPENBLAS_CORETYPE: 'Haswell', NPY_DISABLE_CPU_FEATURES: targets.disable.join(' ') },
    controls: CONTROLLED,
    expect: { machine: 'x86_64', blasArchitecture: 'Haswell', numpyDispatched: targets.dispatched },
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
export function profileByName(name: string, numpy: string | undefined = pinnedVersions(declaredRuntimes()[0]!).numpy): NumericalProfile {
  if (name === 'native') return NATIVE;
  if (name === 'x86-64-v3') return portableProfile(numpy);
  throw new UserError(`unknown numerical profile '${name}' (known: ${PROFILE_NAMES.join(', ')})`);
}

/** The profile's variables; refuses an inherited variable the profile owns with another value. */
export function profileEnvironment(profile: NumericalProfile, inherited: Readonly<Record<string, string | undefined>>): Record<string, string> {
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

/** One line: machine, CPU, BLAS kernels, NumPy's highest SIMD target. */
export function describeNumerics(report: NumericsReport): string {
  const blas = report.blas.map((b) => `${b.package} ${b.internal_api ?? 'blas'} ${b.architecture ?? '?'}`).join(', ') || 'no BLAS loaded';
  const simd = report.numpy_simd.dispatched.at(-1) ?? report.numpy_simd.baseline.at(-1) ?? 'none';
  return `${report.machine} ${report.cpu_model}, ${report.libc}; BLAS ${blas}; NumPy SIMD up to ${simd}`;
}

/**
 * Differences that no profile can pin and that may, not must, change bits: the C library supplies
 * NumPy's float64 log1p/expm1 under the portable profile, and C libraries change such functions
 * between versions. Reported, not refused.
 */
export function platformNotes(recorded: RecordedNumerics | undefined, here: NumericsReport): string[] {
  if (!recorded || recorded.effective.libc === here.libc) return [];
  return [`the C library differs from the references' (${here.libc} here, ${recorded.effective.libc} there): records using NumPy's float64 log1p/expm1 may differ in the last bits`];
}

/** Why a worker's reported state is not the profile's (empty: it is). */
export function profileProblems(profile: NumericalProfile, report: NumericsReport): string[] {
  const expect = profile.expect;
  if (!expect) return [];
  if (report.machine !== expect.machine) {
    return [`this machine is ${report.machine}, profile '${profile.name}' is for ${expect.machine} (choose 'native')`];
  }
  const problems: string[] = [];
  const cpu = new Set(report.numpy_simd.cpu_features);
  const unseen = expect.numpyDispatched.filter((f) => !cpu.has(f));
  // NumPy reads a feature named in NPY_DISABLE_CPU_FEATURES as absent from the CPU.
  const disabledByUser = new Set((report.environment.NPY_DISABLE_CPU_FEATURES ?? '').split(/[\s,]+/));
  const lacking = unseen.filter((f) => !disabledByUser.has(f));
  const disabled = unseen.filter((f) => disabledByUser.has(f));
  if (lacking.length) problems.push(`this CPU (${report.cpu_model}) lacks ${lacking.join(', ')}, which profile '${profile.name}' requires (choose 'native')`);
  if (disabled.length) problems.push(`NumPy's ${disabled.join(', ')} loops are disabled by NPY_DISABLE_CPU_FEATURES, the profile uses them`);
  if (!report.blas.length) problems.push('no BLAS library is loaded');
  for (const lib of report.blas) {
    if (lib.architecture !== expect.blasArchitecture) {
      problems.push(`${lib.package}'s ${lib.internal_api ?? 'BLAS'} (${lib.library}) runs ${lib.architecture ?? 'unknown'} kernels, the profile requires ${expect.blasArchitecture}`);
    }
  }
  const dispatched = report.numpy_simd.dispatched;
  const extra = dispatched.filter((f) => !expect.numpyDispatched.includes(f));
  if (extra.length) problems.push(`NumPy dispatches ${extra.join(', ')} loops, which the profile disables`);
  const missing = expect.numpyDispatched.filter((f) => cpu.has(f) && !dispatched.includes(f));
  if (missing.length) problems.push(`NumPy does not dispatch ${missing.join(', ')} loops, which the profile uses`);
  return problems;
}

/** What a reference manifest records of the numerics its records were computed under. */
export const RecordedNumerics = z.strictObject({
  profile: z.string(),
  environment: z.record(z.string(), z.string()),
  /** The report of the worker that built the references. */
  effective: NumericsReport,
});
export type RecordedNumerics = z.infer<typeof RecordedNumerics>;

export function recordNumerics(profile: NumericalProfile, report: NumericsReport): RecordedNumerics {
  return { profile: profile.name, environment: { ...profile.environment }, effective: report };
}

/** Kernel choices that decide bits under a native profile. */
function kernels(report: NumericsReport): string {
  return JSON.stringify([report.machine, report.blas.map((b) => [b.package, b.architecture]), report.numpy_simd.dispatched]);
}

/** What decides the bits of a record: the pinned profile, or for `native` the kernels chosen here. */
export function numericsIdentity(profile: NumericalProfile, report: NumericsReport): string {
  return JSON.stringify([profile.name, Object.entries(profile.environment).sort(), profile.expect ? null : kernels(report)]);
}

/**
 * Why records computed under `recorded` may not reproduce bit for bit in a worker reporting `here`
 * under `profile` (empty: they should). A pinned profile promises the same bits on every CPU its
 * check admits; `native` references reproduce only where the libraries make the same choices.
 */
export function platformDrift(recorded: RecordedNumerics | undefined, profile: NumericalProfile, here: NumericsReport): string[] {
  if (!recorded) return [`the references record no numerical profile; this machine runs '${profile.name}' (${describeNumerics(here)})`];
  const both = `the references were built under numerical profile '${recorded.profile}' (${describeNumerics(recorded.effective)}); this machine runs '${profile.name}' (${describeNumerics(here)})`;
  if (recorded.profile !== profile.name) return [both];
  const settings = (env: Readonly<Record<string, string>>) => JSON.stringify(Object.entries(env).sort());
  if (settings(recorded.environment) !== settings(profile.environment)) {
    return [`profile '${profile.name}' had other settings when the references were built (${JSON.stringify(recorded.environment)}, now ${JSON.stringify(profile.environment)})`];
  }
  if (!profile.expect && kernels(recorded.effective) !== kernels(here)) return [`${both}, and the native kernel choices differ`];
  return [];
}
