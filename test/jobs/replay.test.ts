// Cold replay on a real, small condition (nile), and every tampering it must catch.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { readReferenceManifest, readReferenceTable, tablePath, writeReferenceManifest } from '../support/raw-references.ts';
import { cpSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tableBytes } from '../../pipelines/references/tables.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';

import { rebuild } from '../../pipelines/jobs/rebuild.ts';

import { replay, replayTargets, storedFromReference } from '../../pipelines/jobs/replay.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings, preparedFolder } from '../support/workspace.ts';
import { slowRecords, wrongHashOnMask, wrongMetricOnMask } from '../support/doubles.ts';

let ws: Workspace;

beforeAll(async () => {
  ws = useTempWorkspace();
  await rebuild(loadCatalog(currentSettings()), {
    settings: currentSettings(),
    conditions: ['nile'],
    workers: 2,
    quiet: true,
    log: () => {},
  });
});
afterAll(() => ws.dispose());

/** A copy of the reference folder with one record changed and the manifest re-sealed to match. */
function tamperedCopy(name: string, change: (r: ReturnType<typeof readReferenceTable>['records'][number]) => void): string {
  const dir = join(ws.root, name);
  cpSync(ws.references, dir, { recursive: true });
  const { records, metadata } = readReferenceTable(join(dir, 'nile.arrow'));
  change(records[5]!);
  const bytes = tableBytes(records, metadata);
  writeFileSync(join(dir, 'nile.arrow'), bytes);
  const manifest = readReferenceManifest(dir)!;
  manifest.conditions.nile!.table_sha256 = sha256Hex(bytes);
  writeReferenceManifest(manifest, dir);
  return dir;
}

