// Named Python runtimes (wwref.config.json "runtimes", --runtime NAME, WWREF_RUNTIME): the declarations
// and their pins, the default path untouched, and a real sample under the `current` runtime: one small
// condition (nile, 16 records) rebuilt in .venv-current (created here if missing, ~1 min), recorded
// with that runtime's versions, refused by a replay under the pinned runtime with the runtime to pass,
// and replayed bit for bit once told to use it. This is the only test that builds `current`.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { readReferenceManifest } from '../support/raw-references.ts';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../pipelines/core/errors.ts';
import { declaredRuntimes, ROOT } from '../../pipelines/core/paths.ts';
import { ensurePythonRuntime } from '../../pipelines/core/runtime.ts';
import { pinnedVersions, REPLAY_PACKAGES, runtimeOfVersions, versionDrift } from '../../pipelines/execution/identity.ts';
import { rebuild } from '../../pipelines/jobs/rebuild.ts';
import { profileByName } from '../../pipelines/core/profiles.ts';
import { replay } from '../../pipelines/jobs/replay.ts';

import { prepareSources } from '../../pipelines/sources/prepare.ts';
import { cliInProcess } from '../support/cli.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings } from '../support/workspace.ts';
import { loadSettings, type Settings } from '../../pipelines/core/settings.ts';

/** Runs `body` with the settings of runtime `name` (as --runtime selects it). */
async function underRuntime<T>(name: string, body: (settings: Settings) => Promise<T> | T): Promise<T> {
  return body(currentSettings({ runtime: name }));
}

const marked = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.includes('==') && l.includes('# decides bits'))
    .map((l) => l.split('==')[0]!.trim().toLowerCase());

describe('runtime declarations', () => {
  it('pinned is the default (.venv, workflows/requirements.txt); current is declared with exact pins of the same packages', () => {
    expect(process.env.WWREF_RUNTIME).toBeUndefined();
    expect(currentSettings().runtime.name).toBe('pinned');
    expect(currentSettings().python.executable).toBe(process.env.WWREF_PYTHON ?? join(ROOT, '.venv', 'bin', 'python'));
    const byName = Object.fromEntries(declaredRuntimes().map((r) => [r.name, r]));
    expect(Object.keys(byName)).toEqual(expect.arrayContaining(['pinned', 'current']));
    expect(byName.current!.venv).toBe(join(ROOT, '.venv-current'));
    for (const r of declaredRuntimes()) {
      // every requirement is an exact pin, and the bit-deciding marks name the packages the worker reports
      const lines = readFileSync(r.requirements, 'utf8')
        .split('\n')
        .filter((l) => l.trim() && !l.trim().startsWith('#'));
      for (const line of lines) expect(line, `${r.name}: ${line}`).toMatch(/^[A-Za-z0-9_.-]+==[^\s#]+/);
      expect(marked(r.requirements), r.name).toEqual([...REPLAY_PACKAGES]);
    }
    // the same packages on both sides, none left behind by the newer runtime
    expect(Object.keys(pinnedVersions(byName.current!)).sort()).toEqual(Object.keys(pinnedVersions(byName.pinned!)).sort());
    expect(runtimeOfVersions(pinnedVersions(byName.current!))).toBe('current');
    expect(runtimeOfVersions(pinnedVersions(byName.pinned!))).toBe('pinned');
  });

  it('an undeclared runtime is one line, exit 2, before any work; without --runtime nothing is selected', async () => {
    expect(() => loadSettings({ runtime: 'nope' }, {})).toThrow(UserError);
    const bad = await cliInProcess(['rebuild', '--runtime', 'nope', '--condition', 'nile'], ROOT);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/runtime 'nope' is not declared in wwref\.config\.json \(declared: pinned, current\)/),
    ]);
    const listed = await cliInProcess(['list'], ROOT);
    expect(listed.code).toBe(0);
    expect(process.env.WWREF_RUNTIME).toBeUndefined();
  });

  it('a rebuild under another runtime into the pinned references is refused before any work', async () => {
    const refused = await cliInProcess(['rebuild', '--runtime', 'current', '--condition', 'nile'], ROOT);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /outputs\/references holds references of runtime 'pinned'; runtime 'current' writes its references into a folder of its own/,
    );
    expect(process.env.WWREF_RUNTIME).toBeUndefined();
  });

  it("the portable profile is spelled in the target names of each runtime's NumPy, and refuses a NumPy it does not know", () => {
    const byName = Object.fromEntries(declaredRuntimes().map((r) => [r.name, r]));
    const pinned = profileByName('x86-64-v3', pinnedVersions(byName.pinned!).numpy);
    const current = profileByName('x86-64-v3', pinnedVersions(byName.current!).numpy);
    expect(pinned.environment.NPY_DISABLE_CPU_FEATURES).toContain('AVX512_SKX');
    expect(current.environment).toEqual({ OPENBLAS_CORETYPE: 'Haswell', NPY_DISABLE_CPU_FEATURES: 'X86_V4 AVX512_ICL AVX512_SPR' });
    expect(current.expect?.numpyDispatched).toEqual(['X86_V3']);
    expect(() => profileByName('x86-64-v3', '2.9.0')).toThrow(/knows the SIMD target names of NumPy 2\.2 and 2\.5, not of NumPy 2\.9\.0/);
  });

  it('version drift towards another declared runtime names the runtime to pass', () => {
    const byName = Object.fromEntries(declaredRuntimes().map((r) => [r.name, r]));
    const drift = versionDrift(pinnedVersions(byName.pinned!), pinnedVersions(byName.current!));
    expect(drift.at(-1)).toBe("the expected versions are runtime 'current' (wwref.config.json): pass --runtime current");
    expect(drift.slice(0, -1).every((line) => / expected .*, installed /.test(line))).toBe(true);
  });
});

