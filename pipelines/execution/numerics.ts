// What a worker's numerical state is checked and recorded against: the profile (core/profiles.ts)
// each worker must show, the drift between the state references were built under and this machine's.
import type { LibmPin, NumericalProfile } from '../core/profiles.ts';
import * as z from 'zod';
import { NumericsReport } from './protocol.ts';

/** One line: machine, CPU, BLAS kernels, NumPy's highest SIMD target, the libm pin. */
export function describeNumerics(report: NumericsReport): string {
  const blas = report.blas.map((b) => `${b.package} ${b.internal_api ?? 'blas'} ${b.architecture ?? '?'}`).join(', ') || 'no BLAS loaded';
  const simd = report.numpy_simd.dispatched.at(-1) ?? report.numpy_simd.baseline.at(-1) ?? 'none';
  const libm = !report.libm ? 'no libm fingerprint' : report.libm.pin ? 'libm pinned' : 'libm not pinned';
  return `${report.machine} ${report.cpu_model}, ${report.libc}; BLAS ${blas}; NumPy SIMD up to ${simd}; ${libm}`;
}

/** The probed functions whose bits differ between two fingerprints (a function only one has counts). */
function libmDifferences(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): string[] {
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((name) => a[name] !== b[name]).sort();
}

/** Why a worker's C library math is not the profile's (empty: it is). */
function libmProblems(pin: LibmPin, report: NumericsReport): string[] {
  const libm = report.libm;
  if (!libm) return ['the worker reports no libm fingerprint (its workflow code predates the libm pin)'];
  const problems: string[] = [];
  const wrong = Object.keys(pin.expected).filter((name) => libm.functions[name] !== pin.expected[name]);
  const pinned = wrong.filter((name) => pin.pinned.includes(name));
  const others = wrong.filter((name) => !pin.pinned.includes(name));
  const digests = (names: string[]) => names.map((n) => `${n} ${libm.functions[n] ?? 'missing'}, expected ${pin.expected[n]}`).join('; ');
  if (pinned.length) {
    const why = libm.pin
      ? `the loaded pin (${libm.pin}) does not give them`
      : `no libm pin is loaded (the profile preloads ${pin.library}; a Dask worker needs it in LD_PRELOAD)`;
    problems.push(`libm: ${pinned.join(', ')} give other bits than the profile pins (${digests(pinned)}): ${why}`);
  }
  if (others.length) {
    problems.push(
      `libm: the C library's ${others.join(', ')} give other bits than the profile's (${digests(others)}): ` +
        'another C library or another variant of it (GLIBC_TUNABLES, or a preloaded library, changes them)',
    );
  }
  const bypassed = pin.pinned.filter((name) => libm.numpy[name] !== libm.functions[name]);
  if (bypassed.length)
    problems.push(`libm: NumPy's ${bypassed.join(', ')} do not come from the C library here, so the pin cannot reach them`);
  return problems;
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
  if (lacking.length)
    problems.push(`this CPU (${report.cpu_model}) lacks ${lacking.join(', ')}, which profile '${profile.name}' requires (choose 'native')`);
  if (disabled.length)
    problems.push(`NumPy's ${disabled.join(', ')} loops are disabled by NPY_DISABLE_CPU_FEATURES, the profile uses them`);
  if (!report.blas.length) problems.push('no BLAS library is loaded');
  for (const lib of report.blas) {
    if (lib.architecture !== expect.blasArchitecture) {
      problems.push(
        `${lib.package}'s ${lib.internal_api ?? 'BLAS'} (${lib.library}) runs ${lib.architecture ?? 'unknown'} kernels, ` +
          `the profile requires ${expect.blasArchitecture}`,
      );
    }
  }
  const dispatched = report.numpy_simd.dispatched;
  const extra = dispatched.filter((f) => !expect.numpyDispatched.includes(f));
  if (extra.length) problems.push(`NumPy dispatches ${extra.join(', ')} loops, which the profile disables`);
  const missing = expect.numpyDispatched.filter((f) => cpu.has(f) && !dispatched.includes(f));
  if (missing.length) problems.push(`NumPy does not dispatch ${missing.join(', ')} loops, which the profile uses`);
  if (profile.libm) problems.push(...libmProblems(profile.libm, report));
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

/**
 * Kernel choices that decide bits under a native profile: BLAS, NumPy's SIMD targets and, when `withLibm`,
 * the C library's math (references built before the fingerprint existed do not have it).
 */
function kernels(report: NumericsReport, withLibm = true): string {
  const libm = withLibm && report.libm ? Object.entries(report.libm.functions).sort() : null;
  return JSON.stringify([report.machine, report.blas.map((b) => [b.package, b.architecture]), report.numpy_simd.dispatched, libm]);
}

/** What decides the bits of a record: the pinned profile (with its libm bits), or for `native` the kernels chosen here. */
export function numericsIdentity(profile: NumericalProfile, report: NumericsReport): string {
  const libm = profile.libm ? Object.entries(profile.libm.expected).sort() : null;
  return JSON.stringify([profile.name, Object.entries(profile.environment).sort(), libm, profile.expect ? null : kernels(report)]);
}

/**
 * Why records computed under `recorded` may not reproduce bit for bit in a worker reporting `here`
 * under `profile` (empty: they should). A pinned profile promises the same bits on every CPU its
 * check admits; `native` references reproduce only where the libraries make the same choices.
 */
export function platformDrift(recorded: RecordedNumerics | undefined, profile: NumericalProfile, here: NumericsReport): string[] {
  if (!recorded) return [`the references record no numerical profile; this machine runs '${profile.name}' (${describeNumerics(here)})`];
  const both =
    `the references were built under numerical profile '${recorded.profile}' (${describeNumerics(recorded.effective)}); ` +
    `this machine runs '${profile.name}' (${describeNumerics(here)})`;
  if (recorded.profile !== profile.name) return [both];
  const settings = (env: Readonly<Record<string, string>>) => JSON.stringify(Object.entries(env).sort());
  if (settings(recorded.environment) !== settings(profile.environment)) {
    return [
      `profile '${profile.name}' had other settings when the references were built ` +
        `(${JSON.stringify(recorded.environment)}, now ${JSON.stringify(profile.environment)})`,
    ];
  }
  const withLibm = recorded.effective.libm !== undefined;
  if (!profile.expect && kernels(recorded.effective, withLibm) !== kernels(here, withLibm))
    return [`${both}, and the native kernel choices differ`];
  const built = recorded.effective.libm;
  if (profile.libm && !built?.pin) {
    return [
      `the references were built without the libm pin (${profile.libm.pinned.join(', ')} were the C library's); this machine pins them`,
    ];
  }
  if (built && here.libm) {
    const differ = libmDifferences(built.functions, here.libm.functions);
    if (differ.length) return [`the C library's ${differ.join(', ')} give other bits here than where the references were built`];
  }
  return [];
}
