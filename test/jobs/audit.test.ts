// The audit detects every kind of change along raw file -> prepared input -> manifest -> plan.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { rawCachePath } from '../../pipelines/sources/acquire.ts';
import { auditSource } from '../../pipelines/jobs/audit.ts';
import { manifestPath, prepareSources } from '../../pipelines/sources/prepare.ts';

import { writeSurfaceCatalog } from '../support/fixtures.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings, preparedFolder } from '../support/workspace.ts';

const catalog = loadCatalog(currentSettings());
const nile = catalog.source('nile');
let ws: Workspace;
let snapshot: Map<string, Buffer>;

beforeAll(async () => {
  ws = useTempWorkspace();
  const [outcome] = await prepareSources([nile], { settings: currentSettings(), workers: 1 });
  expect(outcome!.ok).toBe(true);
  const files = [
    join(preparedFolder('nile'), 'arrays.npz'),
    join(preparedFolder('nile'), 'metadata.json.gz'),
    manifestPath(currentSettings().paths, 'nile'),
    rawCachePath(currentSettings(), nile.plan.raw_files[0]!.sha256),
  ];
  snapshot = new Map(files.map((f) => [f, readFileSync(f)]));
});
afterAll(() => ws.dispose());
beforeEach(() => {
  for (const [file, bytes] of snapshot) writeFileSync(file, bytes);
});

function flipByte(file: string, at = 40): void {
  const bytes = readFileSync(file);
  bytes[at] = bytes[at]! ^ 1;
  writeFileSync(file, bytes);
}

describe('audit', () => {
  it('passes on a freshly prepared source, including the published identity', () => {
    const audit = auditSource(currentSettings(), nile);
    expect(audit.problems).toEqual([]);
    expect(audit.checks).toMatchObject({ manifest: 'ok', plan: 'ok', raw: 'ok', prepared: 'ok' });
  });

  it('detects a changed prepared byte and names the file', () => {
    flipByte(join(preparedFolder('nile'), 'arrays.npz'));
    const audit = auditSource(currentSettings(), nile);
    expect(audit.checks.prepared).toBe('FAIL');
    expect(audit.problems.join('\n')).toMatch(/prepared file .*nile\/arrays\.npz changed/);
  });

  it('detects a changed raw byte in the cache', () => {
    flipByte(rawCachePath(currentSettings(), nile.plan.raw_files[0]!.sha256));
    const audit = auditSource(currentSettings(), nile);
    expect(audit.checks.raw).toBe('FAIL');
    expect(audit.problems.join('\n')).toMatch(/raw cache file .* changed/);
  });

  it('detects a manifest edited by hand', () => {
    const path = manifestPath(currentSettings().paths, 'nile');
    const manifest = JSON.parse(readFileSync(path, 'utf8'));
    manifest.facts.series_length = 101;
    writeFileSync(path, JSON.stringify(manifest, null, 2));
    const audit = auditSource(currentSettings(), nile);
    expect(audit.checks.manifest).toBe('FAIL');
    expect(audit.problems.join('\n')).toMatch(/nile\.json was edited after it was written/);
  });

  it('detects a plan changed after its manifest was written', () => {
    const changed = { ...nile, sha256: '0'.repeat(64) };
    const audit = auditSource(currentSettings(), changed);
    expect(audit.checks.plan).toBe('FAIL');
    expect(audit.problems.join('\n')).toMatch(/sources\/nile\.plan\.json changed after/);
  });

  it("checks the declared equivalences on the source's reference table", () => {
    // nile's table with a distinct prediction hash per mask (a fixture), audited against a plan that
    // declares option A inactive when B = 0: the audit must name the violated masks.
    writeSurfaceCatalog(ws.references, [{ condition: 'nile', dimensions: 4, family: 'forecasting', utility: (z) => 0.5 + 0.1 * z[0]! }]);
    expect(auditSource(currentSettings(), nile).checks.equivalences).toBe('ok');
    const declaring = structuredClone(nile);
    declaring.plan.conditions[0]!.equivalences = [{ option: 'A', inactive_when: { B: 0 } }];
    const audit = auditSource(currentSettings(), declaring);
    expect(audit.checks.equivalences).toBe('FAIL');
    expect(audit.problems.join('\n')).toMatch(/nile\.arrow: option A inactive when B=0 violated by masks 0000 and 1000/);
  });

  it('re-running prepare on unchanged inputs changes no byte', async () => {
    await prepareSources([nile], { settings: currentSettings(), workers: 1 });
    for (const [file, bytes] of snapshot) expect(readFileSync(file).equals(bytes), file).toBe(true);
  });
});
