// The execute stage on a real, small condition (nile: 16 forecasting records) with real workers.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { readReferenceManifest, readReferenceTable, tablePath } from '../support/raw-references.ts';
import { execa } from 'execa';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { UserError } from '../../pipelines/core/errors.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { rebuild } from '../../pipelines/jobs/rebuild.ts';

import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings } from '../support/workspace.ts';
import { slowRecords } from '../support/doubles.ts';

const catalog = loadCatalog(currentSettings());
let ws: Workspace;

beforeAll(() => {
  ws = useTempWorkspace();
});
afterAll(() => ws.dispose());

describe('rebuild', () => {
  it('prepares the missing input, executes all 16 masks and writes a verified table and manifest', async () => {
    const summary = await rebuild(catalog, { settings: currentSettings(), conditions: ['nile'], workers: 2, quiet: true, log: () => {} });
    expect(summary.records).toBe(16);
    expect(summary.failed).toBe(0);
    const { records } = readReferenceTable(tablePath('nile'));
    expect(records.map((r) => r.mask)).toEqual([...Array(16).keys()].map((i) => i.toString(2).padStart(4, '0')));
    for (const r of records) {
      expect(r.status).toBe('ok');
      expect(r.prediction_sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(r.utility).toBeGreaterThan(0);
      expect(Math.abs(r.independent_value! - r.native_value!)).toBeLessThan(1e-10);
      expect(r.normalization_scale).toBeGreaterThan(0);
    }
    const manifest = readReferenceManifest()!;
    expect(manifest.conditions.nile!.table_sha256).toBe(sha256Hex(readFileSync(tablePath('nile'))));
    expect(manifest.versions['scikit-learn']).toBe('1.6.1');
  });

  it('an interrupted rebuild (SIGINT) resumes from its journal without recomputing finished records', async () => {
    const before = readReferenceTable(tablePath('nile')).records;
    rmSync(tablePath('nile'));
    // A slowed-down worker (test-only switch) so the run can be interrupted half-way.
    const child = execa('node', [join(ROOT, 'bin', 'wwref.mjs'), 'rebuild', '--condition', 'nile', '--workers', '1'], {
      env: slowRecords(0.4),
      reject: false,
    });
    const journal = join(ws.cache, 'journal', 'nile.jsonl');
    const lines = () => (existsSync(journal) ? readFileSync(journal, 'utf8').trim().split('\n').filter(Boolean).length : 0);
    const deadline = Date.now() + 60_000;
    while (lines() < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    child.kill('SIGINT');
    const result = await child;
    expect(result.exitCode).toBe(130);
    expect(existsSync(tablePath('nile'))).toBe(false); // nothing half-written
    const finished = lines();
    expect(finished).toBeGreaterThanOrEqual(4);
    expect(finished).toBeLessThan(16);

    const resumed = await rebuild(catalog, { settings: currentSettings(), conditions: ['nile'], workers: 1, quiet: true, log: () => {} });
    expect(resumed.resumed).toBe(finished);
    const after = readReferenceTable(tablePath('nile')).records;
    expect(after.map((r) => [r.mask, r.prediction_sha256, r.utility])).toEqual(before.map((r) => [r.mask, r.prediction_sha256, r.utility]));
    expect(existsSync(journal)).toBe(false); // the journal is dropped once the table is written
  });

  it('rejects an unknown condition with a message', async () => {
    await expect(rebuild(catalog, { settings: currentSettings(), conditions: ['no_such_condition'], quiet: true })).rejects.toThrow(
      UserError,
    );
    await expect(rebuild(catalog, { settings: currentSettings(), conditions: ['no_such_condition'], quiet: true })).rejects.toThrow(
      /unknown condition 'no_such_condition'/,
    );
  });
});
