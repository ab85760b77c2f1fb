// Hardening of preparation (pipelines/sources/prepare.ts and workflows/prepare/):
// - a killed prepare leaves prepared/<source>.staging-<pid> (and .old-<pid>): the next prepare of the
//   source removes those of processes that no longer exist, keeps those of live processes, and never
//   follows a symbolic link while cleaning;
// - the Python recipes refuse record and raw file names that are paths (the ECG recipe links
//   <record>.hea/.dat/.atr into a temporary folder: '../x' would have linked outside it).
// Real Python workers; everything under a temporary root.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestPath, prepareSources, sealManifest } from '../../pipelines/sources/prepare.ts';
import { WorkerPool } from '../../pipelines/execution/local/local-pool.ts';
import { currentSettings } from '../support/workspace.ts';
import { deadPid, filesUnder, useGuardedWorkspace, victim } from './hardening-support.ts';

const nile = loadCatalog(currentSettings()).source('nile');
const workspace = useGuardedWorkspace();

describe('stale staging folders of a killed prepare', () => {
  let sleeper: ChildProcess;
  afterAll(() => {
    sleeper?.kill();
  });

  it('are removed by the next prepare of the source (dead processes only), without following links', async () => {
    // what a killed prepare leaves, plus links that a careless cleaner would follow
    const outside = join(workspace().root, 'outside');
    const kept = victim(join(outside, 'keep.txt'));
    const [dead1, dead2, dead3] = [deadPid(), deadPid(), deadPid()];
    const staging = join(workspace().prepared, `nile.staging-${dead1}`);
    mkdirSync(staging, { recursive: true });
    writeFileSync(join(staging, 'arrays.npz'), 'half written');
    symlinkSync(outside, join(staging, 'link-to-outside')); // inside the stale folder
    const old = join(workspace().prepared, `nile.old-${dead2}`);
    mkdirSync(old);
    writeFileSync(join(old, 'metadata.json.gz'), 'old');
    const linkStaging = join(workspace().prepared, `nile.staging-${dead3}`);
    symlinkSync(outside, linkStaging); // the stale entry itself is a link
    // a prepare still running in another process: its staging folder must stay
    sleeper = spawn('sleep', ['120'], { stdio: 'ignore' });
    const live = join(workspace().prepared, `nile.staging-${sleeper.pid}`);
    mkdirSync(live);
    writeFileSync(join(live, 'arrays.npz'), 'in progress');
    // another source's staging folder is not this prepare's business
    const other = join(workspace().prepared, `wine.staging-${dead1}`);
    mkdirSync(other);

    const [outcome] = await prepareSources([nile], { settings: workspace().settings, workers: 1, online: false, mirrors: [] });
    expect(outcome!.ok, outcome!.error).toBe(true);
    expect(existsSync(manifestPath(workspace().settings.paths, 'nile'))).toBe(true);
    expect(filesUnder(join(workspace().prepared, 'nile'))).toEqual(['arrays.npz', 'metadata.json.gz']);

    expect(existsSync(staging)).toBe(false);
    expect(existsSync(old)).toBe(false);
    expect(lstatSync(linkStaging, { throwIfNoEntry: false })).toBeUndefined();
    kept.intact(); // neither link was followed
    expect(readdirSync(outside)).toEqual(['keep.txt']);
    expect(filesUnder(live)).toEqual(['arrays.npz']);
    expect(existsSync(other)).toBe(true);
    expect(readdirSync(workspace().prepared).sort()).toEqual(['nile', `nile.staging-${sleeper.pid}`, `wine.staging-${dead1}`].sort());
  });
});

const mitdb = currentSettings().mirrors.find((d) => existsSync(join(d, 'mitbih_arrhythmia', '100.hea')));

