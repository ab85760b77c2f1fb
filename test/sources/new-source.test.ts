// `wwref new-source` and the static dry run (`add-source --dry-run`), on real files shipped inside the
// pinned packages, through the real command line and the real Python inspector:
// - skeletons for a scikit-learn CSV (clustering), a scikit-image PNG (image restoration) and a
//   statsmodels CSV (forecasting) carry the licence and citation the package states (its metadata, the
//   data set's description), say where each was read, and are accepted by the dry run as written; a
//   file of no package is refused for exactly licence and citation until they are filled; raw
//   identities are the package files' own;
// - a target (or series) column that is not unambiguous is not guessed: the candidates are listed in the
//   output and the plan, whose TODO target the dry run refuses; an unambiguous one says why;
// - the inactive rules new-source pre-fills are the equivalences the committed plans declare;
// - the dry run reports a wrong sha256, a wrong byte count, an unknown column and a label missing from
//   the data, each once with its field path and a fix, and the header hint for a header row read as data;
// - the recipe itself (a real prepare) names file, row and column and suggests `header: true`, and a
//   failed add-source prints its acquisition error once;
// - a file given by path is read through a bounded sample (its first lines): a huge one-line file is
//   refused at once, a gzip bomb is described from its first rows, with the whole file's sha256 and size.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
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

/** `wwref new-source` of a package file, run in the workspace, writing `out` there; the outcome as it is. */
function newSourceOutcome(family: string, pkg: string, out: string) {
  return cliInProcess(['new-source', '--family', family, '--package', pkg, '--out', join(ws.root, out)], ws.root);
}

