// Whether a worker may compute records: its hello (runtime identity) checked against the numerical
// profile, fixed string hashing, one-thread pools, the family registry, the expected package versions
// and the workflow code. Every executor admits its workers through this one function before they get
// work; the Dask bridge, which computes nothing, is checked on its code and versions only.
import { registryProblems } from '../catalog/families.ts';
import { versionDrift, workflowsSha256 } from './identity.ts';
import { profileProblems } from './numerics.ts';
import { type NumericalProfile } from '../core/profiles.ts';
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
    problems.push("its string hashing is randomized (PYTHONHASHSEED was not 0 when it started; a Dask worker started without '--preload-nanny workflows.cluster.nanny' gets Dask's own seed)");
  }
  const threaded = hello.threadpools.filter((p) => p.num_threads !== 1);
  if (threaded.length) problems.push(`thread pools with more than one thread: ${threaded.map((p) => `${p.api} ${p.num_threads}`).join(', ')}`);
  problems.push(...registryProblems(hello.families).map((p) => `family registry: ${p}`));
  return [...problems, ...interpreterProblems(hello, rules)];
}

/** Why a process that computes nothing but must run our code and versions (the Dask bridge) is refused. */
export function interpreterProblems(identity: InterpreterIdentity, rules: AdmissionRules): string[] {
  const problems: string[] = [];
  const code = rules.codeSha256 ?? workflowsSha256();
  if (identity.code_sha256 !== code) problems.push(`it runs other workflow code (workflows/ digest ${identity.code_sha256.slice(0, 12)}, here ${code.slice(0, 12)})`);
  if (!rules.allowVersionDrift) {
    const drift = versionDrift(identity.versions, rules.expectedVersions);
    if (drift.length) problems.push(`versions differ from the expected ones (${drift.join('; ')}); run 'npm run setup', or pass --allow-version-drift`);
  }
  return problems;
}
