// `wwref new-source` and the static dry run (`add-source --dry-run`), on real files shipped inside the
// pinned packages, through the real command line and the real Python inspector:
// - skeletons for a scikit-learn CSV (clustering), a scikit-image PNG (image restoration) and a
//   statsmodels CSV (forecasting) are accepted by the dry run once licence and citation are filled, and
//   refused before that for exactly those two fields; raw identities are the package files' own;
// - the inactive rules new-source pre-fills are the equivalences the committed plans declare;
// - the dry run reports a wrong sha256, a wrong byte count, an unknown column and a label missing from
//   the data, each once with its field path and a fix, and the header hint for a header row read as data;
// - the recipe itself (a real prepare) names file, row and column and suggests `header: true`, and a
//   failed add-source prints its acquisition error once.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addSource, addSourceLines } from '../../pipelines/jobs/add-source.ts';
import { loadPlanFile } from '../../pipelines/catalog/catalog.ts';
import type { FamilyName } from '../../pipelines/catalog/families.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { ROOT, SOURCES_DIR } from '../../pipelines/core/paths.ts';
import { sitePackages } from '../../pipelines/sources/acquire.ts';
import { INACTIVE_RULES } from '../../pipelines/sources/scaffold.ts';
import { prepareSources } from '../../pipelines/sources/prepare.ts';
import { cliInProcess } from '../support/cli.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';

let ws: Workspace;
let purelib: string;
beforeAll(() => {
  ws = useTempWorkspace();
  purelib = sitePackages(ws.settings)!;
  expect(purelib).toMatch(/site-packages$/);
});
afterAll(() => ws.dispose());

const cases: { family: FamilyName; pkg: string; source: string; recipe: string }[] = [
  { family: 'clustering', pkg: 'scikit-learn:sklearn/datasets/data/iris.csv', source: 'ns_iris', recipe: 'tabular' },
  { family: 'image_restoration', pkg: 'scikit-image:skimage/data/moon.png', source: 'ns_moon', recipe: 'skimage_image' },
  { family: 'forecasting', pkg: 'statsmodels:statsmodels/datasets/nile/nile.csv', source: 'ns_nile', recipe: 'statsmodels_series' },
];

async function newSource(family: string, pkg: string, source: string): Promise<string> {
  const file = join(ws.root, `${source}.plan.json`);
  const made = await cliInProcess(['new-source', '--family', family, '--package', pkg, '--source', source, '--out', file], ws.root);
  expect(made.code, made.stderr).toBe(0);
  expect(made.stdout).toContain(`plan skeleton written to ${file}`);
  return file;
}

function edit(file: string, change: (plan: any) => void, to = file): string {
  const plan = JSON.parse(readFileSync(file, 'utf8'));
  change(plan);
  writeFileSync(to, `${JSON.stringify(plan, null, 2)}\n`);
  return to;
}

const fill = (plan: any) => {
  plan.licence = 'as documented by the package (test)';
  plan.citation = 'the package data set (test)';
};

/** Problem lines of a refused dry run: "  - field.path: message (fix: …)". */
function problems(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l.startsWith('  - '));
}