describe('the Python recipes refuse names that are paths (real worker)', () => {
  let pool: WorkerPool;
  let pyTmp: string;
  beforeAll(() => {
    pyTmp = join(workspace().root, 'pytmp');
    mkdirSync(pyTmp, { recursive: true });
    // the worker's temporary folders (tempfile) go under the test root, so an escape would land there
    pool = new WorkerPool(1, { settings: workspace().settings, env: { TMPDIR: pyTmp } });
  });
  afterAll(async () => {
    await pool.close();
  });

  const prepare = (recipe: string, params: unknown, raw: Record<string, string>, out: string) =>
    pool
      .submit((worker) => worker.prepare(recipe, params, raw, out), 60)
      .then(
        () => 'prepared',
        (error: Error) => error.message,
      );

  it.skipIf(!mitdb)('mitdb_ecg: a record name with ../ or an absolute path is refused before any link is made', async () => {
    const out = join(workspace().root, 'ecg-out');
    mkdirSync(out, { recursive: true });
    const files = (record: string) =>
      Object.fromEntries(['hea', 'dat', 'atr'].map((ext) => [`${record}.${ext}`, join(mitdb!, 'mitbih_arrhythmia', `100.${ext}`)]));
    const params = (record: string) => ({ record, channels: ['MLII'], samples: 1000, qrs_codes: [1] });

    const climbing = await prepare('mitdb_ecg', params('../escaped'), files('../escaped'), out);
    expect(climbing).toMatch(/raw file name: '\.\.\/escaped\.(hea|dat|atr)' climbs out of its folder/);
    const absolute = join(workspace().root, 'abs-escaped');
    expect(await prepare('mitdb_ecg', params(absolute), files(absolute), out)).toMatch(
      /raw file name: '.*abs-escaped\.(hea|dat|atr)' is an absolute path/,
    );
    // the record parameter on its own (raw names that are plain, a record that is not)
    const plain = files('100');
    expect(
      await prepare(
        'mitdb_ecg',
        params('sub/100'),
        { ...plain, 'sub/100.hea': plain['100.hea']!, 'sub/100.dat': plain['100.dat']!, 'sub/100.atr': plain['100.atr']! },
        out,
      ),
    ).toMatch(/mitdb_ecg: params\.record: 'sub\/100' holds a path separator; expected a plain file name/);
    expect(await prepare('mitdb_ecg', params('..'), plain, out)).toMatch(/mitdb_ecg: params\.record: '\.\.' climbs out of its folder/);

    // no link was made next to the temporary folder, or anywhere else under the test root
    expect(readdirSync(pyTmp)).toEqual([]);
    expect(existsSync(`${absolute}.hea`)).toBe(false);
    expect(filesUnder(out)).toEqual([]);
    // and the valid record still prepares
    expect(await prepare('mitdb_ecg', params('100'), plain, out)).toBe('prepared');
  });

  it('every recipe refuses a raw file name that climbs out or is absolute', async () => {
    const out = join(workspace().root, 'tab-out');
    mkdirSync(out, { recursive: true });
    const csv = join(workspace().root, 'table.csv');
    writeFileSync(csv, 'a,b\n1,2\n');
    const params = { file: '../table.csv', columns: ['a'], fill: 'none', cut_fraction: 0.5 };
    expect(await prepare('statsmodels_series', params, { '../table.csv': csv }, out)).toMatch(
      /statsmodels_series: raw file name: '\.\.\/table\.csv' climbs out/,
    );
    expect(await prepare('statsmodels_series', { ...params, file: csv }, { [csv]: csv }, out)).toMatch(
      /statsmodels_series: raw file name: '.*table\.csv' is an absolute path/,
    );
    expect(filesUnder(out)).toEqual([]);
  });
});

describe('preparing again', () => {
  it('keeps a source manifest that says the same of the same bytes byte for byte, whatever versions prepared it', async () => {
    const [first] = await prepareSources([nile], { settings: workspace().settings });
    expect(first!.ok, first!.error).toBe(true);
    // as if another runtime had prepared it first: other versions, sealed
    const { content_sha256: _, ...body } = JSON.parse(readFileSync(manifestPath(workspace().settings.paths, 'nile'), 'utf8'));
    writeFileSync(
      manifestPath(workspace().settings.paths, 'nile'),
      `${JSON.stringify(sealManifest({ ...body, versions: { ...body.versions, numpy: '9.9.9' } }), null, 2)}\n`,
    );
    const before = readFileSync(manifestPath(workspace().settings.paths, 'nile'));
    const [again] = await prepareSources([nile], { settings: workspace().settings });
    expect(again!.ok, again!.error).toBe(true);
    expect(readFileSync(manifestPath(workspace().settings.paths, 'nile')).equals(before)).toBe(true);
    // a manifest that no longer holds (edited without resealing) is written afresh
    writeFileSync(manifestPath(workspace().settings.paths, 'nile'), before.toString().replace('9.9.9', '9.9.8'));
    await prepareSources([nile], { settings: workspace().settings });
    expect(JSON.parse(readFileSync(manifestPath(workspace().settings.paths, 'nile'), 'utf8')).versions.numpy).toBe(
      first!.manifest!.versions.numpy,
    );
  });
});
