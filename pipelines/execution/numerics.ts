// What a worker's numerical state is checked and recorded against: the profile (core/profiles.ts)
// each worker must show, the drift between the state references were built under and this machine's.
import type { NumericalProfile } from '../core/profiles.ts';
import { z } from 'zod';
import { NumericsReport } from './protocol.ts';

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
  return [
    `the C library differs from the references' (${here.libc} here, ${recorded.effective.libc} there): ` +
      `records using NumPy's float64 log1p/expm1 may differ in the last bits`,
  ];
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
  if (!profile.expect && kernels(recorded.effective) !== kernels(here)) return [`${both}, and the native kernel choices differ`];
  return [];
}
