// Hardening of the WhatWorkedBench pack reader (pipelines/jobs/wwb.ts), through both of its readers:
// readPack (replay --format wwb) and loadDiffSide (wwref diff). A pack is foreign input; each of these
// is refused with a one-line UserError naming the problem, within seconds (never a read of /dev/zero or
// a wait on a FIFO):
// - a files_sha256 key climbing out (`../../../../dev/zero`, `../outside.json`) or absolute;
// - a key naming a FIFO, a symbolic link inside the pack to a file outside it or to /dev/zero, an input
//   folder linked out of inputs/ (or an input out of its folder), a manifest larger than the limit;
// - a table or an input that files_sha256 does not list, a listed file whose bytes changed;
// - a folder without manifest.json; an instance (top level or manifest.source) that is not one name;
// - malformed tables: masks of mixed widths, a mask that is not 0/1, a family or instance that disagree.
// And exportPack refuses an output folder inside the reference folder or prepared/. Real files in a
// temporary folder, no workers: the published layouts (4a, 4b, 4c) read back as replay targets.
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDiffSide } from '../../pipelines/analysis/diff.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { exportPack, PACK_JSON_MAX_BYTES, readPack } from '../../pipelines/jobs/wwb.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings } from '../support/workspace.ts';

let ws: Workspace;
let count = 0;
beforeAll(() => {
  ws = useTempWorkspace();
});
afterAll(() => ws.dispose());

const hex = (c: string) => c.repeat(64);
const outcome = (utility: number) => ({ utility, native_metric: 'm', native_value: utility, prediction_sha256: hex('a'), warnings: [] });
const outcomes = (width: number) => Object.fromEntries([0, 1].map((i) => [i.toString(2).padStart(width, '0'), outcome(0.5 + i / 10)]));

/** The three published table layouts (records.md 4a, 4b, 4c). */
const TABLES: Record<string, unknown> = {
  // 4a four-option: family and source only in manifest.source
  wine: { manifest: { source: { instance: 'wine', family: 'clustering' } }, identity_sha256: hex('b'), outcomes: outcomes(4) },
  // 4b paired six-option: reads its base source's folder
  spambase__d6: {
    instance: 'spambase',
    family: 'classification',
    plan_sha256: hex('c'),
    source: {},
    outcomes: outcomes(6),
    manifest: { source: { instance: 'spambase', family: 'classification' } },
  },
  // 4c beat: the tolerance table is kept
  mitdb_100__d6: {
    instance: 'mitdb_100',
    family: 'beat_detection',
    dimensions: 6,
    outcomes: {
      '000000': {
        ...outcome(0.9),
        matching_tolerance_sensitivity: { '50': { true_positive: 3, f1: 0.75, precision: 1 } },
        wall_seconds: 0.1,
      },
    },
    manifest: { source: { instance: 'mitdb_100', family: 'beat_detection' } },
  },
};

/** Every regular file and link under `dir`, relative, '/'-separated. */
function filesUnder(dir: string, base = dir): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const stats = lstatSync(path);
    return stats.isDirectory() ? filesUnder(path, base) : [relative(base, path).split('\\').join('/')];
  });
}

/**
 * Writes manifest.json listing the sha256 of every regular file of the pack, links to regular files
 * followed (the hash a forged pack would carry); `change` then edits the list.
 */
function seal(pack: string, change: (files: Record<string, string>) => void = () => {}): void {
  const files: Record<string, string> = {};
  for (const name of filesUnder(pack))
    if (name !== 'manifest.json' && statSync(join(pack, name)).isFile()) files[name] = sha256Hex(readFileSync(join(pack, name)));
  change(files);
  writeFileSync(join(pack, 'manifest.json'), JSON.stringify({ files_sha256: files, replay_versions: { numpy: '2.2.6' } }));
}

function writeTable(pack: string, id: string, table: unknown): void {
  mkdirSync(join(pack, 'references'), { recursive: true });
  writeFileSync(join(pack, 'references', `${id}.json`), JSON.stringify(table, null, 2));
}

/** A fresh, sealed pack of the three layouts with made-up input bytes (nothing here executes them). */
function goodPack(edit: (pack: string) => void = () => {}, change?: (files: Record<string, string>) => void): string {
  const pack = join(ws.root, `pack-${++count}`);
  for (const [id, table] of Object.entries(TABLES)) writeTable(pack, id, table);
  for (const source of ['wine', 'spambase', 'mitdb_100']) {
    mkdirSync(join(pack, 'inputs', source), { recursive: true });
    writeFileSync(join(pack, 'inputs', source, 'arrays.npz'), `arrays of ${source}`);
    writeFileSync(join(pack, 'inputs', source, 'metadata.json.gz'), `metadata of ${source}`);
  }
  edit(pack);
  seal(pack, change);
  return pack;
}

