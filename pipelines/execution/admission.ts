// Whether a worker may compute records: its hello (runtime identity) checked against the numerical
// profile, fixed string hashing, one-thread pools, the family registry, the expected package versions
// and the workflow code. Every executor admits its workers through this one function before they get
// work, and a Dask worker that connects while a job runs must also have the identity of an admitted
// one (joinProblems; the Dask bridge only reports identities). The bridge itself, which computes
// nothing, is checked on its code and versions only.
import { registryProblems } from '../catalog/families.ts';
import { canonicalJson } from '../core/hashing.ts';
import { versionDrift, workflowsSha256 } from './identity.ts';
import { profileProblems } from './numerics.ts';
import type { NumericalProfile } from '../core/profiles.ts';
import type { HelloResult, InterpreterIdentity } from './protocol.ts';

export interface AdmissionRules {
  profile: NumericalProfile;
  expectedVersions: Readonly<Record<string, string>>;
  allowVersionDrift?: boolean;
  /** digest of the workflow code the orchestrator hashes into records (default: this checkout's). */
  codeSha256?: string;
}

/** Why a worker is refused (empty: admitted). */
export function admissionProblems(hello: HelloResult, rules: AdmissionRules): string[] {
  const problems = profileProblems(rules.profile, hello.numerics).map((p) => `numerical profile '${rules.profile.name}': ${p}`);
  if (hello.hash_randomization) {
    problems.push(
      'its string hashing is randomized (PYTHONHASHSEED was not 0 when it started; ' +
        "a Dask worker started without '--preload-nanny workflows.cluster.nanny' gets Dask's own seed)",
    );
  }
  const threaded = hello.threadpools.filter((p) => p.num_threads !== 1);
  if (threaded.length)
    problems.push(`thread pools with more than one thread: ${threaded.map((p) => `${p.api} ${p.num_threads}`).join(', ')}`);
  problems.push(...registryProblems(hello.families).map((p) => `family registry: ${p}`));
  return [...problems, ...interpreterProblems(hello, rules)];
}

/** Why a process that computes nothing but must run our code and versions (the Dask bridge) is refused. */
export function interpreterProblems(identity: InterpreterIdentity, rules: AdmissionRules): string[] {
  const problems: string[] = [];
  const code = rules.codeSha256 ?? workflowsSha256();
  if (identity.code_sha256 !== code)
    problems.push(`it runs other workflow code (workflows/ digest ${identity.code_sha256.slice(0, 12)}, here ${code.slice(0, 12)})`);
  if (!rules.allowVersionDrift) {
    const drift = versionDrift(identity.versions, rules.expectedVersions);
    if (drift.length)
      problems.push(`versions differ from the expected ones (${drift.join('; ')}); run 'npm run setup', or pass --allow-version-drift`);
  }
  return problems;
}

/**
 * What decides the bits of a worker's records, by field: interpreter and string hashing, versions,
 * workflow code, families, thread pools, machine, C library and its math functions' fingerprint, BLAS
 * kernels, NumPy's SIMD targets and the numerics environment. Not the CPU model or its full feature list, which may differ between machines
 * that compute the same bits.
 */
function bitsIdentity(hello: HelloResult): Record<string, string> {
  const numerics = hello.numerics;
  return {
    python: hello.python,
    hash_randomization: String(hello.hash_randomization),
    versions: canonicalJson(hello.versions),
    code_sha256: hello.code_sha256,
    families: canonicalJson(hello.families),
    threadpools: canonicalJson(hello.threadpools.map((p) => canonicalJson(p)).sort()),
    'numerics.machine': numerics.machine,
    'numerics.libc': numerics.libc,
    'numerics.blas': canonicalJson(
      numerics.blas.map(({ package: name, internal_api, version, architecture }) => ({
        package: name,
        internal_api,
        version,
        architecture,
      })),
    ),
    'numerics.numpy_simd': canonicalJson({ baseline: numerics.numpy_simd.baseline, dispatched: numerics.numpy_simd.dispatched }),
    // the bits, not the pin's build identity: two builds that give the same bits compute alike
    'numerics.libm': canonicalJson(numerics.libm ? { functions: numerics.libm.functions, numpy: numerics.libm.numpy } : null),
    // GLIBC_TUNABLES is reported for the reader; what it does to the math shows in numerics.libm
    'numerics.environment': canonicalJson(Object.fromEntries(Object.entries(numerics.environment).filter(([k]) => k !== 'GLIBC_TUNABLES'))),
  };
}

/**
 * Why a worker that connects to a running job is refused (empty: admitted): the rules of
 * admissionProblems, then an identity that is none of the `admitted` workers' (the fields named are
 * those where it differs from the first admitted worker's), so that workers joining a job compute as
 * its admitted ones do.
 */
export function joinProblems(hello: HelloResult, admitted: readonly HelloResult[], rules: AdmissionRules): string[] {
  const problems = admissionProblems(hello, rules);
  if (problems.length || !admitted.length) return problems;
  const mine = bitsIdentity(hello);
  const fields = Object.keys(mine);
  const theirs = admitted.map(bitsIdentity);
  if (theirs.some((other) => fields.every((field) => other[field] === mine[field]))) return [];
  return [`its identity differs from the admitted workers' in ${fields.filter((field) => theirs[0]![field] !== mine[field]).join(', ')}`];
}
