// Conformance of the prepared inputs: every source is prepared from the raw mirror into a temporary
// workspace; the result must equal the committed manifest byte for byte (deterministic preparation,
// manifests up to date), and every source whose plan claims byte identity must match the published
// prepared-file sha256 (read from ../shared/published at test time).
import { loadCatalog } from '../../pipelines/references/store.ts';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MANIFESTS_DIR } from '../../pipelines/core/paths.ts';
import { manifestPath, prepareSources, PREPARED_FILES, type PrepareOutcome } from '../../pipelines/sources/prepare.ts';
import { hasPublished, publishedPreparedSha256 } from '../../pipelines/catalog/published.ts';
import { currentSettings, useTempWorkspace, type Workspace } from '../support/workspace.ts';

const settings = currentSettings();
const catalog = loadCatalog(settings);
const haveRaw = settings.mirrors.some((d) => existsSync(join(d, 'wine', 'wine.data')));
const published = settings.paths.published;

/** The 21 sources whose recipe is confirmed: they must be byte-identical. */
const CONFIRMED = [
  'co2',
  'elnino',
  'nile',
  'sunspots',
  'astronaut',
  'coffee',
  'hubble_deep_field',
  'rocket',
  'mitdb_100',
  'mitdb_101',
  'mitdb_102',
  'mitdb_103',
  'wine',
  'seeds',
  'glass',
  'banknote',
  'spambase',
  'ionosphere',
  'breast_diagnostic',
  'airfoil',
  'yacht',
];

describe.skipIf(!haveRaw)('prepared inputs (needs the raw mirror ../shared/raw)', () => {
  let ws: Workspace;
  let outcomes: Map<string, PrepareOutcome>;

  beforeAll(async () => {
    ws = useTempWorkspace();
    const results = await prepareSources([...catalog.plans.values()], { settings: ws.settings, workers: 2, online: false });
    outcomes = new Map(results.map((o) => [o.source, o]));
  });
  afterAll(() => ws.dispose());

  it('every source prepares, except those whose plan declares it cannot be', () => {
    for (const [source, outcome] of outcomes) {
      const plan = catalog.source(source).plan;
      if (plan.published.prepared_match === 'not_published' && !plan.published.comparable && !outcome.ok) {
        expect(outcome.error, source).toMatch(/\S/);
        continue;
      }
      expect(outcome.ok, `${source}: ${outcome.error}`).toBe(true);
    }
  });

  it('preparation is deterministic and the committed manifests are current', () => {
    for (const [source, outcome] of outcomes) {
      if (!outcome.ok) continue;
      const committed = join(MANIFESTS_DIR, `${source}.json`);
      expect(existsSync(committed), `${committed} is committed`).toBe(true);
      expect(readFileSync(manifestPath(ws.settings.paths, source), 'utf8'), source).toBe(readFileSync(committed, 'utf8'));
    }
  });

  it.skipIf(!hasPublished(published))('the 21 confirmed sources are byte-identical to the published prepared files', () => {
    for (const source of CONFIRMED) {
      const outcome = outcomes.get(source)!;
      expect(outcome.ok, source).toBe(true);
      for (const file of PREPARED_FILES) {
        expect(outcome.manifest!.prepared_files[file], `${source}/${file}`).toBe(publishedPreparedSha256(published, source, file));
      }
    }
  });

  it.skipIf(!hasPublished(published))("every plan's prepared_match claim is what we measure against the published files", () => {
    for (const [source, outcome] of outcomes) {
      if (!outcome.ok) continue;
      const claim = catalog.source(source).plan.published.prepared_match;
      const identical = PREPARED_FILES.every((f) => outcome.manifest!.prepared_files[f] === publishedPreparedSha256(published, source, f));
      expect(claim, source).toBe(identical ? 'byte_identical' : 'not_identical');
    }
  });
});

if (!hasPublished(published)) console.warn('published catalog (../shared/published) absent: published-identity checks skipped');
