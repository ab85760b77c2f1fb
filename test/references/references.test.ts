// Conformance of the committed reference tables (outputs/references): complete, self-consistent,
// current with the plans and manifests, every declared equivalence holding, and — read from
// ../shared/published at test time — equal to the published anchors and records wherever our
// prepared input is byte-identical to the published one.
import { loadCatalog, ReferenceStore } from '../../pipelines/references/store.ts';
import { codeDrift } from '../../pipelines/jobs/replay.ts';
import { readReferenceManifest, readReferenceTable } from '../support/raw-references.ts';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { currentSettings } from '../support/workspace.ts';

import { checkDeclared, checkPaired } from '../../pipelines/references/equivalences.ts';
import { allMasks } from '../../pipelines/catalog/masks.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { metricsAgree } from '../../pipelines/execution/verification/metrics.ts';
import { profileProblems } from '../../pipelines/execution/numerics.ts';
import { DEFAULT_PROFILE, profileByName } from '../../pipelines/core/profiles.ts';
import { MANIFESTS_DIR, ROOT } from '../../pipelines/core/paths.ts';
import { hasPublished, publishedConditions, publishedRecords } from '../../pipelines/catalog/published.ts';
import { deviatingMasks } from '../../pipelines/catalog/plan.ts';
import type { ReferenceRecord } from '../../pipelines/execution/records.ts';

const dir = join(ROOT, 'outputs', 'references');
const manifest = readReferenceManifest(dir);
const settings = currentSettings();
const PUBLISHED = settings.paths.published;
const catalog = loadCatalog(settings);
const tables = new Map<string, ReferenceRecord[]>(
  Object.entries(manifest?.conditions ?? {}).map(([id, entry]) => [id, readReferenceTable(join(dir, entry.table)).records]),
);

/** Conditions whose prepared input is byte-identical to the published one: bit-for-bit comparable. */
const comparable = [...catalog.conditions.values()].filter(
  (c) => c.plan.plan.published.comparable && c.plan.plan.published.prepared_match === 'byte_identical',
);

describe('committed reference tables', () => {
  it("every committed folder passes the store and was built by this checkout's workflow code (rebuild them after changing workflows/)", () => {
    for (const folder of ['references', 'examples', 'current']) {
      const store = new ReferenceStore(join(ROOT, 'outputs', folder), settings.paths);
      const committed = store.requireManifest();
      expect(store.records().length, folder).toBeGreaterThan(0);
      expect(codeDrift(committed), `outputs/${folder}`).toEqual([]);
    }
  });

  it('cover the whole catalog: 36 tables, 1,248 records, all verified', () => {
    expect(manifest, 'outputs/references/manifest.json').toBeDefined();
    expect(Object.keys(manifest!.conditions).sort()).toEqual([...catalog.conditions.keys()].sort());
    let records = 0;
    for (const [id, entry] of Object.entries(manifest!.conditions)) {
      expect(sha256Hex(readFileSync(join(dir, entry.table))), id).toBe(entry.table_sha256);
      const rows = tables.get(id)!;
      expect(
        rows.map((r) => r.mask),
        id,
      ).toEqual(allMasks(entry.dimensions));
      for (const r of rows) {
        expect(r.status, `${id} ${r.mask}: ${r.error}`).toBe('ok');
        expect(metricsAgree(r.independent_value!, r.native_value!), `${id} ${r.mask}`).toBe(true);
      }
      records += rows.length;
    }
    expect(records).toBe(1248);
  });

  it('are current: built from the committed plans and prepared inputs', () => {
    for (const [id, entry] of Object.entries(manifest!.conditions)) {
      const condition = catalog.condition(id);
      expect(entry.plan_sha256, `${id}: plan changed since the table was built`).toBe(condition.plan.sha256);
      const source = JSON.parse(readFileSync(join(MANIFESTS_DIR, `${condition.source}.json`), 'utf8'));
      expect(entry.prepared_files, id).toEqual(source.prepared_files);
    }
  });

  it('record the numerical profile they were built under: the portable default, verified by the building worker', () => {
    const numerics = manifest!.numerics!;
    expect(numerics.profile).toBe(DEFAULT_PROFILE);
    expect(numerics.environment).toEqual(profileByName(DEFAULT_PROFILE).environment);
    expect(profileProblems(profileByName(DEFAULT_PROFILE), numerics.effective)).toEqual([]);
  });

  it('hold every declared equivalence and repeat the four-option records in each E=F=0 subcube', () => {
    let subcube = 0;
    for (const condition of catalog.conditions.values()) {
      const rows = tables.get(condition.id)!;
      expect(checkDeclared(condition.id, condition.condition.equivalences, rows), condition.id).toEqual([]);
      if (condition.condition.paired_with) {
        expect(
          checkPaired(condition.id, condition.condition.paired_with, rows, tables.get(condition.condition.paired_with)!),
          condition.id,
        ).toEqual([]);
        subcube += 16;
      }
    }
    expect(subcube).toBe(96);
  });
});

describe.skipIf(!hasPublished(PUBLISHED))('conformance with the published catalog (../shared/published)', () => {
  it('the free anchor observations (all-off and all-on) are equal, bit for bit', () => {
    const published = publishedConditions(PUBLISHED);
    expect(comparable.length).toBeGreaterThanOrEqual(21);
    for (const condition of comparable) {
      const rows = new Map(tables.get(condition.id)!.map((r) => [r.mask, r]));
      for (const anchor of published[condition.id]!.free_observations) {
        expect(rows.get(anchor.mask)!.utility, `${condition.id} ${anchor.mask}`).toBe(anchor.utility);
      }
    }
  });

  it('every published record of a comparable condition has our exact utility and prediction hash', () => {
    let checked = 0;
    for (const condition of comparable) {
      const published = publishedRecords(PUBLISHED, condition.id);
      if (!published) continue;
      const rows = new Map(tables.get(condition.id)!.map((r) => [r.mask, r]));
      const deviating = deviatingMasks(condition.plan.plan, condition.id);
      for (const p of published) {
        const ours = rows.get(p.mask)!;
        // A declared platform deviation may differ in prediction bytes, never in the utility.
        if (!deviating.has(p.mask)) expect(ours.prediction_sha256, `${condition.id} ${p.mask} hash`).toBe(p.prediction_sha256);
        else if (ours.prediction_sha256 === p.prediction_sha256)
          console.info(`${condition.id} ${p.mask}: declared deviation reproduced exactly on this platform`);
        expect(ours.utility, `${condition.id} ${p.mask} utility`).toBe(p.utility);
        expect(ours.native_metric, `${condition.id} ${p.mask}`).toBe(p.native_metric);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(0);
  });
});

if (!existsSync(join(dir, 'manifest.json'))) console.warn('outputs/references/manifest.json is absent: run `npx wwref rebuild`');
