// `wwref add-source`: plan validation, the frozen plan hash, the end-to-end run with real workers on a
// small image source shipped inside scikit-image, refusals (published source, re-adding, a changed
// plan), --force supersession, a false equivalence declaration, and the committed worked examples.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { readReferenceManifest, readReferenceTable } from '../support/raw-references.ts';
import { execa, execaSync } from 'execa';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireFile } from '../../pipelines/sources/acquire.ts';
import { addSource, ambiguousNumbers, checkAddSource, discoveredClasses } from '../../pipelines/jobs/add-source.ts';
import { auditCatalog, auditFailed } from '../../pipelines/jobs/audit.ts';
import { Catalog, loadPlanFile } from '../../pipelines/catalog/catalog.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { planJsonSchema } from '../../pipelines/catalog/plan.ts';
import { MANIFESTS_DIR, ROOT, SOURCES_DIR } from '../../pipelines/core/paths.ts';
import { manifestPath, prepareSources, readManifest } from '../../pipelines/sources/prepare.ts';

import { replay } from '../../pipelines/jobs/replay.ts';

import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { tinyCameraPlan } from '../support/fixtures.ts';
import { currentSettings } from '../support/workspace.ts';

const EXAMPLES = join(SOURCES_DIR, 'examples');

let ws: Workspace;
beforeAll(() => {
  ws = useTempWorkspace();
  mkdirSync(join(ws.root, 'plans'), { recursive: true });
});
afterAll(() => ws.dispose());

function writePlan(plan: unknown, name = (plan as { source: string }).source): string {
  const file = join(ws.root, 'plans', `${name}.plan.json`);
  writeFileSync(file, `${JSON.stringify(plan, null, 2)}\n`);
  return file;
}

/** The plan hash as Python computes it: sha256 of json.dumps(sort_keys, compact, ensure_ascii=False). */
function pythonPlanSha256(file: string): string {
  const script =
    'import hashlib, json, sys\n' +
    'v = json.load(open(sys.argv[1], encoding="utf-8"))\n' +
    'print(hashlib.sha256(json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest())';
  return execaSync(currentSettings().python.executable, ['-c', script, file]).stdout.trim();
}

async function refusal(plan: unknown, options = {}): Promise<string> {
  const error = await addSource(writePlan(plan, 'candidate'), { settings: currentSettings(), quiet: true, log: () => {}, ...options }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, 'the plan was accepted').toBeInstanceOf(UserError);
  return (error as Error).message;
}

const quiet = { workers: 2, quiet: true, log: () => {} };

