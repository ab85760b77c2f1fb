// Hardening of `wwref add-source` (pipelines/jobs/add-source.ts) and of the id rule (catalog/plan.ts):
// - one name rule for source and condition ids (lower-case letters, digits, _, starting with a letter,
//   at most 64 characters): a 300-character id is invalid already in the dry run;
// - namespaces: a source id of a worked example (sources/examples/) or of any known reference manifest
//   from another plan file is refused (dry run and real run, --force or not); the same plan file is
//   accepted again only with --force;
// - --force deletes only files inside the target folder: a manifest entry whose table is ../victim.txt,
//   absolute, or a link out of the folder is refused and nothing is deleted;
// - stale add-source staging folders of dead processes are removed without following links.
// Real workers for the runs; every file under a temporary root; the committed folders are checked unchanged.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { readReferenceManifest, writeReferenceManifest } from '../support/raw-references.ts';
import { execa } from 'execa';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addSource, checkAddSource } from '../../pipelines/jobs/add-source.ts';
import { loadPlanFile } from '../../pipelines/catalog/catalog.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { MANIFESTS_DIR, ROOT, SOURCES_DIR } from '../../pipelines/core/paths.ts';
import type { ConditionEntry } from '../../pipelines/references/manifest.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { tinyCameraPlan } from '../support/fixtures.ts';
import { deadPid, filesUnder, guardRepository, placeholderManifest, victim } from '../sources/hardening-support.ts';
import { currentSettings } from '../support/workspace.ts';

const EXAMPLES = join(SOURCES_DIR, 'examples');
const quiet = { workers: 2, quiet: true, log: () => {} };

let ws: Workspace;
let guard: ReturnType<typeof guardRepository>;
beforeAll(() => {
  guard = guardRepository();
  ws = useTempWorkspace();
  mkdirSync(join(ws.root, 'plans'), { recursive: true });
});
afterAll(() => {
  ws.dispose();
  guard.check();
});

function writePlan(plan: unknown, name: string): string {
  const file = join(ws.root, 'plans', `${name}.plan.json`);
  writeFileSync(file, `${JSON.stringify(plan, null, 2)}\n`);
  return file;
}

/** A reference manifest in `dir` holding the given entries (what earlier add-source runs would have left). */
function writeTarget(
  dir: string,
  entries: Record<string, { source: string; table: string; plan_file: string; plan_sha256?: string }>,
): void {
  const conditions: Record<string, ConditionEntry> = {};
  for (const [id, e] of Object.entries(entries)) {
    conditions[id] = {
      family: 'image_restoration',
      dimensions: 4,
      records: 16,
      failed: 0,
      table_sha256: sha256Hex(id),
      plan_sha256: e.plan_sha256 ?? sha256Hex('plan'),
      prepared_files: { 'arrays.npz': sha256Hex('arrays'), 'metadata.json.gz': sha256Hex('metadata') },
      published: { comparable: false, prepared_match: 'not_published' },
      equivalence_violations: [],
      native_seconds: 0,
      ...e,
    };
  }
  writeReferenceManifest(placeholderManifest(conditions), dir);
}

function refused(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  throw new Error('the dry run accepted the plan');
}

async function refusedRun(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, 'the run accepted the plan').toBeInstanceOf(UserError);
  return (error as Error).message;
}