async function newSource(family: string, pkg: string, source: string, extra: string[] = []): Promise<{ file: string; stdout: string }> {
  const file = join(ws.root, `${source}.plan.json`);
  const made = await cliInProcess(
    ['new-source', '--family', family, '--package', pkg, ...extra, '--source', source, '--out', file],
    ws.root,
  );
  expect(made.code, made.stderr).toBe(0);
  expect(made.stdout).toContain(`plan skeleton written to ${file}`);
  return { file, stdout: made.stdout };
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

/** What each package states about the data (its pinned version's own text), and the file it is read from. */
const stated: Record<string, { licence: RegExp; citation: RegExp; from: RegExp }> = {
  ns_iris: {
    licence:
      /^no licence stated in the data set's description \(sklearn\/datasets\/descr\/iris\.rst\); redistributed inside scikit-learn 1\.6\.1, whose package licence is BSD 3-Clause License$/,
    citation:
      /^Iris plants dataset; creator R\.A\. Fisher; .*Fisher, R\.A\. "The use of multiple measurements in taxonomic problems".*; as shipped in scikit-learn 1\.6\.1 \(https:\/\/scikit-learn\.org\): sklearn\/datasets\/data\/iris\.csv$/,
    from: /- licence from scikit-learn 1\.6\.1 package metadata \(first line of License\)[^\n]*\n- citation from sklearn\/datasets\/descr\/iris\.rst/,
  },
  ns_moon: {
    licence:
      /^no licence stated in the data set's description \(skimage\/data\/_fetchers\.py, docstring of moon\(\)\); redistributed inside scikit-image 0\.26\.0, whose package licence is BSD-3-Clause$/,
    citation:
      /^Surface of the moon \(skimage\.data\.moon\(\)\); as shipped in scikit-image 0\.26\.0 \(https:\/\/scikit-image\.org\): skimage\/data\/moon\.png$/,
    from: /- licence from scikit-image 0\.26\.0 package metadata \(License\)[^\n]*\n- citation from skimage\/data\/_fetchers\.py, docstring of moon\(\)/,
  },
  ns_nile: {
    licence:
      /^This is public domain \(as statsmodels 0\.14\.6 documents the data set\); redistributed inside statsmodels 0\.14\.6, whose package licence is BSD License$/,
    citation:
      /^Nile River flows at Ashwan 1871-1970; This data is first analyzed in: Cobb, G\. W\. 1978\. "The Problem of the Nile: .*; as shipped in statsmodels 0\.14\.6 \(https:\/\/www\.statsmodels\.org\/\): statsmodels\/datasets\/nile\/nile\.csv$/,
    from: /- licence from statsmodels\/datasets\/nile\/data\.py; statsmodels 0\.14\.6 package metadata \(License\)[^\n]*\n- citation from statsmodels\/datasets\/nile\/data\.py/,
  },
};

describe('new-source writes a plan with the licence and citation its package states, which the dry run accepts', () => {
  for (const c of cases) {
    it(`${c.family} from ${c.pkg}`, async () => {
      const { file, stdout } = await newSource(c.family, c.pkg, c.source);
      const plan = JSON.parse(readFileSync(file, 'utf8'));
      const [distribution, path] = c.pkg.split(':') as [string, string];
      const bytes = readFileSync(join(purelib, path));
      expect(plan.raw_files).toEqual([
        {
          name: path.split('/').pop(),
          sha256: sha256Hex(bytes),
          bytes: bytes.length,
          mirror_path: expect.stringMatching(/^packages\//),
          package: { distribution, version: expect.any(String), path },
        },
      ]);
      expect(plan.preparation.recipe).toBe(c.recipe);
      expect(plan.$comment.join('\n')).toMatch(/A = .*; B = .*; F = /); // the family's options and their meaning
      expect(plan.conditions.map((k: any) => k.id)).toEqual([c.source, `${c.source}__d6`]);
      expect(plan.conditions[1].paired_with).toBe(c.source);
      expect(plan.conditions[1].equivalences.map((e: any) => e.option)).toEqual(INACTIVE_RULES[c.family].map((r) => r.option));

      const facts = stated[c.source]!;
      expect(plan.licence).toMatch(facts.licence);
      expect(plan.citation).toMatch(facts.citation);
      expect(stdout).toMatch(facts.from);
      const notes = stdout
        .split('\n')
        .filter((l) => l.startsWith('- '))
        .map((l) => l.slice(2));
      expect(plan.$comment).toEqual(expect.arrayContaining(notes)); // the plan keeps what the output said
      expect(stdout).toContain(
        ': fill homepage (as the distributor of the data documents it); check licence, citation, title, preparation.params, then run',
      );

      const dry = await cliInProcess(['add-source', file, '--dry-run'], ws.root);
      expect(dry.stderr).toBe('');
      expect(dry.code).toBe(0);
      expect(dry.stdout).toContain(`is valid: source ${c.source} (${c.family})`);
      expect(dry.stdout).toMatch(/bytes, sha256 [0-9a-f]{12}… as declared \(package /);
    });
  }

  it('a file of no package: licence and citation are left to fill, and the dry run refuses exactly those two fields until they are', async () => {
    const copy = join(ws.root, 'own', 'flowers.csv');
    mkdirSync(dirname(copy), { recursive: true });
    copyFileSync(join(purelib, 'sklearn/datasets/data/iris.csv'), copy);
    const file = join(ws.root, 'ns_own.plan.json');
    const made = await cliInProcess(
      ['new-source', '--family', 'clustering', '--file', copy, '--source', 'ns_own', '--mirror', join(ws.root, 'own'), '--out', file],
      ws.root,
    );
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toContain(
      ': fill licence, citation and homepage (as the distributor of the data documents them); check title, preparation.params, then run',
    );
    expect(made.stdout).not.toMatch(/licence from|citation from/);
    const unfilled = await cliInProcess(['add-source', file, '--dry-run', '--mirror', dirname(copy)], ws.root);
    expect(unfilled.code).toBe(2);
    expect(problems(unfilled.stderr).map((l) => l.split(':')[0])).toEqual(['  - licence', '  - citation']);
    edit(file, fill);
    const dry = await cliInProcess(['add-source', file, '--dry-run', '--mirror', dirname(copy)], ws.root);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
  });

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

  it('a file that is not read as a table says why (scikit-learn wine_data.csv: its first row has 5 fields, the rows 14)', async () => {
    const outcome = await newSourceOutcome('classification', 'scikit-learn:sklearn/datasets/data/wine_data.csv', 'wine.plan.json');
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toMatch(
      /^wwref: new-source: wine_data\.csv is not read as a table, which a classification source needs \(not read as a table or image: .*Expected 5 fields in line 2, saw 14\)\n$/,
    );
  });

  it('refuses a package file that does not exist, naming the distribution (exit 2, one line)', async () => {
    const outcome = await newSourceOutcome('clustering', 'scikit-learn:sklearn/datasets/data/irises.csv', 'x.plan.json');
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toMatch(
      /^wwref: --package 'scikit-learn:sklearn\/datasets\/data\/irises\.csv': scikit-learn [\d.]+ ships no file sklearn\/datasets\/data\/irises\.csv\n$/,
    );
  });
});

describe('new-source reads a file given by path in bounded time and memory (a sample of its first lines)', () => {
  it('a huge one-line file, a gzip bomb, a table longer than the rows described: whole sha256 and size, bounded reads', async () => {
    const dir = join(ws.root, 'bounded');
    mkdirSync(dir);
    // 48 MiB on one line: the inspection would read it whole as a table of 25 million columns
    const line = join(dir, 'line.csv');
    writeFileSync(line, Buffer.alloc(48 << 20, 'a,'));
    const one = await cliInProcess(
      ['new-source', '--family', 'classification', '--file', line, '--out', join(dir, 'line.plan.json')],
      ws.root,
    );
    expect([one.code, one.stderr]).toEqual([
      2,
      expect.stringMatching(
        /^wwref: new-source: line\.csv is not read as a table, .*its first line is longer than 65536 bytes: not read as a table\)\n$/,
      ),
    ]);
    // 2.9 GB of rows behind 7 MB of gzip (one member repeated): the header and the first 5,000 rows describe it
    const member = gzipSync(Buffer.from('1.5,2.25,x\n2.5,0.75,y\n'.repeat(1 << 19)), { level: 9 });
    const bomb = join(dir, 'bomb.csv.gz');
    writeFileSync(bomb, Buffer.concat([gzipSync('width,count,label\n'), ...Array.from({ length: 256 }, () => member)]));
    const made = await cliInProcess(
      ['new-source', '--family', 'classification', '--file', bomb, '--out', join(dir, 'bomb.plan.json')],
      ws.root,
    );
    expect(made.code, made.stderr).toBe(0);
    const plan = JSON.parse(readFileSync(join(dir, 'bomb.plan.json'), 'utf8'));
    const bytes = readFileSync(bomb);
    expect(plan.raw_files[0]).toMatchObject({ name: 'bomb.csv.gz', sha256: sha256Hex(bytes), bytes: bytes.length });
    expect(plan.preparation.params).toMatchObject({
      file: 'bomb.csv.gz',
      format: 'csv',
      compression: 'gzip',
      header: true,
      target: 'label',
    });
  }, 120_000);
});

describe('a target column that is not unambiguous is listed and left to the user, never guessed', () => {
  it('digits (clustering, 64 pixel columns of integers 0-16 and the digit): the candidates are listed, the target is a TODO the dry run refuses', async () => {
    const { file, stdout } = await newSource('clustering', 'scikit-learn:sklearn/datasets/data/digits.csv.gz', 'ns_digits');
    const todo =
      /TODO target: the target column is not unambiguous \(62 candidates, most likely first\): 'column_65' \(10 values: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9\); 'column_64' \(17 values: [^)]*\);.* … \(62 in all\)\. Set preparation\.params\.target to one of them and remove it from features; set labels to its values/;
    expect(stdout).toMatch(todo);
    expect(stdout).toContain(
      ': fill homepage (as the distributor of the data documents it); choose the target column (TODO target); check licence, citation, title, preparation.params, then run',
    );
    const plan = JSON.parse(readFileSync(file, 'utf8'));
    expect(plan.$comment.join('\n')).toMatch(todo);
    expect(plan.$comment[0]).toMatch(/To do: .*choose the target column \(TODO target\)/);
    expect(plan.preparation.params.target).toBe('TODO: choose the target column (candidates in $comment)');
    expect(plan.preparation.params.features).toHaveLength(65);
    expect(plan.preparation.params.labels).toBeUndefined();

    const refused = await cliInProcess(['add-source', file, '--dry-run'], ws.root);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /^wwref: invalid construction plan .*ns_digits\.plan\.json: preparation\.params\.labels: required for classification and clustering/,
    );
    // what the TODO says to do makes the plan valid
    edit(file, (p) => {
      p.preparation.params.target = 'column_65';
      p.preparation.params.features = p.preparation.params.features.filter((f: string) => f !== 'column_65');
      p.preparation.params.labels = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'];
    });
    const dry = await cliInProcess(['add-source', file, '--dry-run'], ws.root);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
  });

  it('longley (regression, 8 numeric columns): the TODO target is refused by the dry run, naming the columns', async () => {
    const { file, stdout } = await newSource('regression', 'statsmodels:statsmodels/datasets/longley/longley.csv', 'ns_longley');
    expect(stdout).toContain(
      "TODO target: the target column is not unambiguous (8 candidates, most likely first): 'YEAR', 'POP', 'ARMED', 'UNEMP', 'GNP', 'GNPDEFL', 'TOTEMP', 'Obs'. Set preparation.params.target to one of them and remove it from features\n",
    );
    const refused = await cliInProcess(['add-source', file, '--dry-run'], ws.root);
    expect(refused.code).toBe(2);
    expect(problems(refused.stderr)).toEqual([
      "  - preparation.params.target: 'TODO: choose the target column (candidates in $comment)' is not a column of longley.csv (the columns of longley.csv are 'Obs', 'TOTEMP', 'GNPDEFL', 'GNP', 'UNEMP', 'ARMED', 'POP', 'YEAR') (fix: name one of the columns)",
    ]);
  });

  it('macrodata (forecasting, 12 value columns): the series column is a TODO too', async () => {
    const { file, stdout } = await newSource('forecasting', 'statsmodels:statsmodels/datasets/macrodata/macrodata.csv', 'ns_macro');
    expect(stdout).toMatch(
      /TODO series: the series column is not unambiguous \(12 numeric columns\): 'realgdp', 'realcons', .*'realint'\. Set preparation\.params\.columns to \[one of them\]/,
    );
    expect(JSON.parse(readFileSync(file, 'utf8')).preparation.params.columns).toEqual([
      'TODO: choose the series column (candidates in $comment)',
    ]);
    const refused = await cliInProcess(['add-source', file, '--dry-run'], ws.root);
    expect(refused.code).toBe(2);
    expect(problems(refused.stderr)[0]).toMatch(
      /^ {2}- preparation\.params\.columns\.0: 'TODO: choose the series column \(candidates in \$comment\)' is not a column of macrodata\.csv/,
    );
  });

  it('an unambiguous target says why: the one label column (iris), the one column of a separate target file (diabetes)', async () => {
    expect(readFileSync(join(ws.root, 'ns_iris.plan.json'), 'utf8')).toContain(
      "target 'column_5': the only column with 2 to 50 text or integer values",
    );
    const { file, stdout } = await newSource('regression', 'scikit-learn:sklearn/datasets/data/diabetes_data_raw.csv.gz', 'ns_diabetes', [
      '--package',
      'scikit-learn:sklearn/datasets/data/diabetes_target.csv.gz',
    ]);
    expect(stdout).toContain(
      "target 'column_11': the one column of the last file (a separate target file); features: the 10 other numeric column(s)",
    );
    expect(stdout).toContain('homepage from sklearn/datasets/descr/diabetes.rst: check it');
    const plan = JSON.parse(readFileSync(file, 'utf8'));
    expect(plan.preparation.params).toMatchObject({ target: 'column_11', append_files: ['diabetes_target.csv.gz'] });
    expect(plan.homepage).toBe('https://www4.stat.ncsu.edu/~boos/var.select/diabetes.html');
    expect(plan.citation).toMatch(
      /^Diabetes dataset; Bradley Efron, Trevor Hastie, Iain Johnstone and Robert Tibshirani \(2004\) "Least Angle Regression,"/,
    );
    const dry = await cliInProcess(['add-source', file, '--dry-run'], ws.root);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
  });
});

