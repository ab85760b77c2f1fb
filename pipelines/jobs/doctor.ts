// `wwref doctor`: this machine's runtime identity and effective numerical profile, and whether it
// can reproduce a reference folder bit for bit (and if not, why). It starts one worker and runs no record.
import { relative } from 'node:path';
import { pinnedVersions, versionDrift } from '../execution/identity.ts';
import { describeNumerics, platformDrift } from '../execution/numerics.ts';
import { PROFILE_NAMES, profileByName, type NumericalProfile } from '../core/profiles.ts';
import { ROOT } from '../core/paths.ts';
import type { Settings } from '../core/settings.ts';
import { WorkerPool } from '../execution/local/local-pool.ts';
import { RuntimeDidNotStart, RuntimeRefused } from '../execution/executor.ts';
import type { HelloResult } from '../execution/protocol.ts';
import { ReferenceStore } from '../references/store.ts';

export interface DoctorResult {
  lines: string[];
  /** The machine runs the requested profile and the pinned versions, and would reproduce the references. */
  reproduces: boolean;
}

/** A worker's hello under `profile`; when the profile refuses this machine, the reason and a native hello. */
async function probe(settings: Settings, profile: NumericalProfile): Promise<{ hello: HelloResult; refusal?: string }> {
  // Versions are reported below, not refused: the doctor describes whatever runtime it finds.
  try {
    const checked = new WorkerPool(1, { settings, profile, allowVersionDrift: true });
    try {
      return { hello: await checked.hello() };
    } finally {
      await checked.close();
    }
  } catch (error) {
    // a profile this machine refuses: described with a native worker's hello; an interpreter that did
    // not start a worker at all is not tried twice (one bounded wait, then one line)
    if (!(error instanceof RuntimeRefused) || error instanceof RuntimeDidNotStart) throw error;
    const pool = new WorkerPool(1, { settings, profile: profileByName('native'), allowVersionDrift: true });
    try {
      return { hello: await pool.hello(), refusal: error.message };
    } finally {
      await pool.close();
    }
  }
}

/**
 * The libm pin the worker loaded and the fingerprint of the C library's math as it resolved it. After a
 * refusal the worker shown is a `native` one (nothing preloaded), so its fingerprint is not compared.
 */
function libmLines(n: HelloResult['numerics'], profile: NumericalProfile, refused: boolean, pad: (label: string) => string): string[] {
  if (!n.libm) return [`${pad('libm')}no fingerprint reported`];
  const pin = refused ? undefined : profile.libm;
  const loaded = n.libm.pin
    ? `pin loaded: ${n.libm.pin}`
    : pin
      ? `no pin loaded (the profile preloads ${pin.library})`
      : "no pin (the C library's own)";
  const prints = Object.entries(n.libm.functions).map(
    ([name, digest]) => `${name} ${digest}${pin && pin.expected[name] !== digest ? ' (differs)' : ''}`,
  );
  const verdict = refused
    ? `of a 'native' worker, shown because the '${profile.name}' worker was refused (why: below)`
    : !pin
      ? 'not checked by this profile'
      : prints.some((p) => p.endsWith('(differs)'))
        ? "differs from the profile's"
        : "equals the profile's";
  return [`${pad('libm')}${loaded}`, `${pad('')}fingerprint ${prints.join(', ')}: ${verdict}`];
}

export async function doctor(settings: Settings): Promise<DoctorResult> {
  const { profile } = settings;
  const dir = settings.paths.references;
  const { hello, refusal } = await probe(settings, profile);
  const n = hello.numerics;
  const pad = (label: string) => label.padEnd(12);
  const lines = [
    `${pad('python')}${hello.python} (${settings.python.executable}), ` +
      `string hashing ${hello.hash_randomization ? 'randomized (PYTHONHASHSEED is not 0)' : 'fixed (PYTHONHASHSEED=0)'}`,
    `${pad('versions')}${Object.entries(hello.versions)
      .map(([p, v]) => `${p} ${v}`)
      .join(', ')}`,
    `${pad('machine')}${n.machine}, ${n.cpu_model}, ${n.libc}`,
    ...n.blas.map(
      (b, i) =>
        `${pad(i ? '' : 'BLAS')}${b.package}: ${b.internal_api ?? '?'} ${b.version ?? '?'} (${b.library}), ${b.architecture ?? 'unknown'} kernels`,
    ),
    `${pad('NumPy SIMD')}baseline ${n.numpy_simd.baseline.join(' ')}; dispatched ${n.numpy_simd.dispatched.join(' ') || 'none'}`,
    ...libmLines(n, profile, refusal !== undefined, pad),
    `${pad('environment')}${
      Object.entries(n.environment)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ') || '(no OPENBLAS_/NPY_/MKL_/OMP_ variables)'
    }`,
    `${pad('profile')}${profile.name}: ${profile.description}`,
    `${pad('')}settings: ${
      Object.entries(profile.environment)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ') || 'none'
    }`,
    `${pad('')}${refusal ? `REFUSED: ${refusal}` : 'effective state matches the profile'}`,
    `${pad('profiles')}${PROFILE_NAMES.join(', ')} ` +
      `(choose with numerical_profile in wwref.config.json, or WWREF_NUMERICAL_PROFILE where the file sets none)`,
  ];
  const why: string[] = [];
  if (refusal) why.push(refusal);
  const pinned = versionDrift(hello.versions, pinnedVersions(settings.runtime));
  if (pinned.length) why.push(`installed versions differ from workflows/requirements.txt (${pinned.join('; ')})`);
  const shown = relative(ROOT, dir).startsWith('..') ? dir : relative(ROOT, dir) || '.';
  const manifest = new ReferenceStore(dir, settings.paths).manifest();
  if (!manifest) {
    why.push(`no reference manifest in ${shown}`);
  } else {
    const built = manifest.numerics
      ? `'${manifest.numerics.profile}' (${describeNumerics(manifest.numerics.effective)})`
      : 'no recorded profile';
    lines.push(`${pad('references')}${shown}: ${Object.keys(manifest.conditions).length} conditions built under ${built}`);
    const drift = versionDrift(hello.versions, manifest.versions);
    if (drift.length) why.push(`installed versions differ from the references' (${drift.join('; ')})`);
    if (!refusal) why.push(...platformDrift(manifest.numerics, profile, n));
  }
  const verdict = why.length
    ? `cannot reproduce ${shown} bit for bit: ${why.join('; ')}`
    : `reproduces ${shown} bit for bit: same numerical profile (${profile.name}) and pinned versions`;
  return { lines: [...lines, verdict], reproduces: why.length === 0 };
}