describe('new-source writes a plan that the dry run accepts after filling only licence and citation', () => {
  for (const c of cases) {
    it(`${c.family} from ${c.pkg}`, async () => {
      const file = await newSource(c.family, c.pkg, c.source);
      const plan = JSON.parse(readFileSync(file, 'utf8'));
      const [distribution, path] = c.pkg.split(':') as [string, string];
      const bytes = readFileSync(join(purelib, path));
      expect(plan.raw_files).toEqual([
        { name: path.split('/').pop(), sha256: sha256Hex(bytes), bytes: bytes.length, mirror_path: expect.stringMatching(/^packages\//), package: { distribution, version: expect.any(String), path } },
      ]);
      expect(plan.preparation.recipe).toBe(c.recipe);
      expect(plan.$comment.join('\n')).toMatch(/A = .*; B = .*; F = /); // the family's options and their meaning
      expect(plan.conditions.map((k: any) => k.id)).toEqual([c.source, `${c.source}__d6`]);
      expect(plan.conditions[1].paired_with).toBe(c.source);
      expect(plan.conditions[1].equivalences.map((e: any) => e.option)).toEqual(INACTIVE_RULES[c.family].map((r) => r.option));

      const unfilled = await cliInProcess(['add-source', file, '--dry-run'], ws.root);
      expect(unfilled.code).toBe(2);
      expect(problems(unfilled.stderr).map((l) => l.split(':')[0])).toEqual(['  - licence', '  - citation']);

      edit(file, fill);
      const dry = await cliInProcess(['add-source', file, '--dry-run'], ws.root);
      expect(dry.stderr).toBe('');
      expect(dry.code).toBe(0);
      expect(dry.stdout).toContain(`is valid: source ${c.source} (${c.family})`);
      expect(dry.stdout).toMatch(/bytes, sha256 [0-9a-f]{12}… as declared \(package /);
    });
  }

  it('tables: header row and label values are detected (iris: numeric header names replaced, labels 0, 1, 2)', () => {
    const plan = JSON.parse(readFileSync(join(ws.root, 'ns_iris.plan.json'), 'utf8'));
    expect(plan.preparation.params).toMatchObject({
      task: 'clustering',
      format: 'csv',
      header: true,
      columns: ['column_1', 'column_2', 'column_3', 'column_4', 'column_5'],
      features: ['column_1', 'column_2', 'column_3', 'column_4'],
      target: 'column_5',
      labels: ['0', '1', '2'],
    });
    const nile = JSON.parse(readFileSync(join(ws.root, 'ns_nile.plan.json'), 'utf8'));
    expect(nile.preparation.params).toEqual({ file: 'nile.csv', columns: ['volume'], fill: 'none', cut_fraction: 0.75 });
  });

  it('refuses a package file that does not exist, naming the distribution (exit 2, one line)', async () => {
    const outcome = await cliInProcess(['new-source', '--family', 'clustering', '--package', 'scikit-learn:sklearn/datasets/data/irises.csv', '--out', join(ws.root, 'x.plan.json')], ws.root);
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toMatch(/^wwref: --package 'scikit-learn:sklearn\/datasets\/data\/irises\.csv': scikit-learn [\d.]+ ships no file sklearn\/datasets\/data\/irises\.csv\n$/);
  });
});

describe('the inactive rules new-source pre-fills', () => {
  it('are the equivalences every committed six-option plan of the family declares', () => {
    const files = [SOURCES_DIR, join(SOURCES_DIR, 'examples')].flatMap((dir) => readdirSync(dir).filter((f) => f.endsWith('.plan.json')).map((f) => join(dir, f)));
    let compared = 0;
    for (const file of files) {
      const { plan } = loadPlanFile(file);
      for (const condition of plan.conditions.filter((k) => k.dimensions === 6 && k.equivalences.length)) {
        const declared = condition.equivalences.map((e) => ({ option: e.option, inactive_when: e.inactive_when }));
        const rules = INACTIVE_RULES[plan.family].map((r) => ({ option: r.option, inactive_when: r.inactive_when }));
        expect(declared, `${file} ${condition.id}`).toEqual(expect.arrayContaining(rules));
        expect(rules, `${file} ${condition.id}`).toEqual(expect.arrayContaining(declared));
        compared++;
      }
    }
    expect(compared).toBeGreaterThanOrEqual(8);
  });
});

describe('the dry run checks everything static, each problem once with its field and a fix', () => {
  it('a wrong sha256, a wrong byte count, an unknown column and a label missing from the data', async () => {
    const base = join(ws.root, 'ns_iris.plan.json');
    const bad = edit(base, (p) => {
      p.source = p.conditions[0].id = p.conditions[1].paired_with = 'ns_bad';
      p.conditions[1].id = 'ns_bad__d6';
      p.raw_files[0].sha256 = 'a'.repeat(64);
      p.raw_files[0].bytes += 1;
      p.preparation.params.features[1] = 'petal_width';
      p.preparation.params.labels = ['0', '1', '2', '3'];
    }, join(ws.root, 'bad.plan.json'));
    const outcome = await cliInProcess(['add-source', bad, '--dry-run'], ws.root);
    expect(outcome.code).toBe(2);
    expect(outcome.stdout).toBe('');
    expect(outcome.stderr).not.toMatch(/\n\s+at /);
    const lines = problems(outcome.stderr);
    const fields = lines.map((l) => l.slice(4, l.indexOf(': ')));
    expect(fields).toEqual(['raw_files.0.sha256', 'raw_files.0.bytes', 'preparation.params.features.1', 'preparation.params.labels.3']);
    const [sha, bytes, column, label] = lines as [string, string, string, string];
    expect(sha).toMatch(/iris\.csv from package scikit-learn .* has sha256 f13ffa8f[0-9a-f]{56}, the plan declares a{64} \(fix: if this is the file you mean, set sha256 to "f13ffa8f/);
    expect(bytes).toMatch(/has 2734 bytes, the plan declares 2735 \(fix: .*set bytes to 2734\)/);
    expect(column).toMatch(/'petal_width' is not a column of iris\.csv \(the columns of iris\.csv are 'column_1', .*\(fix: /);
    expect(label).toMatch(/label '3' does not occur in column 'column_5' of iris\.csv \(values: '0', '1', '2'\) \(fix: remove it from labels/);
    expect(outcome.stderr.match(/sha256 f13ffa8f/g)).toHaveLength(1);
  });

  it('a header row read as data: the header hint, naming the file and row 1', async () => {
    const file = edit(join(ws.root, 'ns_iris.plan.json'), (p) => (p.preparation.params.header = false), join(ws.root, 'header.plan.json'));
    const outcome = await cliInProcess(['add-source', file, '--dry-run'], ws.root);
    expect(outcome.code).toBe(2);
    expect(problems(outcome.stderr)).toEqual([
      `  - preparation.params.header: row 1 of iris.csv holds text ('setosa', 'versicolor', 'virginica') in columns whose other rows are numbers: it is a header row read as data (fix: set "header": true; leave out "columns", or keep one name per column to rename them)`,
    ]);
  });
});

describe('recipe errors teach, and are printed once', () => {
  it('a real prepare of the header-as-data plan names the file, row 1 and column, and suggests header: true', async () => {
    const loaded = loadPlanFile(join(ws.root, 'header.plan.json'));
    const [outcome] = await prepareSources([loaded], { settings: ws.settings, workers: 1 });
    expect(outcome!.ok).toBe(false);
    expect(outcome!.error).toMatch(/tabular: params\.features\.2: iris\.csv row 1, column 'column_3': 'setosa' is not a number; row 1 looks like a header row .*: set header: true/);
    expect(outcome!.error).not.toMatch(/could not convert string to float/);
  });

  it('add-source with a wrong sha256 prints the acquisition error once (it was five times: log, two conditions × two lines)', async () => {
    const file = edit(join(ws.root, 'ns_iris.plan.json'), (p) => {
      p.source = p.conditions[0].id = p.conditions[1].paired_with = 'ns_once';
      p.conditions[1].id = 'ns_once__d6';
      p.raw_files[0].sha256 = 'b'.repeat(64);
    }, join(ws.root, 'once.plan.json'));
    const lines: string[] = [];
    const result = await addSource(file, { settings: ws.settings, workers: 1, quiet: true, log: (l) => lines.push(l) });
    expect(result.written).toBe(false);
    const printed = [...lines, ...addSourceLines(result)].join('\n');
    expect(printed.match(/sha256 mismatch for iris\.csv/g)).toHaveLength(1);
    expect(printed).toMatch(/FAILED source ns_once not prepared: raw file iris\.csv \(sha256 b{64}\) could not be acquired/);
  });
});

it('the repository root is untouched by these tests (plans were written to the temporary root)', () => {
  expect(readdirSync(ROOT).filter((f) => f.endsWith('.plan.json'))).toEqual([]);
});