/** A file outside every pack. */
function outsideFile(name: string, content: string | Buffer): string {
  const path = join(ws.root, 'outside', name);
  mkdirSync(join(ws.root, 'outside'), { recursive: true });
  writeFileSync(path, content);
  return path;
}

/** `read` refused with a UserError of one line matching `expected`, in under five seconds. */
function refusedQuickly(read: () => unknown, expected: RegExp): void {
  const started = performance.now();
  let error: unknown;
  try {
    read();
  } catch (caught) {
    error = caught;
  }
  const elapsed = performance.now() - started;
  expect(error, 'refused').toBeInstanceOf(UserError);
  const message = (error as Error).message;
  expect(message).toMatch(expected);
  expect(message, 'one line').not.toContain('\n');
  expect(elapsed, 'refused within seconds').toBeLessThan(5000);
}

/** Both readers of packs refuse it: replay's readPack and diff's loadDiffSide. */
function bothRefuse(pack: string, expected: RegExp, conditions: string[] = []): void {
  refusedQuickly(() => readPack(pack, conditions), expected);
  refusedQuickly(() => loadDiffSide(currentSettings().paths, pack, conditions), expected);
}

describe('a good pack', () => {
  it('reads the three published layouts as replay targets, inputs by their listed sha256', () => {
    const pack = goodPack();
    const { targets, expected } = readPack(pack);
    expect(targets.map((t) => [t.condition, t.family, t.input.source, t.records.length])).toEqual([
      ['mitdb_100__d6', 'beat_detection', 'mitdb_100', 1],
      ['spambase__d6', 'classification', 'spambase', 2],
      ['wine', 'clustering', 'wine', 2],
    ]);
    expect(targets[2]!.input.files).toEqual({
      'arrays.npz': sha256Hex('arrays of wine'),
      'metadata.json.gz': sha256Hex('metadata of wine'),
    });
    expect(targets[0]!.records[0]!.tolerances).toEqual({ '50': { true_positive: 3, f1: 0.75, precision: 1 } });
    expect(targets[0]!.records[0]!.wall_seconds).toBe(0.1);
    expect(expected).toEqual({ versions: { numpy: '2.2.6' }, numerics: 'unrecorded' });
    expect(readPack(pack, ['wine']).targets.map((t) => t.condition)).toEqual(['wine']);
    const side = loadDiffSide(currentSettings().paths, pack);
    expect([side.layout, [...side.conditions.keys()].sort()]).toEqual(['pack', ['mitdb_100__d6', 'spambase__d6', 'wine']]);
  });
});

