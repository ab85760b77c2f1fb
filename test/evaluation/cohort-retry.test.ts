// `wwref cohort run` as a researcher meets it when things go wrong and are put right, with real agent
// processes: a Python agent that raises inside an asyncio TaskGroup (Python prints an exception group,
// whose frame borders end its stderr) delivers nothing: the run exits non-zero with one line naming
// the exception; the agent fixed (the example pair-ridge agent, once a flag file exists),
// `--retry-undelivered` plays the undelivered episodes again; more `--repeats` extend the cohort; the
// family-macro table and the comparison report with the controls are written at the end of every run.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { significant } from '../../pipelines/evaluation/compare/tables.ts';
import { cliProcess } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-cohort-retry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

beforeAll(async () => {
  // the example agents' environment (idempotent: a stamp of its requirements)
  await execa('bash', [join(ROOT, 'scripts', 'setup-agents')], { cwd: ROOT });
}, 600_000);

const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

/** An agent whose calculation fails inside a TaskGroup: Python reports an ExceptionGroup framed in borders. */
const FAILING = `import asyncio

async def calculate():
    raise ValueError("the calculation failed: no column 'yield'")

async def main():
    async with asyncio.TaskGroup() as group:
        group.create_task(calculate())

asyncio.run(main())
`;

describe('a cohort whose agent fails, then is fixed', () => {
  const out = join(dir, 'cohort');
  const flag = join(dir, 'fixed');
  const failing = join(dir, 'failing.py');
  const python = 'examples/agents/.venv/bin/python';
  const agent = `if test -f ${flag}; then exec ${python} examples/agents/pair_ridge.py; else exec ${python} ${failing}; fi`;
  const args = (repeats: number, ...more: string[]) => [
    'cohort',
    'run',
    '--agent',
    agent,
    '--out',
    out,
    '--condition',
    'wine',
    'concrete',
    '--budget',
    '4',
    '--repeats',
    String(repeats),
    '--label',
    'agent=pair_ridge',
    ...more,
  ];

  it('0/N exits 1 with one line quoting the exception; --retry-undelivered gives N/N; the table and the report are written', async () => {
    writeFileSync(failing, FAILING);
    const broken = await cliProcess(args(1), ROOT);
    expect(broken.code, broken.stderr).toBe(1);
    const stderr = readFileSync(join(out, 'episodes', 'wine__b4__r0', 'agent.stderr'), 'utf8');
    // Python did frame it as an exception group: the line quoted is the one inside the frame
    expect(stderr).toMatch(/^\s*\+-\+-+ 1 -+$/m);
    expect(stderr.trimEnd().split('\n').at(-1)).toMatch(/^\s*\+-+$/);
    const exception = "ValueError: the calculation failed: no column 'yield'";
    expect(broken.stderr).toContain(
      `cohort: wine__b4__r0 undelivered: the agent exited with status 1 without submitting; its stderr ends: ${JSON.stringify(exception)} (`,
    );
    expect(broken.stderr.trimEnd().split('\n').at(-1)).toBe(
      `cohort: no episode delivered: 2 undelivered; the most common reason (2 of them): the agent exited with status 1 without submitting; its stderr ends: ${JSON.stringify(exception)}`,
    );
    // the summaries are written all the same
    expect(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'))).toMatchObject({ episodes: 2, delivered: 0 });
    expect(lines(join(out, 'results.jsonl')).map((r) => r.artifact_valid)).toEqual([false, false]);

    // the agent fixed: the same command says how to play them again, and --retry-undelivered does
    writeFileSync(flag, '');
    const retry = await cliProcess(args(1, '--retry-undelivered'), ROOT);
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stderr).toContain('--retry-undelivered: 2 undelivered episode(s) played again');
    expect(retry.stderr).not.toMatch(/line\(s\) of .* left out/);
    const results = lines(join(out, 'results.jsonl'));
    expect(results.map((r) => [r.episode, r.artifact_valid])).toEqual([
      ['wine__b4__r0', true],
      ['concrete__b4__r0', true],
    ]);
    // the old folders are kept, each with the failed run's stderr
    const kept = readdirSync(join(out, 'retried')).sort();
    expect(kept.map((f) => f.replace(/\.\d+(\.[0-9a-f]+)?$/, ''))).toEqual(['concrete__b4__r0', 'wine__b4__r0']);
    expect(readFileSync(join(out, 'retried', kept[1]!, 'agent.stderr'), 'utf8')).toContain('ExceptionGroup');

    // the terminal's table: the agent's recovery and its gain over each control, as compare.json has them
    const compare = JSON.parse(readFileSync(join(out, 'report', 'compare.json'), 'utf8'));
    expect(compare.methods.map((m: { name: string }) => m.name)).toContain('pair_ridge');
    const [cell] = compare.cells;
    expect([cell.track, cell.budget, cell.conditions]).toEqual(['four', 4, ['concrete', 'wine']]);
    const own = cell.methods.pair_ridge;
    const span = (i: number[], signed = false) => `[${significant(i[0]!, signed)}, ${significant(i[1]!, signed)}]`;
    expect(retry.stdout).toContain(
      `four B=4 (2 condition(s), 2 source(s)): pair_ridge ${significant(own.recovery)} ${span(own.interval)}\n`,
    );
    // the example agent is the pair-effect design: its gain over that control is exactly 0
    expect(retry.stdout).toContain('  gain over design_degree2: 0.00 [0.00, 0.00]\n');
    const controls = Object.keys(cell.methods).filter((m) => m !== 'pair_ridge');
    expect(controls.length).toBeGreaterThan(2);
    for (const control of controls) {
      const pair = cell.differences.find(
        (d: any) => (d.a === 'pair_ridge' && d.b === control) || (d.b === 'pair_ridge' && d.a === control),
      );
      const sign = pair.a === 'pair_ridge' ? 1 : -1;
      const interval = sign > 0 ? pair.interval : [-pair.interval[1], -pair.interval[0]];
      expect(retry.stdout).toContain(`  gain over ${control}: ${significant(sign * pair.difference, true)} ${span(interval, true)}\n`);
    }
    for (const f of ['report.html', 'compare.md', 'compare.tex', 'compare.csv', 'differences.csv', 'compare-recovery.svg'])
      expect(existsSync(join(out, 'report', f)), f).toBe(true);
    expect(readFileSync(join(out, 'report', 'compare.md'), 'utf8')).toContain('pair_ridge');
    expect(retry.stdout).toContain(`report: ${join(out, 'report', 'report.html')}`);
  }, 600_000);

  it('more --repeats extend the cohort, running only the new episodes; fewer are refused', async () => {
    const before = readFileSync(join(out, 'results.jsonl'), 'utf8');
    const more = await cliProcess(args(2), ROOT);
    expect(more.code, more.stderr).toBe(0);
    expect(more.stderr).toContain('cohort: extended from 1 to 2 repeat(s)');
    expect(more.stderr).toContain('resuming: 2 of 4 episode(s) finished');
    expect(more.stdout).toContain('4 episode(s) (4 delivered, 2 from an earlier run)');
    const results = lines(join(out, 'results.jsonl'));
    expect(results.map((r) => r.episode)).toEqual(['wine__b4__r0', 'wine__b4__r1', 'concrete__b4__r0', 'concrete__b4__r1']);
    // the earlier lines are kept as they were (each checked again against its receipt)
    for (const line of before.split('\n').filter(Boolean)) expect(readFileSync(join(out, 'results.jsonl'), 'utf8')).toContain(line);
    expect(JSON.parse(readFileSync(join(out, 'cohort.json'), 'utf8')).definition.repeats).toBe(2);
    expect(existsSync(join(out, 'interrupted'))).toBe(false);

    const fewer = await cliProcess(args(1), ROOT);
    expect(fewer.code).toBe(2);
    expect(fewer.stderr.trim().split('\n')).toEqual([
      `wwref: --repeats 1: the cohort in ${out} has 2 repeats; a cohort is extended, never shortened (--repeats 2 or more); if an agent edited it, remove cohort.json and run again: the folder is then checked episode by episode against this cohort`,
    ]);

    // a folder holding its report is still a cohort's: without cohort.json it is taken as this one, every line kept
    rmSync(join(out, 'cohort.json'));
    const adopted = await cliProcess(args(2), ROOT);
    expect(adopted.code, adopted.stderr).toBe(0);
    expect(adopted.stderr).toContain('taken as this cohort');
    expect(adopted.stdout).toContain('4 from an earlier run');
  }, 600_000);
});

it('a condition typo is refused with the closest condition ids', async () => {
  const run = await cliProcess(['cohort', 'run', '--agent', 'true', '--out', join(dir, 'typo'), '--condition', 'wnie'], ROOT);
  expect(run.code).toBe(2);
  expect(run.stderr.trim().split('\n')).toHaveLength(1);
  expect(run.stderr).toContain("unknown condition 'wnie' (did you mean wine? see 'wwref list' for the catalog)");
  expect(existsSync(join(dir, 'typo'))).toBe(false);
  const controls = await cliProcess(['controls', 'run', '--condition', 'concret', '--out', join(dir, 'typo-controls')], ROOT);
  expect(controls.code).toBe(2);
  expect(controls.stderr).toContain("unknown condition 'concret' (did you mean concrete? see");
}, 120_000);
