// Issue 40, the controls' side: a control record is used only as wwref computes it again. Records that a
// red team edited, forged (a table that grade scores consistently), reordered, copied, took from another
// reference or wrote with a NaN are refused in one line by `controls summary`, `cohort run --controls` and
// a resumed run; a full disk leaves no half-written record. Real worker processes and real files.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gradeSurface, referenceSurface } from '../../pipelines/analysis/grade.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { recordLine, type StoredRecord } from '../../pipelines/evaluation/controls/records.ts';
import { summaryCells } from '../../pipelines/evaluation/controls/summary.ts';
import { BIN, cliInProcess } from '../support/cli.ts';
import { FAIL_WRITE_PRELOAD, failWrite } from '../support/doubles.ts';

const settings = loadSettings({}, process.env);
const dir = mkdtempSync(join(tmpdir(), 'wwref-controls-verify-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const wwref = (...args: string[]) => cliInProcess(args, ROOT);
const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean);
const RUN = [
  'controls',
  'run',
  '--condition',
  'wine',
  '--method',
  'design_degree2',
  'random_degree2',
  'gp_effect_variance',
  '--seeds',
  '2',
];
const RUN_BUDGETS = ['--budget', '4', '8'];
const honest = join(dir, 'honest');
let records: string[];
const find = (method: string, budget: number) =>
  records.find((l) => l.includes(`"method":"${method}"`) && l.includes(`"budget":${budget},`))!;

/** A record of `line` whose table is the reference itself, its score what grade gives that table: consistent, and no control's. */
function forgedPerfect(line: string): string {
  const r = JSON.parse(line);
  const surface = referenceSurface(settings, r.condition);
  const observations = r.acquisition_order.map((m: string) => [m, r.observations[m]] as [string, number]);
  const score = gradeSurface(surface, surface.utilities, { observed: r.acquisition_order });
  const { condition, instance, family, track, method, seed, reference } = r;
  return recordLine(
    { condition, instance, family, track, method, seed: seed ?? null, reference },
    { ...r, observations, prediction: surface.utilities },
    score,
  );
}

/** `line` with its purchases (after the anchors) bought in the reverse order, everything else as it was. */
function reordered(line: string): string {
  const r = JSON.parse(line);
  const order: string[] = r.acquisition_order;
  const again = [...order.slice(0, 2), ...order.slice(2).reverse()];
  const observations = `{${again.map((m) => `"${m}":${JSON.stringify(r.observations[m])}`).join(',')}}`;
  return line.replace(/"observations":\{[^{}]*\}/, `"observations":${observations}`).replace(JSON.stringify(order), JSON.stringify(again));
}

beforeAll(async () => {
  const r = await wwref(...RUN, ...RUN_BUDGETS, '--out', honest);
  expect(r.code, r.stderr).toBe(0);
  records = lines(join(honest, 'records.jsonl'));
}, 300_000);

describe('controls summary', () => {
  const summarise = async (name: string, content: string[]) => {
    const file = join(dir, `${name}.jsonl`);
    writeFileSync(file, `${content.join('\n')}\n`);
    const out = join(dir, `summary-${name}`);
    return { ...(await wwref('controls', 'summary', '--records', file, '--out', out)), out, file };
  };

  it('refuses in one line, naming file and line, a record that recomputation does not give; nothing is written', async () => {
    const design = find('design_degree2', 8);
    const at = records.indexOf(design);
    const swap = (line: string) => records.map((l, k) => (k === at ? line : l));
    const cases: [string, string[], RegExp][] = [
      [
        'edited',
        swap(design.replace(/"effect_recovery":[^,]+/, '"effect_recovery":0.9')),
        /score\.effect_recovery is 0\.9; recomputed on the reference it is 0\.\d+/,
      ],
      ['forged', swap(forgedPerfect(design)), /is not what wwref computes: its .*prediction_table|is not what wwref computes: its score/],
      ['reordered', swap(reordered(design)), /is not what wwref computes: its acquisition_order|purchases are written in the order/],
      // the benchmark's form (no reference, no acquisition_order): the order is the one its observations are written in
      [
        'benchmark-reordered',
        swap(
          reordered(design)
            .replace(/,"acquisition_order":\[[^\]]*\]/, '')
            .replace(/,"reference":\{[^}]*\}/, ''),
        ),
        /its purchases are written in the order 0000 1111 .*; the method buys them in the order/,
      ],
      ['nan', swap(design.replace(/"effect_mae":[^,]+/, '"effect_mae":NaN')), /line \d+ is not strict JSON: NaN is not a JSON number/],
      [
        'infinite',
        swap(design.replace(/"effect_mae":[^,]+/, '"effect_mae":1e999')),
        /line \d+ is not strict JSON: 1e999 is beyond the range of a float64/,
      ],
      [
        'another-reference',
        swap(design.replace(/"table_sha256":"[0-9a-f]{4}/, '"table_sha256":"beef')),
        /was computed on reference table beef[0-9a-f]{8} \(plan [0-9a-f]{12}\), not on the references' table [0-9a-f]{12} \(plan [0-9a-f]{12}\) of wine/,
      ],
    ];
    for (const [name, content, pattern] of cases) {
      const r = await summarise(name, content);
      expect(r.code, `${name}: ${r.stderr}`).toBe(2);
      expect(r.stderr, name).toMatch(pattern);
      expect(r.stderr, name).toContain(`${r.file}${name === 'nan' || name === 'infinite' ? ', line' : ' line'} ${at + 1}`);
      expect(r.stderr.trim().split('\n'), name).toHaveLength(1);
      expect(existsSync(r.out), name).toBe(false);
    }
  }, 300_000);

  it('counts a cell entry once: three copies under other seeds are left out, and the cell says which and why', async () => {
    const design = find('design_degree2', 8);
    const copies = [1, 2, 3].map((seed) => design.replace('"budget":8,', `"seed":${seed},"budget":8,`));
    const r = await summarise('copies', [...records, ...copies]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`${records.length} records summarised, each recomputed on the references (3 second copies left out)`);
    const summary = JSON.parse(readFileSync(join(r.out, 'summary.json'), 'utf8'));
    const cell = summary.cells.find((c: { method: string; budget: number }) => c.method === 'design_degree2' && c.budget === 8);
    expect(cell.records).toBe(1);
    expect(cell.recovery_mean).toBe(JSON.parse(design).score.effect_recovery);
    const first = `${r.file} line ${records.indexOf(design) + 1}`;
    expect(cell.left_out).toEqual(
      [1, 2, 3].map((k) => ({ record: `${r.file} line ${records.length + k}`, why: `a second copy of ${first}` })),
    );
    expect(readFileSync(join(r.out, 'summary.csv'), 'utf8')).toContain(`${r.file} line ${records.length + 1}: a second copy of ${first}`);
  }, 120_000);

  it('never makes one cell of two reference tables', () => {
    const [a, b] = [find('design_degree2', 8), find('design_degree2', 8)].map((l, k) => ({
      ...JSON.parse(l),
      seed: undefined,
      read_from: `file line ${k + 1}`,
      reference: { table_sha256: k ? 'b'.repeat(64) : 'a'.repeat(64), plan_sha256: 'c'.repeat(64) },
    }));
    expect(() => summaryCells([a, b] as StoredRecord[])).toThrow(
      /the records of wine design_degree2 at budget 8 name two reference tables: aaaaaaaaaaaa \(file line 1\) and bbbbbbbbbbbb \(file line 2\)/,
    );
  });
});

describe('cohort run --controls DIR', () => {
  /** `controls run`'s defaults on wine at B = 4 and 8: every method of its grid, the random design at seeds 0 … 19. */
  const full = join(dir, 'full-default');
  let fullRecords: string[];
  const findFull = (method: string, budget: number, seed = 0) =>
    fullRecords.find(
      (l) =>
        l.includes(`"method":"${method}"`) &&
        l.includes(`"budget":${budget},`) &&
        (method !== 'random_degree2' || l.includes(`"seed":${seed},`)),
    )!;
  beforeAll(async () => {
    const r = await wwref('controls', 'run', '--condition', 'wine', ...RUN_BUDGETS, '--out', full);
    expect(r.code, r.stderr).toBe(0);
    fullRecords = lines(join(full, 'records.jsonl'));
  }, 300_000);
  const cohort = (controls: string, out: string) =>
    wwref(
      'cohort',
      'run',
      '--agent',
      'wwref-no-such-agent-command',
      '--out',
      out,
      '--condition',
      'wine',
      '--budget',
      '8',
      '--controls',
      controls,
    );
  /** A controls folder of `content` and the full run's run.json (its task count less `fewerTasks`: an edit made to match). */
  const folder = (name: string, content: string[], fewerTasks = 0) => {
    const d = join(dir, `controls-${name}`);
    mkdirSync(d);
    writeFileSync(join(d, 'records.jsonl'), `${content.join('\n')}\n`);
    const run = JSON.parse(readFileSync(join(full, 'run.json'), 'utf8'));
    writeFileSync(join(d, 'run.json'), JSON.stringify({ ...run, tasks: run.tasks - fewerTasks }));
    return d;
  };
  const isRandom = (l: string, seed?: (s: number) => boolean) =>
    l.includes('"method":"random_degree2"') && (seed === undefined || seed(Number(/"seed":(\d+),/.exec(l)![1])));

  it('refuses an edited score, a record without its reference and copies of one cell, in one line naming the record', async () => {
    const design = findFull('design_degree2', 8);
    const at = fullRecords.indexOf(design);
    const swap = (line: string) => fullRecords.map((l, k) => (k === at ? line : l));
    const cases: [string, string[], RegExp, number?][] = [
      [
        'edited',
        swap(design.replace(/"effect_recovery":[^,]+/, '"effect_recovery":0.9')),
        /line \d+: the record of wine design_degree2 at budget 8 is not what wwref computes: its score\.effect_recovery is 0\.9/,
      ],
      [
        'no-reference',
        swap(design.replace(/,"reference":\{[^}]*\}/, '')),
        /line \d+: the control of wine names reference table none, the cohort's is [0-9a-f]{12}/,
      ],
      [
        // the random design's records of chosen seeds (its mean what the choice made it)
        'chosen-seeds',
        fullRecords.filter((l) => !isRandom(l, (s) => s === 0)),
        /records\.jsonl is not a complete controls run of the cells needed \(every method of its grid, the random design at seeds 0 … 19\): wine B=8 random_degree2 seed 0; run 'wwref controls run'/,
      ],
      [
        // the same with run.json's count edited to match: what must be there is never read from a count
        'chosen-seeds-counted',
        fullRecords.filter((l) => !isRandom(l, (s) => s === 0)),
        /wine B=8 random_degree2 seed 0; run 'wwref controls run'/,
        1,
      ],
      [
        // issue 40, third red team (Q2): fewer seeds (0 … 4), their count edited in run.json: a run's draws, but not the default ones
        'fewer-seeds-counted',
        fullRecords.filter((l) => !isRandom(l, (s) => s >= 5)),
        /wine B=8 random_degree2 seeds 5 … 19 \(15\); run 'wwref controls run'/,
        15,
      ],
      [
        // a whole method left out, run.json's count edited to match
        'method-left-out-counted',
        fullRecords.filter((l) => !l.includes('"method":"design_degree2"')),
        /: wine B=8 design_degree2; run 'wwref controls run'/,
        1,
      ],
      [
        'copies',
        [...fullRecords, ...[1, 2].map((s) => design.replace('"budget":8,', `"seed":${s},"budget":8,`))],
        /line \d+: a second copy of the record of wine design_degree2 at budget 8 \(the first: .* line \d+\)/,
      ],
    ];
    for (const [name, content, pattern, fewerTasks] of cases) {
      const out = join(dir, `cohort-${name}`);
      const r = await cohort(folder(name, content, fewerTasks ?? 0), out);
      expect(r.code, `${name}: ${r.stderr}`).toBe(2);
      expect(r.stderr, name).toMatch(pattern);
      expect(r.stderr.trim().split('\n'), name).toHaveLength(1);
      // refused before any agent ran: no episode's line
      const results = join(out, 'results.jsonl');
      expect(existsSync(results) ? lines(results) : [], name).toEqual([]);
    }
  }, 300_000);
});

