// The libm pin of the x86-64-v3 profile (native/libm-pin/README.md): glibc's generic log1p/expm1,
// preloaded into every worker. Its bits are glibc's own generic code's; a worker with other math is
// refused before any record, naming libm; with the pin, co2 and concrete give the published hashes.
import { execaSync } from 'execa';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasPublished, publishedRecords } from '../../pipelines/catalog/published.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { DEFAULT_PROFILE, profileByName } from '../../pipelines/core/profiles.ts';
import { ensureLibmPin, LIBM_PIN_SCRIPT } from '../../pipelines/core/runtime.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { workerEnvironment } from '../../pipelines/execution/dask/cluster.ts';
import { pythonEnvironment } from '../../pipelines/execution/launcher.ts';
import { WorkerPool } from '../../pipelines/execution/local/local-pool.ts';
import { rebuild } from '../../pipelines/jobs/rebuild.ts';
import { loadCatalog } from '../../pipelines/references/store.ts';
import { readReferenceTable, tablePath } from '../support/raw-references.ts';
import { cliProcess } from '../support/cli.ts';
import { expectRefusedBeforeAnyTask } from '../support/refusal.ts';
import { currentSettings, useTempWorkspace, type Workspace } from '../support/workspace.ts';

const portable = profileByName(DEFAULT_PROFILE);
const pin = portable.libm!;
const PYTHON = currentSettings().python.executable;

/** sha256 of NumPy's float64 log1p and expm1 over a million inputs (fixed seed) and the probes, in a process with `env`. */
const BITS_SCRIPT = `
import hashlib, json, numpy as np
from workflows import libm
rng = np.random.default_rng(23)
probes = libm.probes()
# no transcendental function makes the inputs: the environments compared here differ in the C library's exp
spread = rng.uniform(1.0, 2.0, 500_000) * np.exp2(rng.integers(-60, 17, 500_000).astype(np.float64))
x = np.concatenate([rng.uniform(-0.999, 4.0, 500_000), spread, np.array(probes["log1p"])])
y = np.concatenate([rng.uniform(-3.0, 3.0, 500_000), rng.uniform(-40, 40, 500_000), np.array(probes["expm1"])])
print(json.dumps({"log1p": hashlib.sha256(np.log1p(x).tobytes()).hexdigest(), "expm1": hashlib.sha256(np.expm1(y).tobytes()).hexdigest()}))
`;

function bits(env: Record<string, string>): { log1p: string; expm1: string } {
  return JSON.parse(execaSync(PYTHON, ['-c', BITS_SCRIPT], { cwd: ROOT, env, extendEnv: false }).stdout);
}

const isGlibc = execaSync('ldd', ['--version'], { reject: false }).stdout.toLowerCase().includes('glibc');

let scratch: string;
/** A library that exports another log1p (log(1 + x)) and, when loaded, creates $OTHER_LIBM_LOADED. */
let otherLibm: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'wwref-libm-'));
  otherLibm = join(scratch, 'other-log1p.so');
  const source = join(scratch, 'other-log1p.c');
  writeFileSync(
    source,
    [
      '#include <fcntl.h>',
      '#include <math.h>',
      '#include <stdlib.h>',
      '#include <unistd.h>',
      'double log1p(double x) { return log(1.0 + x); }',
      '__attribute__((constructor)) static void loaded(void) {',
      '  const char *mark = getenv("OTHER_LIBM_LOADED");',
      '  if (mark) close(open(mark, O_CREAT | O_WRONLY, 0644));',
      '}',
      '',
    ].join('\n'),
  );
  // the tests need a C compiler, as the pin itself does (test/setup/runtime.ts builds it first)
  execaSync('cc', ['-O2', '-fPIC', '-shared', '-o', otherLibm, source, '-lm']);
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe.skipIf(!isGlibc)('the pinned log1p/expm1 are glibc’s generic code', () => {
  it("equal this machine's glibc with its FMA variants masked, on a million inputs", () => {
    const settings = currentSettings();
    const pinned = pythonEnvironment(settings);
    expect(pinned.LD_PRELOAD?.split(' ')[0]).toBe(pin.library);
    expect(workerEnvironment(settings).LD_PRELOAD).toBe(pinned.LD_PRELOAD); // Dask workers, and `wwref worker --print-env`
    const { LD_PRELOAD: _, ...unpinned } = pinned;
    const generic = bits({ ...unpinned, GLIBC_TUNABLES: 'glibc.cpu.hwcaps=-FMA' });
    expect(bits(pinned)).toEqual(generic);
    const own = bits(unpinned);
    if (own.log1p === generic.log1p && own.expm1 === generic.expm1) console.info('this C library has no FMA variant of log1p/expm1');
    else expect(own).not.toEqual(generic); // the pin changes something here, which the comparison above shows it does right
  });
});