describe('add-source: invalid plans are refused before anything runs, with the field and what was expected', () => {
  it('unknown family', async () => {
    const message = await refusal(tinyCameraPlan('bad', (p) => (p.family = 'astrology')));
    expect(message).toMatch(/invalid construction plan .*candidate\.plan\.json/);
    expect(message).toMatch(/family: Invalid option: expected one of "classification"/);
  });

  it('unknown option (in the option set and in a declared equivalence)', async () => {
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.conditions[0].options = ['A', 'B', 'C', 'G'])))).toMatch(
      /conditions\.0\.options\.3/,
    );
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.conditions[1].equivalences[0].option = 'Z')))).toMatch(
      /conditions\.1\.equivalences\.0\.option/,
    );
    expect(
      await refusal(tinyCameraPlan('bad', (p) => (p.conditions[0].equivalences = [{ option: 'E', inactive_when: { B: 0 } }]))),
    ).toMatch(/conditions\.0\.equivalences\.0: unknown option E: a 4-option condition has ABCD/);
  });

  it('wrong mask width or dimensions', async () => {
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.conditions[0].dimensions = 5)))).toMatch(/conditions\.0\.dimensions/);
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.conditions[0].options = ['A', 'B', 'C', 'D', 'E'])))).toMatch(
      /conditions\.0\.options: a 4-option image_restoration condition uses options A, B, C, D \(mask width 4\), not A, B, C, D, E/,
    );
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.family = 'graph_link_prediction')))).toMatch(
      /conditions\.0\.dimensions: family graph_link_prediction has 6 options, not 4/,
    );
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.conditions[1].paired_with = 'nowhere')))).toMatch(
      /conditions\.1\.paired_with: 'nowhere' is not a 4-option condition of this plan/,
    );
  });

  it('malformed sha256, missing licence or citation, a raw file the recipe does not have', async () => {
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.raw_files[0].sha256 = 'B0793D2A')))).toMatch(
      /raw_files\.0\.sha256: expected a lowercase hex sha256/,
    );
    expect(await refusal(tinyCameraPlan('bad', (p) => delete p.licence))).toMatch(/licence/);
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.licence = '')))).toMatch(/licence: a licence is required/);
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.citation = '')))).toMatch(/citation: a citation is required/);
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.preparation.params.file = 'cameraman.png')))).toMatch(
      /preparation\.params\.file: 'cameraman\.png' is not one of the plan's raw files \(camera\.png\)/,
    );
    expect(await refusal(tinyCameraPlan('bad', (p) => (p.preparation.params.seed = -1)))).toMatch(/preparation\.params\.seed/);
  });

  it('an integral number written as a float (its hash would differ between Python and TypeScript)', async () => {
    expect(ambiguousNumbers('{"a": 1.0, "b": 0.5, "c": "2.0", "d": 3e2, "e": 7}')).toEqual(['1.0', '3e2']);
    const file = writePlan(tinyCameraPlan('bad'), 'candidate');
    writeFileSync(file, readFileSync(file, 'utf8').replace('"timeout_seconds": 180', '"timeout_seconds": 180.0'));
    await expect(addSource(file, { settings: currentSettings(), ...quiet })).rejects.toThrow(
      /number\(s\) 180\.0 are integral but written as floats/,
    );
  });

  it('a source or condition of the published catalog', async () => {
    expect(await refusal(tinyCameraPlan('nile'))).toMatch(
      /source 'nile' is already in the published catalog \(sources\/nile\.plan\.json\)/,
    );
    expect(await refusal(tinyCameraPlan('fresh', (p) => (p.conditions[0].id = p.conditions[1].paired_with = 'co2')))).toMatch(
      /condition 'co2' is already declared by the published catalog/,
    );
    await expect(addSource(join(SOURCES_DIR, 'wine.plan.json'), { settings: currentSettings(), ...quiet })).rejects.toThrow(
      /source 'wine' is a plan of the published catalog/,
    );
  });

  it('a well-formed but wrong sha256 fails acquisition: nothing is written', async () => {
    const result = await addSource(writePlan(tinyCameraPlan('wrong_sha', (p) => (p.raw_files[0].sha256 = '0'.repeat(64)))), {
      settings: currentSettings(),
      ...quiet,
    });
    expect(result.written).toBe(false);
    expect(result.problems.join('\n')).toMatch(/sha256 mismatch for camera\.png from .*camera\.png: expected 0{64}, got b0793d2a/);
    expect(readReferenceManifest()?.conditions.wrong_sha).toBeUndefined();
  });
});

