// `wwref cohort compare` end to end: one real cohort of the example agent (pair_ridge on three
// four-option conditions × budgets 4 and 8), a byte-for-byte copy of it, its controls and its own
// results file read as published agent records (a subset of them, so that cells are left unshared).
// Two identical cohorts differ by exactly 0 with a zero-width interval; the agent equals its
// `design_degree2` control (it buys the same design and fits the same table: cohort.test.ts); one
// cell's intervals recomputed by an independent Python script agree; the report renders in headless
// Chromium with every figure loaded, no console error, and its tables equal compare.json.
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { significant } from '../../pipelines/evaluation/compare/tables.ts';
import { CHROMIUM, renderedPage } from '../../scripts/check-report.ts';
import { cliProcess } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-compare-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const cohort = join(dir, 'pair');
const copy = join(dir, 'pair-copy');
/** A cohort is named by its agent label (pair_ridge); here its copy and the published file have that name too: told apart by where they were read. */
const PAIR = 'pair_ridge (pair)';
const COPY = 'pair_ridge (pair-copy)';
const PUBLISHED = 'pair_ridge (published.jsonl)';
const published = join(dir, 'published.jsonl');
const out = join(dir, 'comparison');

beforeAll(async () => {
  await execa('bash', [join(ROOT, 'scripts', 'setup-agents')], { cwd: ROOT });
  const agent = 'examples/agents/.venv/bin/python examples/agents/pair_ridge.py';
  const args = ['cohort', 'run', '--agent', agent, '--out', cohort, '--condition', 'wine', 'concrete', 'seeds', '--budget', '4', '8'];
  const run = await cliProcess([...args, '--label', 'agent=pair_ridge', '--parallel', '2'], ROOT);
  if (run.code !== 0) throw new Error(`the cohort did not run: ${run.stderr}`);
  // two more agents of the examples (examples/agents/simple.py) on two of the conditions: four cohorts in all
  for (const policy of ['random', 'constant']) {
    const other = ['cohort', 'run', '--agent', `examples/agents/.venv/bin/python examples/agents/simple.py ${policy}`];
    const ran = await cliProcess(
      [...other, '--out', join(dir, policy), '--condition', 'wine', 'concrete', '--budget', '4', '8', '--label', `agent=${policy}`],
      ROOT,
    );
    if (ran.code !== 0) throw new Error(`the ${policy} cohort did not run: ${ran.stderr}`);
  }
  cpSync(cohort, copy, { recursive: true });
  // the wine and concrete lines as a published agent-record file: seeds is not shared with it
  const lines = readFileSync(join(cohort, 'results.jsonl'), 'utf8').split('\n').filter(Boolean);
  writeFileSync(published, `${lines.filter((l) => /"condition":"(wine|concrete)"/.test(l)).join('\n')}\n`);
}, 600_000);

const json = () => JSON.parse(readFileSync(join(out, 'compare.json'), 'utf8'));