describe('a resumed run', () => {
  it('keeps only tasks recomputation gives: a forged record of recovery 1, reordered purchases and a NaN are left out, never a crash', async () => {
    const out = join(dir, 'resumed');
    mkdirSync(out);
    writeFileSync(join(out, 'run.json'), readFileSync(join(honest, 'run.json')));
    const design = find('design_degree2', 8);
    const gp = find('gp_effect_variance', 8);
    const random = find('random_degree2', 8);
    const partial = records.map((l) =>
      l === design ? forgedPerfect(l) : l === gp ? reordered(l) : l === random ? l.replace(/"grid_mae":[^,]+/, '"grid_mae":1e999') : l,
    );
    writeFileSync(join(out, 'records.jsonl.partial'), `${partial.join('\n')}\n{"condition":"wine","method":"gp_effect_vari`);
    const r = await wwref(...RUN, ...RUN_BUDGETS, '--out', out);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/internal error|at .*\.ts:\d+/);
    expect(r.stderr).toMatch(/resuming: \d+ of \d+ task\(s\) kept from .*; line\(s\) left out: /);
    expect(r.stderr).toMatch(/1 with a line that is not whole, strict JSON \(line \d+\)/);
    expect(r.stderr).toMatch(/2 with purchases, a table or fields that recomputation does not give/);
    expect(lines(join(out, 'records.jsonl')).sort()).toEqual([...records].sort());
  }, 300_000);
});