describe('one name rule for source and condition ids', () => {
  it('every committed source and condition id follows it (double underscores included)', () => {
    const catalog = loadCatalog(currentSettings({ references: join(ROOT, 'outputs', 'examples') }));
    const ids = [...catalog.plans.keys(), ...catalog.conditions.keys()];
    expect(ids.length).toBeGreaterThan(70);
    for (const id of ids) expect(id, id).toMatch(/^[a-z][a-z0-9_]{0,63}$/);
    expect(ids).toContain('mitdb_100__d6');
  });

  it('a 300-character id is invalid in the dry run, in the real run, and on the command line (exit 2, one message, no stack)', async () => {
    const long = `a${'b'.repeat(299)}`;
    const file = writePlan(tinyCameraPlan(long), 'long_source');
    expect(refused(() => checkAddSource(file, { settings: currentSettings() }))).toMatch(
      /source: expected at most 64 characters \(lower-case letters, digits and _, starting with a letter/,
    );
    const condition = writePlan(
      tinyCameraPlan('tiny_ok', (p) => (p.conditions[0].id = p.conditions[1].paired_with = long)),
      'long_condition',
    );
    expect(refused(() => checkAddSource(condition, { settings: currentSettings() }))).toMatch(
      /conditions\.0\.id: expected at most 64 characters/,
    );
    expect(await refusedRun(addSource(file, { settings: currentSettings(), ...quiet }))).toMatch(/source: expected at most 64 characters/);
    expect(filesUnder(ws.cache)).toEqual([]); // refused before the plan was frozen or anything acquired

    const cli = await execa('node', [join(ROOT, 'bin', 'wwref.mjs'), 'add-source', file, '--dry-run'], { reject: false });
    expect(cli.exitCode).toBe(2);
    expect(cli.stderr).toMatch(/source: expected at most 64 characters/);
    expect(cli.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(cli.stdout).not.toMatch(/is valid/);

    // the limit itself is valid, and so is a double underscore
    const limit = `a${'b'.repeat(63)}`;
    const ok = writePlan(
      tinyCameraPlan(limit, (p) => (p.conditions = [{ ...p.conditions[0], id: 'tiny_limit__x4' }])),
      'limit',
    );
    expect(checkAddSource(ok, { settings: currentSettings() })[0]).toMatch(new RegExp(`is valid: source ${limit} `));
  });
});

describe('namespaces of add-source', () => {
  it("a plan named like a worked example ('diabetes') is refused by the dry run and the real run, --force or not", async () => {
    const committed = readFileSync(join(MANIFESTS_DIR, 'diabetes.json'));
    const file = writePlan(tinyCameraPlan('diabetes'), 'diabetes');
    const expected = /source 'diabetes' is already taken by the worked example sources\/examples\/diabetes\.plan\.json/;
    expect(refused(() => checkAddSource(file, { settings: currentSettings() }))).toMatch(expected);
    expect(refused(() => checkAddSource(file, { settings: currentSettings(), force: true }))).toMatch(expected);
    expect(await refusedRun(addSource(file, { settings: currentSettings(), ...quiet }))).toMatch(expected);
    expect(await refusedRun(addSource(file, { settings: currentSettings(), ...quiet, force: true }))).toMatch(expected);
    expect(existsSync(join(ws.manifests, 'diabetes.json'))).toBe(false);
    expect(existsSync(join(ws.prepared, 'diabetes'))).toBe(false);
    expect(readReferenceManifest()).toBeUndefined();
    expect(readFileSync(join(MANIFESTS_DIR, 'diabetes.json')).equals(committed)).toBe(true);
  });

  it('a source id held by another plan file in a known reference manifest (the target or the default folder) is refused, even with --force', () => {
    const original = writePlan(tinyCameraPlan('tiny_taken'), 'original');
    const impostor = writePlan(
      tinyCameraPlan('tiny_taken', (p) => (p.title = 'someone else')),
      'impostor',
    );
    const target = join(ws.root, 'target-taken');
    writeTarget(target, {
      tiny_taken: { source: 'tiny_taken', table: 'tiny_taken.arrow', plan_file: original, plan_sha256: loadPlanFile(original).sha256 },
    });
    const expected = new RegExp(
      `source 'tiny_taken' is already taken by the reference manifest .*target-taken/manifest\\.json \\(plan ${original}\\)`,
    );
    expect(refused(() => checkAddSource(impostor, { settings: currentSettings(), referencesDir: target }))).toMatch(expected);
    expect(refused(() => checkAddSource(impostor, { settings: currentSettings(), referencesDir: target, force: true }))).toMatch(expected);
    // the same plan file: refused without --force, accepted with it
    expect(refused(() => checkAddSource(original, { settings: currentSettings(), referencesDir: target }))).toMatch(
      /source 'tiny_taken' was already added/,
    );
    expect(checkAddSource(original, { settings: currentSettings(), referencesDir: target, force: true })[0]).toMatch(
      /is valid: source tiny_taken/,
    );

    // held in the default reference folder (WWREF_REFERENCES_DIR), adding to another target
    const other = writePlan(tinyCameraPlan('tiny_default'), 'other');
    writeTarget(ws.references, { tiny_default: { source: 'tiny_default', table: 'tiny_default.arrow', plan_file: other } });
    const second = writePlan(tinyCameraPlan('tiny_default'), 'second');
    expect(
      refused(() => checkAddSource(second, { settings: currentSettings(), referencesDir: join(ws.root, 'fresh'), force: true })),
    ).toMatch(/source 'tiny_default' is already taken by the reference manifest .*references\/manifest\.json/);
    // a condition id in use by another source there is refused too
    const clash = writePlan(
      tinyCameraPlan('tiny_clash', (p) => (p.conditions[0].id = p.conditions[1].paired_with = 'tiny_default')),
      'clash',
    );
    expect(refused(() => checkAddSource(clash, { settings: currentSettings(), referencesDir: join(ws.root, 'fresh') }))).toMatch(
      /condition 'tiny_default' is already used by source 'tiny_default' in the reference manifest/,
    );
    expect(existsSync(join(ws.root, 'fresh'))).toBe(false);
  });

  it('the committed worked example itself is added to another folder only with --force (it shares prepared input and source manifest)', () => {
    const plan = join(EXAMPLES, 'diabetes.plan.json');
    const elsewhere = join(ws.root, 'elsewhere');
    expect(refused(() => checkAddSource(plan, { settings: currentSettings(), referencesDir: elsewhere }))).toMatch(
      /source 'diabetes' was already added to .*outputs\/examples from this plan .*pass --force/,
    );
    expect(checkAddSource(plan, { settings: currentSettings(), referencesDir: elsewhere, force: true })[0]).toMatch(
      /plan sources\/examples\/diabetes\.plan\.json is valid/,
    );
  });
});

describe('--force deletes only inside the target folder', () => {
  it('an old entry whose table is ../victim.txt, absolute, or a link out of the folder is refused, and nothing is deleted', async () => {
    const file = writePlan(tinyCameraPlan('tiny_victim'), 'tiny_victim');
    const sha = loadPlanFile(file).sha256;
    const target = join(ws.root, 'target-victim');
    const climbing = victim(join(ws.root, 'victim.txt'));
    const absolute = victim(join(ws.root, 'abs', 'victim2.txt'));
    const linked = victim(join(ws.root, 'linked', 'victim3.txt'));
    mkdirSync(target, { recursive: true });
    symlinkSync(linked.path, join(target, 'tiny_victim_link.arrow'));
    // a manifest names each table after its condition, inside the folder: anything else is refused as it is read
    const cases: [string, string, RegExp][] = [
      ['../victim.txt', 'tiny_victim_gone', /condition 'tiny_victim_gone': table '\.\.\/victim\.txt' is not tiny_victim_gone\.arrow/],
      [absolute.path, 'tiny_victim_abs', /condition 'tiny_victim_abs': table '.*victim2\.txt' is not tiny_victim_abs\.arrow/],
      [
        'tiny_victim_link.arrow',
        'tiny_victim_link',
        /table of condition 'tiny_victim_link' 'tiny_victim_link\.arrow' resolves to .*linked\/victim3\.txt, outside .*target-victim; refused: add-source replaces or deletes only files inside .*target-victim/,
      ],
    ];
    for (const [table, id, expected] of cases) {
      writeTarget(target, { [id]: { source: 'tiny_victim', table, plan_file: file, plan_sha256: sha } });
      expect(refused(() => checkAddSource(file, { settings: currentSettings(), referencesDir: target, force: true }))).toMatch(expected);
      expect(await refusedRun(addSource(file, { settings: currentSettings(), ...quiet, referencesDir: target, force: true }))).toMatch(
        expected,
      );
    }
    climbing.intact();
    absolute.intact();
    linked.intact();
    expect(lstatSync(join(target, 'tiny_victim_link.arrow')).isSymbolicLink()).toBe(true);
    expect(existsSync(join(ws.prepared, 'tiny_victim'))).toBe(false); // refused before anything ran
  });

  it('a legitimate --force run deletes the stale table inside the target and the stale staging folders of dead runs, following no link', async () => {
    const file = writePlan(tinyCameraPlan('tiny_clean'), 'tiny_clean');
    const target = join(ws.root, 'target-clean');
    mkdirSync(target, { recursive: true });
    writeFileSync(join(target, 'tiny_clean_gone.arrow'), 'an old table');
    writeTarget(target, {
      tiny_clean_gone: { source: 'tiny_clean', table: 'tiny_clean_gone.arrow', plan_file: file, plan_sha256: loadPlanFile(file).sha256 },
    });
    // staging folders a killed add-source left, one holding a link out, one being a link
    const outside = victim(join(ws.root, 'outside-clean', 'keep.txt'));
    const stagingRoot = join(ws.cache, 'add-source');
    const [dead1, dead2] = [deadPid(), deadPid()];
    mkdirSync(join(stagingRoot, `tiny_clean.staging-${dead1}`), { recursive: true });
    symlinkSync(join(ws.root, 'outside-clean'), join(stagingRoot, `tiny_clean.staging-${dead1}`, 'out'));
    symlinkSync(join(ws.root, 'outside-clean'), join(stagingRoot, `tiny_clean.staging-${dead2}`));

    const result = await addSource(file, { settings: currentSettings(), ...quiet, referencesDir: target, force: true });
    expect(result.problems).toEqual([]);
    expect(result.written).toBe(true);
    expect(existsSync(join(target, 'tiny_clean_gone.arrow'))).toBe(false);
    expect(Object.keys(readReferenceManifest(target)!.conditions).sort()).toEqual(['tiny_clean', 'tiny_clean__d6']);
    expect(readdirSync(stagingRoot).filter((n) => n.includes('.staging-'))).toEqual([]);
    outside.intact();
  });
});