describe('replay', () => {
  it('passes on an untouched table with one cold worker, and writes nothing into the references', async () => {
    const before = readdirSync(ws.references).map((f) => [f, statSync(join(ws.references, f)).mtimeMs]);
    const report = await replay({ settings: currentSettings(), quiet: true });
    expect(report.total).toBe(16);
    expect(report.passed).toBe(16);
    expect(report.all_passed).toBe(true);
    expect(report.median_timing_ratio).toBeGreaterThan(0);
    expect(readdirSync(ws.references).map((f) => [f, statSync(join(ws.references, f)).mtimeMs])).toEqual(before);
  });

  it('with two workers: the same records replayed, the same checks, fresh workers per condition', async () => {
    const one = await replay({ settings: currentSettings(), quiet: true, workers: 1 });
    const two = await replay({ settings: currentSettings(), quiet: true, workers: 2 });
    expect(two.workers).toBe(2);
    expect(two.all_passed).toBe(true);
    expect(two.records.map((r) => [r.mask, r.prediction_sha256, r.utility])).toEqual(
      one.records.map((r) => [r.mask, r.prediction_sha256, r.utility]),
    );
    const tampered = await replay({
      settings: currentSettings(),
      quiet: true,
      workers: 2,
      referencesDir: tamperedCopy('two-workers', (r) => (r.utility = r.utility! + 1e-12)),
    });
    expect(tampered.passed).toBe(15);
    expect(tampered.records.find((r) => !r.passed)!.failures.map((f) => f.check)).toEqual(['utility']);
  });

  it('names a flipped byte in a stored prediction hash', async () => {
    const dir = tamperedCopy('flipped-hash', (r) => {
      const h = r.prediction_sha256!;
      r.prediction_sha256 = (h[0] === '0' ? '1' : '0') + h.slice(1);
    });
    const report = await replay({ settings: currentSettings(), referencesDir: dir, quiet: true });
    expect(report.passed).toBe(15);
    const failed = report.records.filter((r) => !r.passed);
    expect(failed.map((r) => [r.mask, r.failures.map((f) => f.check)])).toEqual([['0101', ['prediction_sha256']]]);
  });

  it('names a changed utility (exact equality, not a tolerance)', async () => {
    const dir = tamperedCopy('changed-utility', (r) => {
      r.utility = r.utility! + Number.EPSILON;
    });
    const report = await replay({ settings: currentSettings(), referencesDir: dir, quiet: true });
    const failed = report.records.filter((r) => !r.passed);
    expect(failed.map((r) => [r.mask, r.failures.map((f) => f.check)])).toEqual([['0101', ['utility']]]);
  });

  it('refuses a table whose bytes differ from the manifest, naming the file', async () => {
    const dir = join(ws.root, 'changed-table');
    cpSync(ws.references, dir, { recursive: true });
    const bytes = readFileSync(join(dir, 'nile.arrow'));
    bytes[bytes.length - 20] = bytes[bytes.length - 20]! ^ 1;
    writeFileSync(join(dir, 'nile.arrow'), bytes);
    await expect(replay({ settings: currentSettings(), referencesDir: dir, quiet: true })).rejects.toThrow(
      /reference table changed: .*nile\.arrow/,
    );
  });

  it('refuses a tampered prepared input, naming the file', async () => {
    const file = join(preparedFolder('nile'), 'arrays.npz');
    const original = readFileSync(file);
    const bytes = Buffer.from(original);
    bytes[50] = bytes[50]! ^ 1;
    writeFileSync(file, bytes);
    try {
      const error = await replay({ settings: currentSettings(), quiet: true }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UserError);
      expect((error as Error).message).toMatch(/prepared input changed: .*nile\/arrays\.npz/);
    } finally {
      writeFileSync(file, original);
    }
  });

  it('reports a changed package version up front; --allow-version-drift replays with tolerances and says so', async () => {
    const dir = join(ws.root, 'drift');
    cpSync(ws.references, dir, { recursive: true });
    // references built under numpy 1.26.4: the manifest and the table's metadata both say so
    const manifest = readReferenceManifest(dir)!;
    manifest.versions.numpy = '1.26.4';
    const { records, metadata } = readReferenceTable(join(dir, 'nile.arrow'));
    const context = JSON.parse(metadata.wwref!);
    const bytes = tableBytes(records, { wwref: JSON.stringify({ ...context, versions: { ...context.versions, numpy: '1.26.4' } }) });
    writeFileSync(join(dir, 'nile.arrow'), bytes);
    manifest.conditions.nile!.table_sha256 = sha256Hex(bytes);
    writeReferenceManifest(manifest, dir);
    await expect(replay({ settings: currentSettings(), referencesDir: dir, quiet: true })).rejects.toThrow(
      /numpy: expected 1\.26\.4, installed 2\.2\.6/,
    );
    const report = await replay({ settings: currentSettings(), referencesDir: dir, quiet: true, allowVersionDrift: true });
    expect(report.version_drift).toEqual(['numpy: expected 1.26.4, installed 2.2.6']);
    expect(report.allow_version_drift).toBe(true);
    expect(report.passed).toBe(16);
  });

  it("checks the manifest's provenance it can (Python, threads), says which claims no replay can check, and names another generator", async () => {
    const dir = join(ws.root, 'provenance');
    cpSync(ws.references, dir, { recursive: true });
    const manifest = readReferenceManifest(dir)!;
    writeReferenceManifest(
      {
        ...manifest,
        python: '2.7.18',
        generator: 'another tool 9',
        threads: { ...manifest.threads, environment: { ...manifest.threads.environment, OMP_NUM_THREADS: '64' } },
      },
      dir,
    );
    await expect(replay({ settings: currentSettings(), referencesDir: dir, quiet: true })).rejects.toThrow(
      /Python 2\.7\.18; wwref builds with CPython 3\.12 .*threads: the references claim the thread settings .*"OMP_NUM_THREADS":"64"/,
    );
    const report = await replay({ settings: currentSettings(), referencesDir: dir, quiet: true, allowVersionDrift: true });
    expect(report.version_drift.join('; ')).toMatch(/Python: .*; threads: /);
    expect(report.provenance!.other_generator).toBe('another tool 9');
    expect(report.provenance!.unverifiable.map((u) => u.field)).toEqual(['code.git_commit', 'code.git_dirty', 'executor']);
    expect(report.passed).toBe(16);
    // the folder as rebuild wrote it claims nothing replay refuses, and names this wwref
    const own = await replay({ settings: currentSettings(), quiet: true });
    expect(own.version_drift).toEqual([]);
    expect(own.provenance!.other_generator).toBeUndefined();
  });

  it('flags a workflow made slower on purpose (test-only switch) even though results are identical', async () => {
    const report = await replay({ settings: currentSettings(), quiet: true, workerEnv: slowRecords(0.25) });
    expect(report.passed).toBe(16);
    expect(report.conditions[0]!.slowed).toBe(true);
    expect(report.median_timing_ratio!).toBeGreaterThan(5);
  });

  it('reports a declared equivalence that the replayed hashes contradict', async () => {
    const stored = readReferenceTable(tablePath('nile')).records.map(storedFromReference);
    // A false declaration: option A (the time-trend feature) has an effect whatever B is.
    const target = {
      condition: 'nile',
      family: 'forecasting' as const,
      input: { source: 'nile', files: readReferenceManifest()!.conditions.nile!.prepared_files },
      records: stored,
      equivalences: [{ option: 'A' as const, inactive_when: { B: 0 as const } }],
    };
    const report = await replayTargets([target], readReferenceManifest()!, { settings: currentSettings(), quiet: true });
    expect(report.passed).toBe(16);
    expect(report.all_passed).toBe(false);
    expect(report.equivalence_violations.join('\n')).toMatch(/option A inactive when B=0: 0000 vs 1000/);
  });
});