describe('add-source: a new source end to end (real workers)', () => {
  let file: string;
  let firstSha: string;

  it('freezes the plan hash (the sha256 of its canonical JSON, as Python computes it), runs every mask and appends the references', async () => {
    file = writePlan(tinyCameraPlan('tiny_camera'));
    const dry = checkAddSource(file, { settings: currentSettings() });
    const expected = pythonPlanSha256(file);
    expect(dry[0]).toContain(`plan sha256 ${expected}`);
    const lines: string[] = [];
    const result = await addSource(file, { settings: currentSettings(), ...quiet, log: (l) => lines.push(l) });
    expect(result.problems).toEqual([]);
    expect(result.written).toBe(true);
    expect(result.planSha256).toBe(expected);
    expect(lines[0]).toContain(`plan sha256 ${expected} (frozen)`); // logged before preparation and execution
    expect(lines.findIndex((l) => l.startsWith('preparing'))).toBeGreaterThan(0);
    expect(result.records).toBe(80);
    firstSha = expected;

    const manifest = readReferenceManifest()!;
    for (const [id, width] of [
      ['tiny_camera', 4],
      ['tiny_camera__d6', 6],
    ] as const) {
      const entry = manifest.conditions[id]!;
      expect(entry.source).toBe('tiny_camera');
      expect(entry.plan_sha256).toBe(expected);
      expect(entry.plan_file).toBe(file);
      expect(entry.records).toBe(2 ** width);
      expect(entry.failed).toBe(0);
      expect(entry.equivalence_violations).toEqual([]);
      expect(entry.supersedes_plan_sha256).toBeUndefined();
      const table = join(ws.references, entry.table);
      expect(sha256Hex(readFileSync(table))).toBe(entry.table_sha256);
      const { records } = readReferenceTable(table);
      expect(records.every((r) => r.status === 'ok' && r.plan_sha256 === expected)).toBe(true);
    }
    // the source manifest records the same frozen hash
    expect(readManifest(currentSettings().paths, 'tiny_camera').plan.sha256).toBe(expected);
    expect(existsSync(join(ws.cache, 'add-source', 'tiny_camera.frozen.json'))).toBe(true);
    // declared classes are observed (E inactive when B=0, F when A=0), none is undeclared here
    const d6 = result.conditions.find((c) => c.condition === 'tiny_camera__d6')!;
    expect(d6.classes.filter((c) => c.declared).length).toBeGreaterThan(0);
    expect(d6.classes.some((c) => c.masks.includes('000000') && c.masks.includes('000010'))).toBe(true);
  });

  it('the added source is part of the catalog: audit passes and the condition replays', async () => {
    expect(Catalog.loadPublished().plans.size).toBe(30);
    const catalog = loadCatalog(currentSettings());
    expect(catalog.plans.size).toBe(31);
    expect(catalog.condition('tiny_camera__d6').source).toBe('tiny_camera');
    const [audit] = auditCatalog(currentSettings(), catalog, ['tiny_camera']);
    expect(audit!.problems).toEqual([]);
    expect(auditFailed(audit!)).toBe(false);
    expect(audit!.checks).toMatchObject({ manifest: 'ok', plan: 'ok', raw: 'ok', prepared: 'ok' });
    const report = await replay({ settings: currentSettings(), conditions: ['tiny_camera'], referencesDir: ws.references, quiet: true });
    expect(report.all_passed).toBe(true);
    expect(report.total).toBe(16);
  });

  it('re-adding the same plan is refused', async () => {
    await expect(addSource(file, { settings: currentSettings(), ...quiet })).rejects.toThrow(
      /source 'tiny_camera' was already added: .*tiny_camera, tiny_camera__d6.*refusing to re-add it/,
    );
  });

  it('a changed plan is refused without --force, and recorded as superseded with --force', async () => {
    const before = readFileSync(join(ws.references, 'manifest.json'), 'utf8');
    writePlan(
      tinyCameraPlan('tiny_camera', (p) => {
        p.title = 'tiny camera, revised';
        p.conditions = [p.conditions[0]]; // the six-option condition is dropped
      }),
    );
    const changed = pythonPlanSha256(file);
    expect(changed).not.toBe(firstSha);
    await expect(addSource(file, { settings: currentSettings(), ...quiet })).rejects.toThrow(
      new RegExp(`plan of source 'tiny_camera' changed after its references were written: .*${firstSha}.*now ${changed}.*--force`),
    );
    expect(readFileSync(join(ws.references, 'manifest.json'), 'utf8')).toBe(before);

    const result = await addSource(file, { settings: currentSettings(), ...quiet, force: true });
    expect(result.written).toBe(true);
    expect(result.supersedes).toEqual([firstSha]);
    const manifest = readReferenceManifest()!;
    expect(manifest.conditions.tiny_camera!.plan_sha256).toBe(changed);
    expect(manifest.conditions.tiny_camera!.supersedes_plan_sha256).toEqual([firstSha]);
    expect(manifest.conditions.tiny_camera__d6).toBeUndefined(); // no longer declared: entry and table removed
    expect(existsSync(join(ws.references, 'tiny_camera__d6.arrow'))).toBe(false);
    expect(readManifest(currentSettings().paths, 'tiny_camera').plan.sha256).toBe(changed);
  });

  it('a false equivalence declaration fails the run (non-zero exit), names the masks and writes nothing', async () => {
    const plan = tinyCameraPlan('tiny_false', (p) => {
      p.conditions = [
        {
          id: 'tiny_false__d6',
          dimensions: 6,
          equivalences: [{ option: 'F', inactive_when: { B: 0 }, reason: 'false on purpose: F is the median window' }],
        },
      ];
    });
    const planFile = writePlan(plan);
    const child = await execa('node', [join(ROOT, 'bin', 'wwref.mjs'), 'add-source', planFile, '--workers', '2'], {
      reject: false,
      env: { WWREF_OFFLINE: '1' },
    });
    expect(child.exitCode).toBe(1);
    expect(child.stdout).toMatch(/declared equivalence violated: option F inactive when B=0: 100000 vs 100001/);
    expect(child.stdout).toMatch(/source tiny_false NOT added/);
    expect(readReferenceManifest()!.conditions.tiny_false__d6).toBeUndefined();
    expect(existsSync(join(ws.references, 'tiny_false__d6.arrow'))).toBe(false);
    // Nothing is left behind: no source manifest, no prepared input, no frozen plan.
    expect(existsSync(manifestPath(currentSettings().paths, 'tiny_false'))).toBe(false);
    expect(existsSync(join(ws.prepared, 'tiny_false'))).toBe(false);
    expect(existsSync(join(ws.cache, 'add-source', 'tiny_false.frozen.json'))).toBe(false);
  });

  it('undeclared identical hashes are reported as discovered classes', () => {
    const condition = { id: 'x', dimensions: 4 as const, equivalences: [{ option: 'D' as const, inactive_when: { C: 0 as const } }] };
    const record = (mask: string, sha: string) => ({ mask, prediction_sha256: sha }) as never;
    const classes = discoveredClasses(condition, [
      record('0000', 'a'),
      record('0001', 'a'),
      record('0010', 'b'),
      record('0011', 'c'),
      record('1000', 'c'),
    ]);
    expect(classes).toEqual([
      { masks: ['0000', '0001'], declared: true },
      { masks: ['0011', '1000'], declared: false },
    ]);
  });
});

