// The numerical profile: workers run under it and are checked against it before they compute; the
// records most sensitive to BLAS kernels and SIMD loops reproduce the committed tables on this CPU,
// whatever x86-64 CPU it is; references of another profile are refused by replay and rebuild.
import { loadCatalog } from '../../pipelines/references/store.ts';
import {
  readReferenceManifest,
  readReferenceTable,
  tablePath,
  writeReferenceManifest,
  writeReferenceTable,
} from '../support/raw-references.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { UserError } from '../../pipelines/core/errors.ts';
import { platformDrift, profileProblems } from '../../pipelines/execution/numerics.ts';
import { DEFAULT_PROFILE, profileByName, profileEnvironment } from '../../pipelines/core/profiles.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { WorkerPool } from '../../pipelines/execution/local/local-pool.ts';
import type { NumericsReport } from '../../pipelines/execution/protocol.ts';
import { rebuild } from '../../pipelines/jobs/rebuild.ts';

import { replay } from '../../pipelines/jobs/replay.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings } from '../support/workspace.ts';
import { expectRefusedBeforeAnyTask } from '../support/refusal.ts';

const committed = join(ROOT, 'outputs', 'references');
const portable = profileByName(DEFAULT_PROFILE);

/** This machine's report under the default profile, from a real worker. */
let here: NumericsReport;

beforeAll(async () => {
  const pool = new WorkerPool(1, { settings: currentSettings() });
  try {
    here = (await pool.hello()).numerics;
  } finally {
    await pool.close();
  }
});