describe('a full disk', () => {
  it('leaves no half-written record and no temporary file; the same command then finishes the run', async () => {
    const out = join(dir, 'full');
    const args = [...RUN, ...RUN_BUDGETS, '--out', out, '--workers', '1'];
    const r = await execa('node', ['--import', FAIL_WRITE_PRELOAD, BIN, ...args], {
      cwd: ROOT,
      env: { ...failWrite('records.jsonl.partial'), WWREF_FROM_SOURCES: '1' },
      reject: false,
    });
    expect(r.exitCode, String(r.stderr)).toBe(2);
    expect(String(r.stderr)).toMatch(/cannot append to .*records\.jsonl\.partial: .*ENOSPC/);
    expect(
      String(r.stderr)
        .trim()
        .split('\n')
        .filter((l) => !l.startsWith('[')),
    ).toHaveLength(1);
    // the failed append was cut back (core/fsutil.ts appendNoFollow): no partial record, no temporary file
    const partial = join(out, 'records.jsonl.partial');
    if (existsSync(partial)) for (const line of lines(partial)) expect(() => JSON.parse(line)).not.toThrow();
    expect(readdirSync(out).filter((f) => f.endsWith('.tmp') || f.includes('.partial.'))).toEqual([]);
    const again = await wwref(...args);
    expect(again.code, again.stderr).toBe(0);
    expect(lines(join(out, 'records.jsonl')).sort()).toEqual([...records].sort());
  }, 300_000);
});

describe('a finished run run again', () => {
  it('refuses its records.jsonl once a record is not what recomputation gives; a figure that cannot be drawn is a warning', async () => {
    const out = join(dir, 'again');
    const args = [...RUN, ...RUN_BUDGETS, '--out', out];
    expect((await wwref(...args)).code).toBe(0);
    // a directory where the figure goes: the summaries are written, the figure said, nothing half-written left
    rmSync(join(out, 'controls-recovery.svg'));
    mkdirSync(join(out, 'controls-recovery.svg'));
    const drawn = await wwref(...args);
    expect(drawn.code, drawn.stderr).toBe(0);
    expect(drawn.stderr).toMatch(/controls: warning: the recovery figure could not be drawn .*; the summaries are written without it/);
    expect(readdirSync(out).filter((f) => f.includes('.partial') || f.endsWith('.tmp'))).toEqual([]);
    const file = join(out, 'records.jsonl');
    const gp = find('gp_effect_variance', 8);
    writeFileSync(
      file,
      `${lines(file)
        .map((l) => (l === gp ? reordered(l) : l))
        .join('\n')}\n`,
    );
    const r = await wwref(...args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/records\.jsonl is not this run's complete set of records \(it was changed\)/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  }, 300_000);
});