describe('worked examples (sources/examples/)', () => {
  const files = readdirSync(EXAMPLES)
    .filter((f) => f.endsWith('.plan.json'))
    .sort();

  it('at least three valid plans, each with a 4-option condition, on files shipped inside the pinned packages', async () => {
    expect(files.length).toBeGreaterThanOrEqual(3);
    for (const f of files) {
      const { plan } = loadPlanFile(join(EXAMPLES, f));
      expect(
        plan.conditions.some((c) => c.dimensions === 4),
        f,
      ).toBe(true);
      expect(plan.licence.length, f).toBeGreaterThan(10);
      for (const raw of plan.raw_files) {
        expect(raw.package, `${f} ${raw.name}`).toBeDefined();
        const acquired = await acquireFile(raw, { settings: currentSettings(), mirrors: [], online: false });
        expect(acquired.origin === 'package' || acquired.origin === 'cache', `${f} ${raw.name}`).toBe(true);
      }
    }
  });

  it('their committed source manifests are current (deterministic preparation, including the gzip and append_files tabular options)', async () => {
    const plans = files.map((f) => loadPlanFile(join(EXAMPLES, f)));
    const outcomes = await prepareSources(plans, { settings: currentSettings(), workers: 2, online: false, mirrors: [] });
    for (const outcome of outcomes) {
      expect(outcome.ok, `${outcome.source}: ${outcome.error}`).toBe(true);
      expect(readFileSync(manifestPath(currentSettings().paths, outcome.source), 'utf8'), outcome.source).toBe(
        readFileSync(join(MANIFESTS_DIR, `${outcome.source}.json`), 'utf8'),
      );
    }
    const diabetes = readManifest(currentSettings().paths, 'diabetes');
    expect(diabetes.facts).toMatchObject({
      raw_rows: 442,
      features: ['age', 'sex', 'bmi', 'bp', 's1', 's2', 's3', 's4', 's5', 's6'],
      target: 'progression',
    });
    expect(readManifest(currentSettings().paths, 'digits').facts).toMatchObject({ raw_rows: 1797, n_clusters: 10 });
  });

  it('their committed references (outputs/examples) name these plans with their current hashes', () => {
    const manifest = readReferenceManifest(join(ROOT, 'outputs', 'examples'));
    expect(manifest).toBeDefined();
    for (const f of files) {
      const loaded = loadPlanFile(join(EXAMPLES, f));
      for (const c of loaded.plan.conditions) {
        const entry = manifest!.conditions[c.id]!;
        expect(entry, c.id).toBeDefined();
        expect(entry.plan_file).toBe(`sources/examples/${f}`);
        expect(entry.plan_sha256).toBe(loaded.sha256);
        expect(entry.failed).toBe(0);
        expect(sha256Hex(readFileSync(join(ROOT, 'outputs', 'examples', entry.table)))).toBe(entry.table_sha256);
      }
    }
    expect(loadCatalog(currentSettings({ references: join(ROOT, 'outputs', 'examples') })).plans.size).toBe(30 + files.length);
  });

  it('the committed JSON Schema (sources/plan.schema.json) is the one plan-schema writes', () => {
    expect(JSON.parse(readFileSync(join(SOURCES_DIR, 'plan.schema.json'), 'utf8'))).toEqual(planJsonSchema());
  });
});