describe('numerical profile of the workers', () => {
  it('is the portable profile by default, and every worker reports its state', () => {
    expect(currentSettings().profile.name).toBe(DEFAULT_PROFILE);
    expect(profileProblems(portable, here)).toEqual([]);
    // Both OpenBLAS copies (NumPy's and SciPy's) are loaded and run the pinned kernels.
    expect(here.blas.map((b) => b.package)).toEqual(['numpy', 'scipy']);
    expect(here.blas.every((b) => b.architecture === 'Haswell')).toBe(true);
    expect(here.numpy_simd.dispatched.some((f) => f.startsWith('AVX512'))).toBe(false);
    expect(here.numpy_simd.dispatched).toContain('AVX2');
  });

  it('refuses, before computing, a worker forced onto another OpenBLAS kernel', async () => {
    // Prescott (SSE3) kernels run on every x86-64 CPU; OpenBLAS reports them as Katmai.
    await expectRefusedBeforeAnyTask(
      currentSettings(),
      { OPENBLAS_CORETYPE: 'Prescott' },
      /numpy's openblas .* runs Katmai kernels, the profile requires Haswell/,
    );
  });

  it("refuses a worker whose NumPy does not dispatch the profile's loops", async () => {
    const pool = new WorkerPool(1, { settings: currentSettings(), env: { NPY_DISABLE_CPU_FEATURES: 'AVX2' } });
    try {
      await expect(pool.hello()).rejects.toThrow(/NumPy's AVX2 loops are disabled by NPY_DISABLE_CPU_FEATURES, the profile uses them/);
    } finally {
      await pool.close();
    }
  });

  it('refuses an inherited variable that the profile sets otherwise, naming it', () => {
    expect(() => profileEnvironment(portable, { OPENBLAS_CORETYPE: 'Zen' })).toThrow(/OPENBLAS_CORETYPE="Zen" is set in the environment/);
    expect(() => profileEnvironment(portable, { NPY_ENABLE_CPU_FEATURES: 'AVX2' })).toThrow(/NPY_ENABLE_CPU_FEATURES/);
    expect(profileEnvironment(portable, { OPENBLAS_CORETYPE: 'Haswell' })).toEqual(portable.environment);
    expect(profileEnvironment(profileByName('native'), { OPENBLAS_CORETYPE: 'Zen' })).toEqual({});
  });

  it('refuses machines the profile cannot serve: another architecture, a CPU without AVX2/FMA', () => {
    expect(profileProblems(portable, { ...here, machine: 'aarch64' })).toEqual([
      expect.stringMatching(/this machine is aarch64, profile 'x86-64-v3' is for x86_64/),
    ]);
    const old = {
      ...here,
      numpy_simd: { ...here.numpy_simd, cpu_features: here.numpy_simd.cpu_features.filter((f) => f !== 'AVX2' && f !== 'FMA3') },
    };
    expect(profileProblems(portable, old).join('\n')).toMatch(/lacks FMA3, AVX2, which profile 'x86-64-v3' requires/);
    expect(profileProblems(profileByName('native'), { ...here, machine: 'aarch64' })).toEqual([]);
  });

  it('drift in the C library is drift in its math: references built without the pin, or with other bits', () => {
    const recorded = { profile: DEFAULT_PROFILE, environment: { ...portable.environment }, effective: here };
    expect(platformDrift(recorded, portable, here)).toEqual([]);
    // another C library version whose math gives the same bits is no drift
    expect(platformDrift(recorded, portable, { ...here, libc: 'glibc 9.99' })).toEqual([]);
    const unpinned = { ...recorded, effective: { ...here, libm: { ...here.libm!, pin: null } } };
    expect(platformDrift(unpinned, portable, here)).toEqual([expect.stringMatching(/built without the libm pin \(log1p, expm1/)]);
    const otherExp = {
      ...recorded,
      effective: { ...here, libm: { ...here.libm!, functions: { ...here.libm!.functions, exp: '0'.repeat(16) } } },
    };
    expect(platformDrift(otherExp, portable, here)).toEqual([expect.stringMatching(/the C library's exp give other bits here/)]);
    // native references built before the fingerprint existed are not drift for lack of it
    const native = profileByName('native');
    const { libm: _, ...before } = here;
    expect(platformDrift({ profile: 'native', environment: {}, effective: before }, native, here)).toEqual([]);
  });

  it('unknown profile names are refused with the known ones', () => {
    expect(() => profileByName('fastest')).toThrow(/unknown numerical profile 'fastest' \(known: x86-64-v3, native\)/);
  });
});

describe('portable bits', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = useTempWorkspace();
  });
  afterAll(() => ws.dispose());

  // Conditions whose bits depend on BLAS kernels or NumPy SIMD loops when no profile pins them
  // (regression: every airfoil mask; log1p/expm1 masks of co2 and elnino; beat-detection filters; graph features).
  const sensitive = ['airfoil', 'co2', 'elnino', 'mitdb_100__d6', 'graph_lesmis__d6'];

  it('rebuilds the BLAS- and SIMD-sensitive conditions with the committed hashes and utilities', async () => {
    const summary = await rebuild(loadCatalog(currentSettings()), {
      settings: currentSettings(),
      conditions: sensitive,
      workers: 2,
      fresh: true,
      quiet: true,
      log: () => {},
    });
    expect(summary.failed).toBe(0);
    let compared = 0;
    for (const id of sensitive) {
      const want = readReferenceTable(tablePath(id, committed)).records;
      const got = readReferenceTable(tablePath(id, ws.references)).records;
      expect(
        got.map((r) => [r.mask, r.prediction_sha256, r.utility]),
        id,
      ).toEqual(want.map((r) => [r.mask, r.prediction_sha256, r.utility]));
      compared += got.length;
    }
    expect(compared).toBe(16 + 16 + 16 + 64 + 64);
    expect(readReferenceManifest(ws.references)!.numerics).toMatchObject({ profile: DEFAULT_PROFILE, environment: portable.environment });
  });

  it('replay refuses references of another profile, naming both, unless platform drift is allowed', async () => {
    const dir = join(ws.root, 'native-refs');
    const manifest = readReferenceManifest(ws.references)!;
    const conditions = { airfoil: manifest.conditions.airfoil! };
    // the table built under that profile says so in its metadata too: re-sealed into the manifest
    const reprofiled = (profile: string | null) => {
      const { records, metadata } = readReferenceTable(tablePath('airfoil', ws.references));
      const bytes = writeReferenceTable(tablePath('airfoil', dir), records, {
        wwref: JSON.stringify({ ...JSON.parse(metadata.wwref!), numerical_profile: profile }),
      });
      return { airfoil: { ...conditions.airfoil, table_sha256: sha256Hex(bytes) } };
    };
    writeReferenceManifest(
      {
        ...manifest,
        conditions: reprofiled('native'),
        numerics: {
          profile: 'native',
          environment: {},
          effective: { ...here, blas: here.blas.map((b) => ({ ...b, architecture: 'SkylakeX' })) },
        },
      },
      dir,
    );
    const refused = replay({ settings: currentSettings(), referencesDir: dir, quiet: true });
    await expect(refused).rejects.toThrow(UserError);
    await expect(refused).rejects.toThrow(
      /built under numerical profile 'native' \(.*SkylakeX.*\); this machine runs 'x86-64-v3'.*--allow-platform-drift/,
    );

    const tolerant = await replay({ settings: currentSettings(), referencesDir: dir, quiet: true, allowPlatformDrift: true });
    expect(tolerant.all_passed).toBe(true);
    expect(tolerant.allow_platform_drift).toBe(true);
    expect(tolerant.platform_drift.join()).toMatch(/'native'/);
    expect(tolerant.numerical_profile).toBe(DEFAULT_PROFILE);

    const { numerics: _, ...unrecorded } = manifest;
    writeReferenceManifest({ ...unrecorded, conditions: reprofiled(null) }, dir);
    await expect(replay({ settings: currentSettings(), referencesDir: dir, quiet: true })).rejects.toThrow(
      /the references record no numerical profile/,
    );
  });

  it('rebuild of some conditions refuses to mix another platform into one manifest', async () => {
    const manifest = readReferenceManifest(ws.references)!;
    writeReferenceManifest({ ...manifest, numerics: { ...manifest.numerics!, profile: 'native' } });
    await expect(
      rebuild(loadCatalog(currentSettings()), {
        settings: currentSettings(),
        conditions: ['airfoil'],
        workers: 1,
        quiet: true,
        log: () => {},
      }),
    ).rejects.toThrow(/built under numerical profile 'native'.*would mix runtimes in one manifest/);
    expect(platformDrift(readReferenceManifest(ws.references)!.numerics, portable, here)).toHaveLength(1);
  });
});