describe('a worker with other math', () => {
  it('another log1p preloaded by the environment comes after the pin: the same bits', async () => {
    const mark = join(scratch, 'loaded');
    const settings = loadSettings({}, { ...process.env, LD_PRELOAD: otherLibm, OTHER_LIBM_LOADED: mark });
    expect(pythonEnvironment(settings).LD_PRELOAD).toBe(`${pin.library} ${otherLibm}`);
    const pool = new WorkerPool(1, { settings });
    try {
      const { libm } = (await pool.hello()).numerics;
      expect(existsSync(mark)).toBe(true); // the other library was loaded into the worker
      expect(libm!.functions).toEqual(pin.expected);
      expect(libm!.pin).toMatch(/^glibc generic log1p/);
    } finally {
      await pool.close();
    }
  });

  it('a worker whose log1p is not the pin is refused before any record, naming libm', async () => {
    await expectRefusedBeforeAnyTask(
      currentSettings(),
      { LD_PRELOAD: otherLibm },
      /libm: log1p(, expm1)? give other bits than the profile pins .*no libm pin is loaded/,
    );
  });
});

describe.skipIf(!isGlibc)('a worker whose C library math is another variant', () => {
  it('is refused, naming the functions (glibc with its FMA variants masked)', async () => {
    const pool = new WorkerPool(1, { settings: currentSettings(), env: { GLIBC_TUNABLES: 'glibc.cpu.hwcaps=-FMA' } });
    try {
      await expect(pool.hello()).rejects.toThrow(/libm: the C library's (\w+, )*exp(, \w+)* give other bits than the profile's/);
    } finally {
      await pool.close();
    }
  });
});

describe('scripts/build-libm-pin.py', () => {
  const build = (args: string[], env: Record<string, string> = {}) =>
    execaSync(PYTHON, [LIBM_PIN_SCRIPT, ...args], { cwd: ROOT, reject: false, env: { ...process.env, ...env } });

  it('builds from a glibc tree into another folder, and the bits decide', () => {
    const out = join(scratch, 'pin');
    const done = build(['--out', out, '--glibc-source', join(ROOT, '.tools', 'libm-pin', 'glibc')]);
    expect(done.exitCode, done.stderr).toBe(0);
    const record = JSON.parse(readFileSync(join(out, 'build.json'), 'utf8'));
    expect(record.digests).toEqual(Object.fromEntries(pin.pinned.map((name) => [name, pin.expected[name]])));
    expect(build(['--out', out]).stderr).toMatch(/up to date/);
  });

  it('says in one line what it lacks: a compiler, glibc source, a folder of its own', () => {
    const noCompiler = build(['--out', join(scratch, 'none')], { CC: '', PATH: scratch });
    expect([noCompiler.exitCode, noCompiler.stderr.trim().split('\n')]).toEqual([1, [expect.stringMatching(/needs a C compiler/)]]);
    const wrongCompiler = build(['--out', join(scratch, 'none')], { CC: join(scratch, 'no-such-cc') });
    expect([wrongCompiler.exitCode, wrongCompiler.stderr.trim()]).toEqual([1, expect.stringMatching(/CC=.*no-such-cc names no program/)]);
    const notGlibc = build(['--out', join(scratch, 'none'), '--glibc-source', scratch]);
    expect([notGlibc.exitCode, notGlibc.stderr.trim()]).toEqual([2, expect.stringMatching(/is not a glibc source tree/)]);
    const missing = build(['--glibc-source', join(scratch, 'absent')]);
    expect([missing.exitCode, missing.stderr.trim()]).toEqual([2, expect.stringMatching(/no such file or folder/)]);
    const foreign = build(['--out', ROOT]);
    expect([foreign.exitCode, foreign.stderr.trim()]).toEqual([2, expect.stringMatching(/is not a libm pin folder/)]);
    expect(existsSync(join(scratch, 'none'))).toBe(false);
  });

  it('never replaces a folder that holds anything but an earlier pin, even one with a build.json', () => {
    const project = join(scratch, 'project');
    mkdirSync(join(project, 'src'), { recursive: true });
    writeFileSync(join(project, 'build.json'), '{}');
    writeFileSync(join(project, 'src', 'thesis.tex'), 'x');
    const refused = build(['--out', project, '--glibc-source', join(ROOT, '.tools', 'libm-pin', 'glibc')]);
    expect([refused.exitCode, refused.stderr.trim()]).toEqual([2, expect.stringMatching(/is not a libm pin folder/)]);
    expect(readFileSync(join(project, 'src', 'thesis.tex'), 'utf8')).toBe('x');
  });
});