// The faster path (issue 43): every record of a condition is sent to its worker ahead of time (the
// local pool's pipelining) and the tables and inputs are checked while the workers start. Each fault
// below is still refused on it, by real workers on real files.
describe('replay on the faster path still refuses', () => {
  const failedChecks = (report: Awaited<ReturnType<typeof replay>>) =>
    report.records.filter((r) => !r.passed).map((r) => [r.mask, r.failures.map((f) => f.check)]);

  it('a changed stored metric (the table re-sealed): native value and independent metric named', async () => {
    const dir = tamperedCopy('changed-metric', (r) => {
      r.native_value = r.native_value! * (1 + 1e-6);
      r.independent_value = r.native_value;
    });
    const report = await replay({ settings: currentSettings(), referencesDir: dir, quiet: true });
    expect(report.passed).toBe(15);
    expect(failedChecks(report)).toEqual([['0101', ['independent_metric', 'native_value']]]);
  });

  it('a changed stored hash and utility in the same table, each named on its record', async () => {
    const dir = tamperedCopy('hash-and-utility', (r) => {
      r.utility = r.utility! + Number.EPSILON;
    });
    const { records, metadata } = readReferenceTable(join(dir, 'nile.arrow'));
    const h = records[11]!.prediction_sha256!;
    records[11]!.prediction_sha256 = h.at(-1) === '0' ? h.slice(0, -1) + '1' : h.slice(0, -1) + '0';
    const bytes = tableBytes(records, metadata);
    writeFileSync(join(dir, 'nile.arrow'), bytes);
    const manifest = readReferenceManifest(dir)!;
    manifest.conditions.nile!.table_sha256 = sha256Hex(bytes);
    writeReferenceManifest(manifest, dir);
    const report = await replay({ settings: currentSettings(), referencesDir: dir, quiet: true });
    expect(failedChecks(report)).toEqual([
      ['0101', ['utility']],
      ['1011', ['prediction_sha256']],
    ]);
  });

  it('a truncated table: its file cut short, or cut to 15 records and re-sealed; refused before any record, naming it', async () => {
    const cut = join(ws.root, 'truncated-file');
    cpSync(ws.references, cut, { recursive: true });
    const bytes = readFileSync(join(cut, 'nile.arrow'));
    writeFileSync(join(cut, 'nile.arrow'), bytes.subarray(0, bytes.length - 200));
    await expect(replay({ settings: currentSettings(), referencesDir: cut, quiet: true })).rejects.toThrow(
      /reference table changed: .*nile\.arrow/,
    );
    const short = join(ws.root, 'truncated-records');
    cpSync(ws.references, short, { recursive: true });
    const { records, metadata } = readReferenceTable(join(short, 'nile.arrow'));
    const resealed = tableBytes(records.slice(0, 15), metadata);
    writeFileSync(join(short, 'nile.arrow'), resealed);
    const manifest = readReferenceManifest(short)!;
    manifest.conditions.nile!.table_sha256 = sha256Hex(resealed);
    writeReferenceManifest(manifest, short);
    const error = await replay({ settings: currentSettings(), referencesDir: short, quiet: true }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserError);
    expect((error as Error).message).toMatch(/nile\.arrow has 15 rows, but the manifest records 16/);
  });

  it('a worker reporting a hash its prediction does not give, or a metric its prediction does not give: named by verification', async () => {
    const hash = await replay({ settings: currentSettings(), quiet: true, workerEnv: wrongHashOnMask('0110') });
    expect(failedChecks(hash)).toEqual([['0110', ['verification']]]);
    expect(hash.records.find((r) => r.mask === '0110')!.failures[0]!.actual).toMatch(/prediction hash: worker [0-9a-f]{64}, orchestrator/);
    const metric = await replay({ settings: currentSettings(), quiet: true, workerEnv: wrongMetricOnMask('0110') });
    expect(failedChecks(metric)).toEqual([['0110', ['verification', 'utility', 'native_value']]]);
    expect(metric.records.find((r) => r.mask === '0110')!.failures[0]!.actual).toMatch(/independent .*: native .*, independent /);
  });
});
