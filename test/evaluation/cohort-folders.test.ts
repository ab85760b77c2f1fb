// The cohort's own folders inside OUT (report/, controls/), which an agent running as the user can
// replace between runs or while one runs: a link is never followed (nothing is written where it
// points), a FIFO or a file at the name never blocks nor stops the cohort; whatever was put there is
// set aside under OUT/interrupted/ and the folder made afresh, and the resume finishes (exit 0).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { cliProcess } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-cohort-folders-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const out = join(dir, 'cohort');
const victim = join(dir, 'victim');
const args = [
  'cohort',
  'run',
  '--agent',
  'examples/agents/.venv/bin/python examples/agents/pair_ridge.py',
  '--out',
  out,
  '--condition',
  'wine',
  '--budget',
  '4',
];

beforeAll(async () => {
  await execa('bash', [join(ROOT, 'scripts', 'setup-agents')], { cwd: ROOT });
  const run = await cliProcess(args, ROOT);
  if (run.code !== 0) throw new Error(`the cohort did not run: ${run.stderr}`);
  mkdirSync(victim);
}, 600_000);

const setAside = (name: string) => readdirSync(join(out, 'interrupted')).filter((f) => f.startsWith(`${name}.`));

describe("a cohort's own folders", () => {
  it('report/ a link, controls/run.json a FIFO: the link not followed, both set aside, the resume finishes', async () => {
    rmSync(join(out, 'report'), { recursive: true });
    symlinkSync(victim, join(out, 'report'));
    rmSync(join(out, 'controls', 'run.json'));
    execFileSync('mkfifo', [join(out, 'controls', 'run.json')]);
    const run = await cliProcess(args, ROOT);
    expect(run.code, run.stderr).toBe(0);
    expect(readdirSync(victim)).toEqual([]);
    expect(run.stderr).toMatch(/report was no folder of the cohort \(a link, FIFO or file was put there\): set aside as /);
    expect(run.stderr).toMatch(/controls could not be resumed \(.*run\.json.*\): set aside as /);
    expect([setAside('report').length, setAside('controls').length]).toEqual([1, 1]);
    expect(existsSync(join(out, 'report', 'report.html'))).toBe(true);
    expect(existsSync(join(out, 'controls', 'records.jsonl'))).toBe(true);
  }, 300_000);

  it('controls/ a link (to a folder, then dangling) and report/ a FIFO: nothing written through, the resume finishes', async () => {
    rmSync(join(out, 'controls'), { recursive: true });
    symlinkSync(victim, join(out, 'controls'));
    rmSync(join(out, 'report'), { recursive: true });
    execFileSync('mkfifo', [join(out, 'report')]);
    const first = await cliProcess(args, ROOT);
    expect(first.code, first.stderr).toBe(0);
    expect(readdirSync(victim)).toEqual([]);
    rmSync(join(out, 'controls'), { recursive: true });
    symlinkSync(join(dir, 'nowhere'), join(out, 'controls'));
    const second = await cliProcess(args, ROOT);
    expect(second.code, second.stderr).toBe(0);
    expect(existsSync(join(dir, 'nowhere'))).toBe(false);
    expect([setAside('report').length, setAside('controls').length]).toEqual([2, 3]);
  }, 300_000);

  it('a forged report in report/ (a page, a table, folders at its other names) never outlives the run: the real one replaces it, the table printed', async () => {
    const report = join(out, 'report');
    writeFileSync(join(report, 'report.html'), '<html>FORGED recovery 0.99</html>');
    rmSync(join(report, 'compare.json'));
    mkdirSync(join(report, 'compare.json'));
    const run = await cliProcess(args, ROOT);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^ {2}gain over design_degree2: /m);
    expect(readFileSync(join(report, 'report.html'), 'utf8')).not.toContain('FORGED');
    expect(JSON.parse(readFileSync(join(report, 'compare.json'), 'utf8')).cells).toHaveLength(1);
  }, 300_000);
});