describe('ensureLibmPin', () => {
  it('rebuilds a damaged pin from its own glibc files before anything preloads it', () => {
    const copy = join(scratch, 'damaged');
    cpSync(dirname(pin.library), copy, { recursive: true });
    const library = join(copy, basename(pin.library));
    writeFileSync(library, readFileSync(library).subarray(0, 1000)); // a truncated library crashes every process that preloads it
    const lines: string[] = [];
    expect(ensureLibmPin(currentSettings(), { library }, (line) => lines.push(line))).toBe(library);
    expect(readFileSync(library)).toEqual(readFileSync(pin.library));
    expect(lines.join('\n')).toMatch(/libm pin: built .* give the pinned bits/);
  });

  it('refuses a path LD_PRELOAD cannot carry, in one line', () => {
    expect(() => ensureLibmPin(currentSettings(), { library: join(scratch, 'a b', 'pin.so') })).toThrow(
      /LD_PRELOAD cannot carry a path with a space or colon: move the checkout/,
    );
  });

  it("'wwref worker --print-env' output survives a POSIX shell, quotes included", async () => {
    const odd = join(scratch, "it's.so");
    copyFileSync(otherLibm, odd);
    const printed = await cliProcess(['worker', '--print-env'], ROOT, { LD_PRELOAD: odd });
    expect(printed.code).toBe(0);
    const { stdout } = execaSync('sh', ['-c', `${printed.stdout}\nprintf %s "$LD_PRELOAD"`]);
    expect(stdout).toBe(`${pin.library} ${odd}`);
  });
});

describe.skipIf(!hasPublished(currentSettings().paths.published))('with the pin, the published co2 and concrete records', () => {
  let ws: Workspace;
  beforeAll(() => {
    ws = useTempWorkspace({ inputs: 'committed' });
  });
  afterAll(() => ws.dispose());

  it('rebuild to every published prediction hash and utility (their log1p/expm1 masks included)', async () => {
    const conditions = ['co2', 'concrete'];
    const summary = await rebuild(loadCatalog(ws.settings), { settings: ws.settings, conditions, workers: 2, quiet: true, log: () => {} });
    expect(summary.failed).toBe(0);
    let compared = 0;
    for (const id of conditions) {
      const ours = new Map(readReferenceTable(tablePath(id, ws.references)).records.map((r) => [r.mask, r]));
      for (const p of publishedRecords(ws.settings.paths.published, id)!) {
        expect([id, p.mask, ours.get(p.mask)!.prediction_sha256, ours.get(p.mask)!.utility]).toEqual([
          id,
          p.mask,
          p.prediction_sha256,
          p.utility,
        ]);
        compared++;
      }
    }
    expect(compared).toBe(32);
  });
});