describe('cohort compare', () => {
  it('compares cohorts, controls and published records on the cells they share, with paired intervals', async () => {
    const args = ['cohort', 'compare', cohort, copy, '--controls', join(cohort, 'controls'), '--published', published, '--out', out];
    const run = await cliProcess(args, ROOT);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^four B=4 \(2 condition\(s\), 2 source\(s\)\):$/m);
    const comparison = json();
    const names = comparison.methods.map((m: { name: string }) => m.name);
    // a copy keeps the cohort's labels and name (fixed in cohort.json at its creation)
    expect(names.slice(0, 2)).toEqual([PAIR, COPY]);
    expect(names).toContain('design_degree2');
    // seeds is in every method but the published file: its cells are said, not averaged
    expect(comparison.cells.map((c: any) => [c.track, c.budget, c.conditions])).toEqual([
      ['four', 4, ['concrete', 'wine']],
      ['four', 8, ['concrete', 'wine']],
    ]);
    const unshared = comparison.not_shared.filter((n: any) => n.method === PAIR);
    expect(unshared.map((n: any) => [n.condition, n.budget, n.missing_from])).toEqual([
      ['seeds', 4, [PUBLISHED]],
      ['seeds', 8, [PUBLISHED]],
    ]);
    for (const cell of comparison.cells) {
      const pair = (a: string, b: string) => cell.differences.find((d: any) => d.a === a && d.b === b);
      // two identical cohorts: exactly 0 on every draw
      expect(pair(PAIR, COPY)).toMatchObject({ difference: 0, interval: [0, 0] });
      // the agent buys the degree-2 design and fits its table: equal to that control, draw for draw
      expect(pair(PAIR, 'design_degree2')).toMatchObject({ difference: 0, interval: [0, 0] });
      expect(cell.methods[PUBLISHED].recovery).toBe(cell.methods[PAIR].recovery);
      for (const m of Object.values(cell.methods) as any[]) {
        expect(m.interval[0]).toBeLessThanOrEqual(m.recovery);
        expect(m.interval[1]).toBeGreaterThanOrEqual(m.recovery);
      }
    }
    // nothing written into what was read
    expect(existsSync(join(cohort, 'compare.json'))).toBe(false);
    expect(readFileSync(join(cohort, 'results.jsonl'))).toEqual(readFileSync(join(copy, 'results.jsonl')));
  }, 300_000);

  it('compares four cohorts in one command: every pair on the same draws, a ranking, the cells not shared said', async () => {
    const four = join(dir, 'four');
    const cohorts = [cohort, join(dir, 'random'), join(dir, 'constant'), copy];
    const run = await cliProcess(['cohort', 'compare', ...cohorts, '--out', four], ROOT);
    expect(run.code, run.stderr).toBe(0);
    const comparison = JSON.parse(readFileSync(join(four, 'compare.json'), 'utf8'));
    expect(comparison.methods.map((m: any) => [m.name, m.kind])).toEqual([
      [PAIR, 'cohort'],
      ['random', 'cohort'],
      ['constant', 'cohort'],
      [COPY, 'cohort'],
    ]);
    for (const cell of comparison.cells) {
      expect(cell.conditions).toEqual(['concrete', 'wine']);
      expect(cell.differences).toHaveLength(6);
      expect(cell.ranking).toHaveLength(4);
      expect(cell.differences.find((d: any) => d.a === PAIR && d.b === COPY)).toMatchObject({ difference: 0, interval: [0, 0] });
    }
    // seeds: the two pair_ridge cohorts have it, random and constant do not
    expect(new Set(comparison.not_shared.map((n: any) => n.condition))).toEqual(new Set(['seeds']));
    expect(comparison.ranking.map((r: any) => r.method).sort()).toEqual([PAIR, COPY, 'constant', 'random'].sort());
  }, 120_000);

  it("one cell's intervals, recomputed from the results files by an independent script, agree", async () => {
    const comparison = json();
    const cell = comparison.cells.find((c: any) => c.budget === 8);
    const script = join(ROOT, 'test', 'support', 'compare_interval.py');
    const { resamples, seed } = comparison.bootstrap;
    const { stdout } = await execa(join(ROOT, '.venv', 'bin', 'python'), [
      script,
      join(cohort, 'results.jsonl'),
      `${join(cohort, 'controls', 'records.jsonl')}:design_degree1`,
      'four',
      '8',
      String(resamples),
      String(seed),
      'concrete,wine',
    ]);
    const again = JSON.parse(stdout);
    const close = (a: number[], b: number[]) => {
      for (const [k, x] of a.entries()) expect(x).toBeCloseTo(b[k]!, 12);
    };
    close(cell.methods[PAIR].interval, again.a);
    close(cell.methods.design_degree1.interval, again.b);
    close(cell.differences.find((d: any) => d.a === PAIR && d.b === 'design_degree1').interval, again.difference);
  }, 60_000);

  it('writes tables to paste: Markdown and LaTeX with 3 significant digits and intervals, CSV with every digit', () => {
    const comparison = json();
    const cell = comparison.cells[0];
    const m = cell.methods.design_degree1;
    const shown = `${significant(m.recovery)} [${significant(m.interval[0])}, ${significant(m.interval[1])}]`;
    expect(readFileSync(join(out, 'compare.md'), 'utf8')).toContain(`| design_degree1 | ${shown} |`);
    expect(readFileSync(join(out, 'compare.tex'), 'utf8')).toContain(
      `design\\_degree1 & ${shown.replace(/(^|[\s[(])-(?=\d)/g, '$1$-$')} &`,
    );
    const csv = readFileSync(join(out, 'compare.csv'), 'utf8').split('\n');
    expect(csv[0]).toBe(
      'track,budget,method,kind,recovery,recovery_low,recovery_high,rank,rows,delivered_rate,conditions,sources,families',
    );
    const row = csv.find((l) => l.startsWith(`four,${cell.budget},design_degree1,control,`))!.split(',');
    expect(Number(row[4])).toBe(m.recovery);
  });

  it.skipIf(!existsSync(CHROMIUM))(
    'renders in headless Chromium: figures loaded, no console error, tables equal compare.json',
    async () => {
      const page = await renderedPage(join(out, 'report.html'));
      expect(page.console).toEqual([]);
      const body = /<body([^>]*)>/.exec(page.dom)![1]!;
      expect(body).toContain('data-errors="[]"');
      const figures = /data-figures="(\d+)"/.exec(body)![1];
      expect(Number(figures)).toBeGreaterThan(0);
      expect(body).toContain(`data-figures-loaded="${figures}"`);
      const comparison = json();
      const cells = [...page.dom.matchAll(/<td data-kind="(recovery|difference)"([^>]*)>([^<]*)/g)];
      expect(cells.length).toBe(
        comparison.cells.reduce((n: number, c: any) => n + Object.keys(c.methods).length + c.differences.length, 0),
      );
      for (const [, kind, attrs, text] of cells) {
        const attr = (name: string) => new RegExp(`data-${name}="([^"]*)"`).exec(attrs!)![1]!.replace(/&amp;/g, '&');
        const cell = comparison.cells.find((c: any) => c.track === attr('track') && c.budget === Number(attr('budget')));
        const value =
          kind === 'recovery'
            ? cell.methods[attr('method')].recovery
            : cell.differences.find((d: any) => d.a === attr('a') && d.b === attr('b')).difference;
        expect(Number(attr('value'))).toBe(value);
        expect(text!.trim()).toBe(significant(value, kind === 'difference'));
      }
    },
    120_000,
  );

  it('counts a published run once (a second copy left out, said); a record whose model is no name is refused', async () => {
    const lines = readFileSync(published, 'utf8').split('\n').filter(Boolean);
    const copies = join(dir, 'copies.jsonl');
    writeFileSync(copies, `${[lines[0], lines[0], lines[0], ...lines.slice(1)].join('\n')}\n`);
    const once = join(dir, 'compare-once');
    const twice = join(dir, 'compare-copies');
    expect((await cliProcess(['cohort', 'compare', cohort, '--published', published, '--out', once], ROOT)).code).toBe(0);
    const run = await cliProcess(['cohort', 'compare', cohort, '--published', copies, '--out', twice], ROOT);
    expect(run.code, run.stderr).toBe(0);
    const [a, b] = [once, twice].map((d) => JSON.parse(readFileSync(join(d, 'compare.json'), 'utf8')));
    // the same numbers (the published method named by its file: published.jsonl, copies.jsonl)
    const numbers = (c: any) => c.cells.map((cell: any) => Object.values(cell.methods).map((m: any) => [m.recovery, m.interval, m.rows]));
    expect(numbers(b)).toEqual(numbers(a));
    expect(b.left_out.map((l: any) => l.why)).toEqual(
      Array(2).fill("a second copy of record 1's run (same model, cohort, condition, budget and repeat)"),
    );
    const named = join(dir, 'model-object.jsonl');
    writeFileSync(named, `${JSON.stringify({ ...JSON.parse(lines[0]!), model: { name: 'x' } })}\n`);
    const refused = await cliProcess(['cohort', 'compare', cohort, '--published', named, '--out', join(dir, 'compare-model')], ROOT);
    expect([refused.code, refused.stderr.trim()]).toEqual([2, `wwref: published agent-record file ${named}, record 1: "model" is no name`]);
    expect(existsSync(join(dir, 'compare-model'))).toBe(false);
  }, 120_000);

  it('refuses, in one line: one method, an unknown folder, --out inside what is read', async () => {
    const refused = async (args: string[], pattern: RegExp) => {
      const run = await cliProcess(args, ROOT);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
      expect(run.stderr).toMatch(pattern);
    };
    await refused(['cohort', 'compare', cohort, '--out', join(dir, 'one')], /nothing to compare: 1 method/);
    await refused(['cohort', 'compare', cohort, join(dir, 'nowhere'), '--out', join(dir, 'two')], /nowhere/);
    await refused(['cohort', 'compare', cohort, copy, '--out', join(cohort, 'inside')], /--out/);
  }, 120_000);
});