describe('a sample under the current runtime', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = useTempWorkspace();
    // the input is prepared by the pinned runtime, as the committed references' inputs are
    const [prepared] = await prepareSources([loadCatalog(currentSettings()).source('nile')], {
      settings: currentSettings(),
      log: () => {},
    });
    expect(prepared!.ok).toBe(true);
    await underRuntime('current', (settings) => ensurePythonRuntime(settings));
  });
  afterAll(() => ws?.dispose());

  it('rebuilds nile in .venv-current: the manifest records the current pins and the effective NumPy/OpenBLAS state', async () => {
    const summary = await underRuntime('current', (settings) =>
      rebuild(loadCatalog(settings), { settings, conditions: ['nile'], workers: 2, quiet: true, log: () => {} }),
    );
    expect(summary.conditions.map((c) => [c.condition, c.records, c.failed, c.error])).toEqual([['nile', 16, 0, undefined]]);
    const manifest = readReferenceManifest(ws.references)!;
    expect(runtimeOfVersions(manifest.versions)).toBe('current');
    expect(manifest.versions.numpy).toBe(pinnedVersions(declaredRuntimes().find((r) => r.name === 'current')!).numpy);
    expect(existsSync(join(ROOT, '.venv-current', 'bin', 'python'))).toBe(true);
    if (manifest.numerics!.effective.machine === 'x86_64') {
      // the newer NumPy's spelling of x86-64-v3 took effect: Haswell kernels, loops up to X86_V3
      expect(manifest.numerics!.effective.blas.every((b) => b.architecture === 'Haswell')).toBe(true);
      expect(manifest.numerics!.effective.numpy_simd.dispatched).toEqual(['X86_V3']);
      expect(manifest.numerics!.profile).toBe('x86-64-v3');
    }
  });

  it('replay under the pinned runtime refuses them and names the runtime; told to use it, every record replays exactly', async () => {
    await expect(replay({ settings: currentSettings(), referencesDir: ws.references, quiet: true })).rejects.toThrow(
      /pass --runtime current/,
    );
    const report = await underRuntime('current', (settings) => replay({ settings, referencesDir: ws.references, quiet: true }));
    expect(report.version_drift).toEqual([]);
    expect([report.passed, report.total, report.all_passed]).toEqual([16, 16, true]);
  });
});
