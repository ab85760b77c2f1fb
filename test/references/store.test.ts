// The reference store on real files: a table and manifest re-sealed after an edit (the new sha256
// written into the manifest) are refused with what is wrong; manifests naming /dev/zero, a FIFO or a
// file outside the folder are refused within seconds; the lock is taken over once when its holder is
// dead or the file is empty; a killed commit's leftovers are rolled back or removed by the next write.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../pipelines/core/errors.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import type { ReferenceManifest } from '../../pipelines/references/manifest.ts';
import { checkReferenceFolder, ReferenceStore } from '../../pipelines/references/store.ts';
import { tableMetadata } from '../../pipelines/references/surface.ts';
import { TABLE_COLUMNS, tableBytes } from '../../pipelines/references/tables.ts';
import { makeData, makeVector, Null, Table, tableToIPC } from 'apache-arrow';
import { deadPid } from '../sources/hardening-support.ts';
import { surfaceRecords, writeSurfaceCatalog } from '../support/fixtures.ts';
import { readReferenceManifest, readReferenceTable, writeReferenceManifest, writeReferenceTable } from '../support/raw-references.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';

let ws: Workspace;
let good: string;
beforeAll(() => {
  ws = useTempWorkspace();
  good = join(ws.root, 'good');
  writeSurfaceCatalog(good, [
    { condition: 'alpha', dimensions: 4, utility: (z) => 0.5 + 0.1 * z[0]! },
    { condition: 'beta', dimensions: 4, utility: (_z, k) => k / 20 },
  ]);
});
afterAll(() => ws.dispose());

let copies = 0;
function copy(): string {
  const dir = join(ws.root, `copy-${++copies}`);
  cpSync(good, dir, { recursive: true });
  return dir;
}

/** Rewrites alpha's table with `edit` applied to its records and metadata, then writes its new sha256 into the manifest. */
function reseal(dir: string, edit: (t: ReturnType<typeof readReferenceTable>, m: ReferenceManifest) => void): void {
  const file = join(dir, 'alpha.arrow');
  const table = readReferenceTable(file);
  const manifest = readReferenceManifest(dir)!;
  edit(table, manifest);
  const bytes = writeReferenceTable(file, table.records, table.metadata);
  manifest.conditions.alpha!.table_sha256 = sha256Hex(bytes);
  writeReferenceManifest(manifest, dir);
}

