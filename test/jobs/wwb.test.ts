// Interoperability with the published pack layout: a pack made from ../shared/published/references
// (the published records, with our byte-identical prepared inputs, sealed by a manifest.json listing
// the sha256 of every file, as a pack must be) is replayed by wwref; and our own tables exported as a
// pack replay as well. The refusals of malformed or hostile packs are in hardening-pack.test.ts.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../pipelines/core/errors.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';

import { deviatingMasks } from '../../pipelines/catalog/plan.ts';
import { prepareSources, PREPARED_FILES } from '../../pipelines/sources/prepare.ts';

import { hasPublished, publishedConditions, publishedReplayVersions } from '../../pipelines/catalog/published.ts';
import { rebuild } from '../../pipelines/jobs/rebuild.ts';
import { replayTargets } from '../../pipelines/jobs/replay.ts';
import { exportPack, readPack } from '../../pipelines/jobs/wwb.ts';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings, preparedFolder } from '../support/workspace.ts';

const catalog = loadCatalog(currentSettings());
const haveRaw = currentSettings().mirrors.some((d) => existsSync(join(d, 'wine', 'wine.data')));

/** Published reference files whose source we prepare byte-identically. */
function publishedFixtures(): string[] {
  const dir = join(currentSettings().paths.published, 'references');
  return readdirSync(dir)
    .map((f) => f.replace(/\.csv$/, ''))
    .filter((id) => catalog.conditions.has(id) && catalog.condition(id).plan.plan.published.prepared_match === 'byte_identical')
    .sort();
}

function csvRows(path: string): Record<string, string>[] {
  const [header, ...lines] = readFileSync(path, 'utf8').trim().split('\n');
  const columns = header!.split(',');
  return lines.map((line) => {
    // warnings_json is the last column and may hold commas.
    const cells = line.split(',');
    const head = cells.slice(0, columns.length - 1);
    return Object.fromEntries([
      ...columns.slice(0, -1).map((c, i) => [c, head[i]!]),
      [columns.at(-1)!, cells.slice(columns.length - 1).join(',')],
    ]);
  });
}

describe.skipIf(!hasPublished(currentSettings().paths.published) || !haveRaw)(
  'published pack layout (needs ../shared/published and ../shared/raw)',
  () => {
    let ws: Workspace;
    let pack: string;
    let fixtures: string[];

    beforeAll(async () => {
      ws = useTempWorkspace();
      fixtures = publishedFixtures();
      const sources = [...new Set(fixtures.map((id) => catalog.condition(id).source))];
      await prepareSources(
        sources.map((s) => catalog.source(s)),
        { settings: currentSettings(), workers: 2, online: false },
      );
      pack = join(ws.root, 'pack');
      const files: Record<string, string> = {};
      const conditions = publishedConditions(currentSettings().paths.published);
      for (const id of fixtures) {
        const source = catalog.condition(id).source;
        const outcomes = Object.fromEntries(
          csvRows(join(currentSettings().paths.published, 'references', `${id}.csv`)).map((row) => [
            row.mask,
            {
              utility: Number(row.utility),
              native_metric: row.native_metric,
              native_value: Number(row.native_value),
              prediction_sha256: row.prediction_sha256,
              warnings: row.warnings_json ? JSON.parse(row.warnings_json) : [],
            },
          ]),
        );
        const tableFile = join(pack, 'references', `${id}.json`);
        mkdirSync(join(pack, 'references'), { recursive: true });
        writeFileSync(tableFile, JSON.stringify({ instance: source, family: conditions[id]!.family, outcomes }, null, 2));
        files[`references/${id}.json`] = sha256Hex(readFileSync(tableFile));
        mkdirSync(join(pack, 'inputs', source), { recursive: true });
        for (const name of PREPARED_FILES) {
          copyFileSync(join(preparedFolder(source), name), join(pack, 'inputs', source, name));
          files[`inputs/${source}/${name}`] = sha256Hex(readFileSync(join(pack, 'inputs', source, name)));
        }
      }
      writeFileSync(
        join(pack, 'manifest.json'),
        JSON.stringify({ files_sha256: files, replay_versions: publishedReplayVersions(currentSettings().paths.published) }),
      );
    });
    afterAll(() => ws.dispose());

    it('replays every published record of the comparable conditions: same hashes, same utilities', async () => {
      expect(fixtures.length).toBeGreaterThanOrEqual(5);
      const { targets, expected } = readPack(pack);
      const report = await replayTargets(targets, expected, { settings: currentSettings(), quiet: true });
      // A declared platform deviation may differ in prediction bytes only (spec: exact utility always).
      const declared = (r: { condition: string; mask: string; failures: { check: string }[] }) =>
        deviatingMasks(catalog.condition(r.condition).plan.plan, r.condition).has(r.mask) &&
        r.failures.every((f) => f.check === 'prediction_sha256');
      const failed = report.records
        .filter((r) => !r.passed && !declared(r))
        .map((r) => `${r.condition} ${r.mask}: ${r.failures.map((f) => f.check).join(',')}`);
      expect(failed).toEqual([]);
      expect(report.total).toBe(targets.reduce((n, t) => n + t.records.length, 0));
    });

    it('refuses a pack whose file changed', () => {
      const file = join(pack, 'references', `${fixtures[0]}.json`);
      const original = readFileSync(file);
      writeFileSync(file, Buffer.concat([original, Buffer.from(' ')]));
      try {
        expect(() => readPack(pack)).toThrow(UserError);
        expect(() => readPack(pack)).toThrow(/pack file changed: .*references/);
      } finally {
        writeFileSync(file, original);
      }
    });

    it('exports our own tables as a pack that replays', async () => {
      await rebuild(catalog, { settings: currentSettings(), conditions: ['nile'], workers: 2, quiet: true, log: () => {} });
      const out = join(ws.root, 'ours');
      expect(exportPack(currentSettings(), out, ['nile'])).toBe(16);
      // the manifest lists every file of the pack, so that a reader can refuse any other
      const listed = Object.keys(JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')).files_sha256).sort();
      const onDisk = (readdirSync(out, { recursive: true }) as string[])
        .filter((f) => statSync(join(out, f)).isFile() && f !== 'manifest.json')
        .sort();
      expect(listed).toEqual(onDisk);
      expect(listed).toEqual(['inputs/nile/arrays.npz', 'inputs/nile/metadata.json.gz', 'references/nile.json']);
      const { targets, expected } = readPack(out);
      const report = await replayTargets(targets, expected, { settings: currentSettings(), quiet: true });
      expect(report.passed).toBe(16);
      // exporting again into the same folder reseals it; a table the new pack would not list is refused
      expect(exportPack(currentSettings(), out, ['nile'])).toBe(16);
      writeFileSync(join(out, 'references', 'stray.json'), '{}');
      expect(() => exportPack(currentSettings(), out, ['nile'])).toThrow(
        /already holds references\/stray\.json, which this export does not write/,
      );
      expect(() => readPack(out)).toThrow(/pack table references\/stray\.json is not listed in .*files_sha256/);
    });
  },
);