describe('the inactive rules new-source pre-fills', () => {
  it('are the equivalences every committed six-option plan of the family declares', () => {
    const files = [SOURCES_DIR, join(SOURCES_DIR, 'examples')].flatMap((dir) =>
      readdirSync(dir)
        .filter((f) => f.endsWith('.plan.json'))
        .map((f) => join(dir, f)),
    );
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
    const bad = edit(
      base,
      (p) => {
        p.source = p.conditions[0].id = p.conditions[1].paired_with = 'ns_bad';
        p.conditions[1].id = 'ns_bad__d6';
        p.raw_files[0].sha256 = 'a'.repeat(64);
        p.raw_files[0].bytes += 1;
        p.preparation.params.features[1] = 'petal_width';
        p.preparation.params.labels = ['0', '1', '2', '3'];
      },
      join(ws.root, 'bad.plan.json'),
    );
    const outcome = await cliInProcess(['add-source', bad, '--dry-run'], ws.root);
    expect(outcome.code).toBe(2);
    expect(outcome.stdout).toBe('');
    expect(outcome.stderr).not.toMatch(/\n\s+at /);
    const lines = problems(outcome.stderr);
    const fields = lines.map((l) => l.slice(4, l.indexOf(': ')));
    expect(fields).toEqual(['raw_files.0.sha256', 'raw_files.0.bytes', 'preparation.params.features.1', 'preparation.params.labels.3']);
    const [sha, bytes, column, label] = lines as [string, string, string, string];
    expect(sha).toMatch(
      /iris\.csv from package scikit-learn .* has sha256 f13ffa8f[0-9a-f]{56}, the plan declares a{64} \(fix: if this is the file you mean, set sha256 to "f13ffa8f/,
    );
    expect(bytes).toMatch(/has 2734 bytes, the plan declares 2735 \(fix: .*set bytes to 2734\)/);
    expect(column).toMatch(/'petal_width' is not a column of iris\.csv \(the columns of iris\.csv are 'column_1', .*\(fix: /);
    expect(label).toMatch(
      /label '3' does not occur in column 'column_5' of iris\.csv \(values: '0', '1', '2'\) \(fix: remove it from labels/,
    );
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
    expect(outcome!.error).toMatch(
      /tabular: params\.features\.2: iris\.csv row 1, column 'column_3': 'setosa' is not a number; row 1 looks like a header row .*: set header: true/,
    );
    expect(outcome!.error).not.toMatch(/could not convert string to float/);
  });

  it('add-source with a wrong sha256 prints the acquisition error once (it was five times: log, two conditions × two lines)', async () => {
    const file = edit(
      join(ws.root, 'ns_iris.plan.json'),
      (p) => {
        p.source = p.conditions[0].id = p.conditions[1].paired_with = 'ns_once';
        p.conditions[1].id = 'ns_once__d6';
        p.raw_files[0].sha256 = 'b'.repeat(64);
      },
      join(ws.root, 'once.plan.json'),
    );
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