function refusal(dir: string): string {
  try {
    new ReferenceStore(dir, ws.settings.paths).records();
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  throw new Error(`${dir} was accepted`);
}

describe('re-sealed tables are refused, naming what is wrong', () => {
  it('the untouched folder reads', () => {
    expect(new ReferenceStore(good, ws.settings.paths).records()).toHaveLength(32);
  });

  const cases: [string, (t: ReturnType<typeof readReferenceTable>, m: ReferenceManifest) => void, RegExp][] = [
    ['a dropped row', (t) => t.records.splice(15, 1), /has 15 rows, but the manifest records 16 \(one per mask\)/],
    [
      'a duplicated mask in place of another',
      (t) => (t.records[5] = { ...t.records[4]! }),
      /row 5 \(mask "0100"\): mask appears twice.*no record for mask\(s\) 0101/,
    ],
    ['a failed record', (t) => (t.records[2] = { ...t.records[2]!, status: 'failed', error: 'boom' }), /row 2 .*status failed \(boom\)/],
    [
      'a zeroed plan_sha256 column',
      (t) => {
        for (const r of t.records) r.plan_sha256 = '0'.repeat(64);
      },
      /plan_sha256 is "0{64}", the manifest says/,
    ],
    ['cleared schema metadata', (t) => (t.metadata = {}), /schema metadata lacks the wwref context/],
    [
      'a changed code identity in the manifest',
      (_t, m) => (m.code.workflows_sha256 = 'f'.repeat(64)),
      /metadata workflows_sha256 is .*, the manifest says "f{64}"/,
    ],
    ['rows out of order', (t) => t.records.reverse(), /row 0 \(mask "1111"\): expected mask 0000 here/],
    ['a record of another condition', (t) => (t.records[1] = { ...t.records[1]!, condition: 'beta' }), /row 1 .*condition is "beta"/],
    ['a utility outside [0, 1]', (t) => (t.records[3] = { ...t.records[3]!, utility: 1.5 }), /utility 1.5 is not in \[0, 1\]/],
  ];
  for (const [what, edit, message] of cases) {
    it(what, () => {
      const dir = copy();
      reseal(dir, edit);
      expect(refusal(dir)).toMatch(message);
    });
  }

  it('a manifest whose counts do not follow from the table, or that names a table outside the folder', () => {
    const counts = copy();
    const manifest = readReferenceManifest(counts)!;
    manifest.conditions.alpha!.records = 15;
    writeReferenceManifest(manifest, counts);
    expect(refusal(counts)).toMatch(/15 records, but 4 options have 16 masks/);

    const outside = copy();
    const named = readReferenceManifest(outside)!;
    named.conditions.alpha!.table = '../../../../dev/zero';
    writeReferenceManifest(named, outside);
    expect(refusal(outside)).toMatch(/table '..\/..\/..\/..\/dev\/zero' is not alpha.arrow/);
  });
});

describe('reads are contained and bounded', () => {
  const fast = (dir: string, message: RegExp) => {
    const started = Date.now();
    expect(refusal(dir)).toMatch(message);
    expect(Date.now() - started).toBeLessThan(3000);
  };

  it('a table that is a link to /dev/zero, a FIFO, or a link to a file outside the folder', () => {
    const zero = copy();
    rmSync(join(zero, 'alpha.arrow'));
    symlinkSync('/dev/zero', join(zero, 'alpha.arrow'));
    fast(zero, /resolves to \/dev\/zero, outside|not a regular file/);

    const fifo = copy();
    rmSync(join(fifo, 'alpha.arrow'));
    execFileSync('mkfifo', [join(fifo, 'alpha.arrow')]);
    fast(fifo, /is a FIFO, not a regular file; refused/);

    const linked = copy();
    const elsewhere = join(ws.root, 'elsewhere.arrow');
    cpSync(join(linked, 'alpha.arrow'), elsewhere);
    rmSync(join(linked, 'alpha.arrow'));
    symlinkSync(elsewhere, join(linked, 'alpha.arrow'));
    fast(linked, /resolves to .*elsewhere\.arrow, outside/);

    // a link inside the folder: named as a link, not taken for a changed table
    const inside = copy();
    cpSync(join(inside, 'alpha.arrow'), join(inside, 'alpha-copy.arrow'));
    rmSync(join(inside, 'alpha.arrow'));
    symlinkSync(join(inside, 'alpha-copy.arrow'), join(inside, 'alpha.arrow'));
    fast(inside, /reference table \S+alpha\.arrow is a symbolic link; wwref writes tables as files/);
  });

  it('a manifest that is a FIFO or far too large', () => {
    const fifo = copy();
    rmSync(join(fifo, 'manifest.json'));
    execFileSync('mkfifo', [join(fifo, 'manifest.json')]);
    fast(fifo, /reference manifest .* is a FIFO, not a regular file/);

    const large = copy();
    writeFileSync(join(large, 'manifest.json'), Buffer.alloc(33 << 20, 0x20));
    fast(large, /more than the \d+ allowed; refused/);
  });

  it('a few bytes of Arrow declaring a hundred million rows are refused before any row is decoded', () => {
    const dir = copy();
    const columns = Object.fromEntries(
      TABLE_COLUMNS.map((c) => [c, makeVector(makeData({ type: new Null(), length: 1e8, nullCount: 1e8 }))]),
    );
    const bytes = tableToIPC(new Table(columns), 'file');
    expect(bytes.length).toBeLessThan(4096);
    writeFileSync(join(dir, 'alpha.arrow'), bytes);
    const manifest = readReferenceManifest(dir)!;
    manifest.conditions.alpha!.table_sha256 = sha256Hex(bytes);
    writeReferenceManifest(manifest, dir);
    fast(dir, /column\(s\) condition \(expected Utf8\).* have another type/);
  });

  it('a condition id that is not one (terminal escapes, a newline) is refused as the manifest is read', () => {
    for (const id of ['alpha\u001b[2J\u001b[31mOK', 'al\npha', 'Alpha']) {
      const dir = copy();
      const manifest = readReferenceManifest(dir)!;
      manifest.conditions[id] = { ...manifest.conditions.alpha!, table: `${id}.arrow` };
      delete manifest.conditions.alpha;
      writeReferenceManifest(manifest, dir);
      expect(refusal(dir)).toMatch(/: not a condition id \(lower-case letters/);
    }
  });

  it('a table larger than its records allow is refused unread', () => {
    const dir = copy();
    const manifest = readReferenceManifest(dir)!;
    const huge = Buffer.alloc(6 << 20, 0);
    writeFileSync(join(dir, 'alpha.arrow'), huge);
    manifest.conditions.alpha!.table_sha256 = sha256Hex(huge);
    writeReferenceManifest(manifest, dir);
    fast(dir, /reference table .*alpha\.arrow is \d+ bytes, more than the \d+ allowed/);
  });

  it('no reference folder inside prepared inputs, the raw cache or the source manifests, nor around them', () => {
    expect(() => checkReferenceFolder(join(ws.prepared, 'wine'), ws.settings.paths)).toThrow(/is inside the prepared inputs/);
    expect(() => checkReferenceFolder(join(ws.cache, 'raw', 'x'), ws.settings.paths)).toThrow(/is inside the raw cache/);
    expect(() => checkReferenceFolder(join(ws.manifests, '..', 'manifests', 'y'), ws.settings.paths)).toThrow(
      /is inside the source manifests/,
    );
    expect(() => checkReferenceFolder(ws.root, ws.settings.paths)).toThrow(/contains the prepared inputs/);
    mkdirSync(ws.prepared, { recursive: true });
    const link = join(ws.root, 'sneaky');
    symlinkSync(ws.prepared, link);
    expect(() => checkReferenceFolder(join(link, 'wine'), ws.settings.paths)).toThrow(/is inside the prepared inputs/);
    expect(checkReferenceFolder(join(ws.root, 'mine'), ws.settings.paths)).toBe(join(ws.root, 'mine'));
    writeFileSync(join(ws.root, 'a-file'), 'not a folder');
    expect(() => checkReferenceFolder(join(ws.root, 'a-file'), ws.settings.paths)).toThrow(/cannot be a folder: it is a file/);
    expect(() => checkReferenceFolder(join(ws.root, 'a-file', 'below'), ws.settings.paths)).toThrow(
      /cannot be a folder: .*a-file is a file/,
    );
  });
});

describe('commits', () => {
  /** A change adding condition `id` (a real table) to whatever the folder holds. */
  const adding = (id: string) => (current: ReferenceManifest | undefined) => {
    const records = surfaceRecords({ condition: id, dimensions: 4, utility: () => 0.5 });
    const top = readReferenceManifest(good)!;
    const entry = { ...top.conditions.alpha!, source: `src_${id}`, table: `${id}.arrow`, table_sha256: '' };
    const bytes = tableBytes(records, tableMetadata(id, entry, top));
    const conditions = { ...(current?.conditions ?? {}), [id]: { ...entry, table_sha256: sha256Hex(bytes) } };
    return { manifest: { ...top, conditions }, tables: new Map([[id, bytes]]) };
  };
  const lockOf = (dir: string) => join(dir, '.wwref.lock');

  it('a live holder is waited for and named; a dead or an empty lock is taken over, by one writer at a time', async () => {
    const dir = copy();
    const store = new ReferenceStore(dir, ws.settings.paths);
    writeFileSync(lockOf(dir), JSON.stringify({ pid: process.pid }));
    const error = await store.commit(adding('gamma'), { waitSeconds: 1 }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(new RegExp(`being written by another wwref process \\(pid ${process.pid}`));
    expect(existsSync(lockOf(dir))).toBe(true);

    writeFileSync(lockOf(dir), JSON.stringify({ pid: deadPid() }));
    await store.commit(adding('gamma'), { waitSeconds: 5 });
    writeFileSync(lockOf(dir), '');
    // two writers find the same empty lock: both commit, neither loses the other's condition
    await Promise.all([store.commit(adding('delta'), { waitSeconds: 10 }), store.commit(adding('epsilon'), { waitSeconds: 10 })]);
    expect(Object.keys(store.manifest()!.conditions).sort()).toEqual(['alpha', 'beta', 'delta', 'epsilon', 'gamma']);
    expect(existsSync(lockOf(dir))).toBe(false);
    expect(store.records()).toHaveLength(80);
  });

  it('a lock that is a folder, a FIFO or a link is refused at once, never read or followed', async () => {
    for (const make of [
      (p: string) => mkdirSync(p),
      (p: string) => execFileSync('mkfifo', [p]),
      (p: string) => symlinkSync(join(ws.root, 'elsewhere-lock'), p),
    ]) {
      const dir = copy();
      make(lockOf(dir));
      const started = Date.now();
      await expect(new ReferenceStore(dir, ws.settings.paths).commit(adding('gamma'), { waitSeconds: 5 })).rejects.toThrow(
        /the lock .*\.wwref\.lock is not a regular file .*remove it/,
      );
      expect(Date.now() - started).toBeLessThan(2000);
      expect(readdirSync(dir).filter((n) => n.endsWith('.tmp'))).toEqual([]);
    }
  });

  it("a killed commit's leftovers: the table set aside is put back when the manifest still names it, the rest removed", async () => {
    const dir = copy();
    const dead = deadPid();
    const original = readFileSync(join(dir, 'alpha.arrow'));
    // killed after it set alpha aside and put its new table in, before the manifest (the commit point)
    writeFileSync(join(dir, `alpha.arrow.${dead}.1700000000000.old`), original);
    writeFileSync(join(dir, 'alpha.arrow'), Buffer.from('the new table of a killed writer'));
    writeFileSync(join(dir, `beta.arrow.${dead}.1700000000000.new.${dead}.1700000000001.tmp`), 'half');
    writeFileSync(join(dir, `manifest.json.${dead}.1700000000002.tmp`), '{"half":');
    const store = new ReferenceStore(dir, ws.settings.paths);
    await store.commit(adding('gamma'));
    expect(readFileSync(join(dir, 'alpha.arrow')).equals(original)).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['alpha.arrow', 'beta.arrow', 'gamma.arrow', 'manifest.json']);
    expect(store.records()).toHaveLength(48);
  });

  it('refuses to write a manifest that names two plans for one source', async () => {
    const dir = copy();
    const store = new ReferenceStore(dir, ws.settings.paths);
    const before = readFileSync(join(dir, 'manifest.json'));
    const change = (current: ReferenceManifest | undefined) => {
      const planned = adding('gamma')(current);
      planned.manifest.conditions.gamma = {
        ...planned.manifest.conditions.gamma!,
        source: 'src_alpha',
        plan_sha256: sha256Hex('another plan'),
      };
      return planned;
    };
    await expect(store.commit(change)).rejects.toThrow(/name two plans of source 'src_alpha'/);
    expect(readFileSync(join(dir, 'manifest.json')).equals(before)).toBe(true);
    expect(existsSync(join(dir, 'gamma.arrow'))).toBe(false);
  });
});