describe('paths a pack names are contained', () => {
  it("a files_sha256 key '../../../../dev/zero', an absolute key, a key to a file outside", () => {
    bothRefuse(
      goodPack(undefined, (files) => (files['../../../../dev/zero'] = hex('0'))),
      /files_sha256: "\.\.\/\.\.\/\.\.\/\.\.\/dev\/zero" climbs out with '\.\.'; refused$/,
    );
    bothRefuse(
      goodPack(undefined, (files) => (files['/dev/zero'] = hex('0'))),
      /files_sha256: "\/dev\/zero" is absolute; refused$/,
    );
    const outside = outsideFile('table.json', JSON.stringify(TABLES.wine));
    bothRefuse(
      goodPack(undefined, (files) => (files['../outside/table.json'] = sha256Hex(readFileSync(outside)))),
      /"\.\.\/outside\/table\.json" climbs out with '\.\.'/,
    );
  });

  it('a key naming a FIFO (as an extra file and as a table)', () => {
    const fifo = (path: string) => execFileSync('mkfifo', [path]);
    bothRefuse(
      goodPack(
        (pack) => fifo(join(pack, 'inputs', 'wine', 'extra')),
        (files) => (files['inputs/wine/extra'] = hex('0')),
      ),
      /pack file .*inputs\/wine\/extra is a FIFO, not a regular file; refused/,
    );
    bothRefuse(
      goodPack(
        (pack) => {
          rmSync(join(pack, 'references', 'wine.json'));
          fifo(join(pack, 'references', 'wine.json'));
        },
        (files) => (files['references/wine.json'] = hex('0')),
      ),
      /pack file .*references\/wine\.json is a FIFO, not a regular file; refused/,
    );
  });

  it('a symbolic link inside the pack to a file outside it, or to /dev/zero', () => {
    const outside = outsideFile('wine.json', JSON.stringify(TABLES.wine));
    bothRefuse(
      goodPack((pack) => {
        rmSync(join(pack, 'references', 'wine.json'));
        symlinkSync(outside, join(pack, 'references', 'wine.json'));
      }),
      /pack file 'references\/wine\.json' resolves to .*outside\/wine\.json, outside .*; refused/,
    );
    bothRefuse(
      goodPack(
        (pack) => symlinkSync('/dev/zero', join(pack, 'inputs', 'wine', 'zero')),
        (files) => (files['inputs/wine/zero'] = hex('0')),
      ),
      /pack file 'inputs\/wine\/zero' resolves to \/dev\/zero, outside .*; refused/,
    );
  });

  it('an input folder linked out of inputs/, and the manifest or references/ linked out of the pack', () => {
    const names = ['arrays.npz', 'metadata.json.gz'];
    bothRefuse(
      goodPack(
        (pack) => {
          mkdirSync(join(pack, 'elsewhere'));
          for (const name of names) writeFileSync(join(pack, 'elsewhere', name), `${name} elsewhere`);
          rmSync(join(pack, 'inputs', 'wine'), { recursive: true });
          symlinkSync(join(pack, 'elsewhere'), join(pack, 'inputs', 'wine'));
        },
        (files) => {
          for (const name of names) files[`inputs/wine/${name}`] = sha256Hex(`${name} elsewhere`);
        },
      ),
      /pack input folder 'wine' resolves to .*elsewhere, outside .*inputs; refused/,
    );
    // an input linked to another file of the pack (listed, its hash right): still not a file of its folder
    bothRefuse(
      goodPack((pack) => {
        rmSync(join(pack, 'inputs', 'wine', 'arrays.npz'));
        symlinkSync(join(pack, 'inputs', 'spambase', 'arrays.npz'), join(pack, 'inputs', 'wine', 'arrays.npz'));
      }),
      /pack input 'arrays\.npz' resolves to .*inputs\/spambase\/arrays\.npz, outside .*inputs\/wine; refused/,
    );
    const pack = goodPack();
    const manifest = outsideFile('manifest.json', readFileSync(join(pack, 'manifest.json')));
    rmSync(join(pack, 'manifest.json'));
    symlinkSync(manifest, join(pack, 'manifest.json'));
    bothRefuse(pack, /pack manifest 'manifest\.json' resolves to .*outside\/manifest\.json, outside .*; refused/);
    const linked = goodPack();
    mkdirSync(join(ws.root, 'outside', 'references'), { recursive: true });
    rmSync(join(linked, 'references'), { recursive: true });
    symlinkSync(join(ws.root, 'outside', 'references'), join(linked, 'references'));
    bothRefuse(linked, /pack folder 'references' resolves to .*outside\/references, outside .*; refused/);
  });

  it('a manifest larger than the limit is refused unread', () => {
    const pack = goodPack();
    truncateSync(join(pack, 'manifest.json'), PACK_JSON_MAX_BYTES + 1); // sparse: nothing is written
    bothRefuse(
      pack,
      new RegExp(
        `pack manifest .*manifest\\.json is ${PACK_JSON_MAX_BYTES + 1} bytes, more than the ${PACK_JSON_MAX_BYTES} allowed; refused`,
      ),
    );
  });

  it('a condition that is not one name, an unknown condition', () => {
    bothRefuse(goodPack(), /condition "\.\.\/outside" is not a single name/, ['../outside']);
    bothRefuse(goodPack(), /unknown instance 'nope': .*references\/nope\.json does not exist/, ['nope']);
  });
});

describe('every file used is listed and checked', () => {
  it('a references/*.json that files_sha256 does not list (read whole or named)', () => {
    const unlisted = goodPack(
      (pack) => writeTable(pack, 'extra', TABLES.wine),
      (files) => delete files['references/extra.json'],
    );
    bothRefuse(
      unlisted,
      /pack table references\/extra\.json is not listed in .*manifest\.json files_sha256, so it cannot be checked; refused/,
    );
    bothRefuse(unlisted, /pack table references\/extra\.json is not listed/, ['extra']);
    expect(readPack(unlisted, ['wine']).targets).toHaveLength(1);
  });

  it('an input that files_sha256 does not list', () => {
    bothRefuse(
      goodPack(undefined, (files) => delete files['inputs/wine/arrays.npz']),
      /pack input inputs\/wine\/arrays\.npz \(of wine\) is not listed in .*files_sha256/,
    );
  });

  it('a listed file whose bytes changed: a table, an input, a file no table uses; a listed file missing', () => {
    const table = goodPack();
    writeFileSync(join(table, 'references', 'wine.json'), `${JSON.stringify({ ...(TABLES.wine as object), outcomes: outcomes(4) })} `);
    bothRefuse(table, /pack file changed: .*references\/wine\.json \(recorded [0-9a-f]{64}, file [0-9a-f]{64}\)$/);
    const input = goodPack();
    writeFileSync(join(input, 'inputs', 'wine', 'arrays.npz'), 'other arrays');
    bothRefuse(input, /pack file changed: .*inputs\/wine\/arrays\.npz/);
    // every listed file is checked, also when only another condition is read
    bothRefuse(input, /pack file changed: .*inputs\/wine\/arrays\.npz/, ['spambase__d6']);
    const missing = goodPack();
    rmSync(join(missing, 'inputs', 'spambase', 'metadata.json.gz'));
    bothRefuse(missing, /pack file missing: .*inputs\/spambase\/metadata\.json\.gz$/);
  });

  it('a folder without manifest.json, or without references/', () => {
    const pack = goodPack();
    rmSync(join(pack, 'manifest.json'));
    bothRefuse(
      pack,
      /is not a WhatWorkedBench pack: no manifest\.json \(a pack holds manifest\.json \(files_sha256: the sha256 of every file/,
    );
    const bare = join(ws.root, 'bare');
    mkdirSync(join(bare, 'references'), { recursive: true });
    bothRefuse(bare, /is not a WhatWorkedBench pack: no manifest\.json/);
    mkdirSync(join(ws.root, 'empty'));
    refusedQuickly(() => readPack(join(ws.root, 'empty')), /empty is not a WhatWorkedBench pack: no manifest\.json/);
    // to diff, a folder without references/ is not a pack; it is no reference folder either
    refusedQuickly(
      () => loadDiffSide(currentSettings().paths, join(ws.root, 'empty')),
      /empty is neither a reference folder \(no manifest\.json\) nor a WhatWorkedBench pack/,
    );
  });
});

describe('tables and manifests are schema-checked', () => {
  it("an instance '../outside', at the top or in manifest.source", () => {
    bothRefuse(
      goodPack((pack) => writeTable(pack, 'spambase__d6', { ...(TABLES.spambase__d6 as object), instance: '../outside', manifest: {} })),
      /pack table .*spambase__d6\.json is malformed: instance: "\.\.\/outside" is not a single file name; refused/,
    );
    bothRefuse(
      goodPack((pack) =>
        writeTable(pack, 'wine', { manifest: { source: { instance: '../outside', family: 'clustering' } }, outcomes: outcomes(4) }),
      ),
      /manifest\.source\.instance: "\.\.\/outside" is not a single file name/,
    );
  });

  it('instance or family that disagree, an unknown family', () => {
    bothRefuse(
      goodPack((pack) => writeTable(pack, 'spambase__d6', { ...(TABLES.spambase__d6 as object), instance: 'wine' })),
      /instance 'wine' and manifest\.source\.instance 'spambase' differ; refused/,
    );
    bothRefuse(
      goodPack((pack) =>
        writeTable(pack, 'wine', { manifest: { source: { instance: 'wine', family: 'astrology' } }, outcomes: outcomes(4) }),
      ),
      /unknown or missing family 'astrology'/,
    );
  });

  it('masks of mixed widths, a mask that is not 0/1, no outcomes, a malformed record or sha256', () => {
    const table = (outcomesOf: unknown) => (pack: string) =>
      writeTable(pack, 'wine', { manifest: { source: { instance: 'wine', family: 'clustering' } }, outcomes: outcomesOf });
    bothRefuse(goodPack(table({ ...outcomes(4), ...outcomes(6) })), /outcomes: masks of different widths \(4 and 6\)/);
    bothRefuse(goodPack(table({ '01x1': outcome(1) })), /outcomes: "01x1" is not a mask \(4 or 6 characters 0\/1\)/);
    bothRefuse(goodPack(table({})), /outcomes: no outcomes/);
    bothRefuse(goodPack(table({ '0000': { ...outcome(1), utility: 'high' } })), /outcomes\.0000\.utility: /);
    bothRefuse(
      goodPack(undefined, (files) => (files['references/wine.json'] = 'WINE')),
      /files_sha256\.references\/wine\.json: is not a sha256/,
    );
    bothRefuse(
      goodPack((pack) => writeFileSync(join(pack, 'references', 'wine.json'), '{"outcomes": ')),
      /pack table .*wine\.json is not JSON: /,
    );
  });
});

describe('exportPack writes only a pack folder of its own', () => {
  it('refuses an output folder inside the reference folder or prepared/, before reading anything', () => {
    refusedQuickly(
      () => exportPack(currentSettings(), join(ws.references, 'pack')),
      /pack folder .*references\/pack is inside .*references, which only wwref itself writes; choose another path/,
    );
    refusedQuickly(
      () => exportPack(currentSettings(), join(ws.prepared, 'wine', '..', 'pack')),
      /pack folder .*is inside .*prepared, which only wwref itself writes/,
    );
  });
});
