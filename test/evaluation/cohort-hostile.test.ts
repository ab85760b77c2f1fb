// A summary reads only lines wwref can vouch for, whatever an agent does to the cohort's folder (an
// agent runs as the user: it can write results.jsonl, its receipt, its siblings' folders, cohort.json).
// Real agents (test/support/hostile-agent.mjs, node), the real server and controls worker, real files:
// a forged results line, a line for an episode that never ran, a left process that deletes the
// cohort's line and garbles the receipt, FIFOs where the cohort reads, Python workers killed, folders
// and links planted where episodes go, the reference manifest changed mid-run, a figure that cannot be
// drawn, a resume from another folder, an edited cohort.json.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { plannedEpisodes } from '../../pipelines/evaluation/cohort/plan.ts';
import type { StoredResult } from '../../pipelines/evaluation/cohort/results.ts';
import { cohortCells } from '../../pipelines/evaluation/cohort/summary.ts';
import { readVerifiedCohort } from '../../pipelines/evaluation/cohort/verified.ts';
import { currentSettings } from '../support/workspace.ts';
import { BIN } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-cohort-hostile-'));
const leftPids: number[] = [];
afterAll(() => {
  for (const pid of leftPids)
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  rmSync(dir, { recursive: true, force: true });
});

const AGENT = join(ROOT, 'test', 'support', 'hostile-agent.mjs');
/** The controls of wine at B = 4, computed once (every cohort below takes them with --controls). */
const CONTROLS = join(dir, 'controls-source');

/** `wwref cohort run` as a process, stopped (and failed) after `seconds`: a hang is a failure, not a stuck test. */
async function cohort(args: string[], cwd = ROOT, seconds = 120) {
  const run = await execa('node', [BIN, 'cohort', 'run', ...args], { cwd, reject: false, timeout: seconds * 1000, killSignal: 'SIGKILL' });
  return { code: run.exitCode ?? -1, stdout: String(run.stdout), stderr: String(run.stderr), timedOut: run.timedOut };
}
const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);
const summaryOf = (out: string) => JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
const base = (mode: string, out: string, more: string[] = []) => [
  '--agent',
  `node ${AGENT} ${mode} ${more.join(' ')}`.trim(),
  '--out',
  out,
  '--condition',
  'wine',
  '--budget',
  '4',
  '--controls',
  join(CONTROLS, 'controls'),
];

beforeAll(async () => {
  const run = await cohort(['--agent', 'true', '--out', CONTROLS, '--condition', 'wine', '--budget', '4']);
  // nothing delivered: status 1, the controls and summaries written all the same
  expect(run.code, run.stderr).toBe(1);
  expect(existsSync(join(CONTROLS, 'controls', 'records.jsonl'))).toBe(true);
}, 300_000);

describe('results lines an agent writes', () => {
  const out = join(dir, 'forge');
  const args = () => [...base('forge', out), '--repeats', '2'];

  it("a forged line put before the cohort's own is left out: the cell holds what wwref computed", async () => {
    const run = await cohort(args());
    expect(run.code, run.stderr).toBe(0);
    const results = lines(join(out, 'results.jsonl'));
    expect(results.map((r) => [r.episode, r.family, r.artifact_valid])).toEqual([
      ['wine__b4__r0', 'clustering', true],
      ['wine__b4__r1', 'clustering', false],
    ]);
    expect(results[0]!.shared_gp_score.effect_recovery).not.toBe(0.99);
    expect(run.stderr).toMatch(/1 line\(s\) of .*results\.jsonl left out/);
    const summary = summaryOf(out);
    expect(summary.family_macro[0].families).toBe(1);
    const cell = summary.cells[0];
    expect([cell.planned, cell.episodes, cell.left_out]).toEqual([2, 2, []]);
    expect(cell.shared_gp_recovery).toBe((results[0]!.shared_gp_score.effect_recovery + results[1]!.shared_gp_score.effect_recovery) / 2);
  }, 180_000);

  it('on resume, a forged copy before the real line is left out and the file keeps the real one', async () => {
    const before = readFileSync(join(out, 'results.jsonl'), 'utf8');
    const [first] = before.split('\n');
    const forged = JSON.parse(first!);
    forged.family = 'forged';
    writeFileSync(join(out, 'results.jsonl'), `${JSON.stringify(forged)}\n${before}`);
    const run = await cohort(args());
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('resuming: 2 of 2 episode(s) finished, 1 line(s)');
    expect(readFileSync(join(out, 'results.jsonl'), 'utf8')).toBe(before);
    expect(lines(join(out, 'results.jsonl')).map((r) => r.family)).toEqual(['clustering', 'clustering']);
  }, 180_000);

  it('a line for an episode that never ran (no receipt) does not count as finished: the episode runs', async () => {
    const text = readFileSync(join(out, 'results.jsonl'), 'utf8').split('\n').filter(Boolean);
    const r1 = JSON.parse(text[1]!);
    r1.undelivered_reason = 'the episode receipt is unusable: invented';
    rmSync(join(out, 'episodes', 'wine__b4__r1'), { recursive: true });
    writeFileSync(join(out, 'results.jsonl'), `${text[0]}\n${JSON.stringify(r1)}\n`);
    const run = await cohort(args());
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('resuming: 1 of 2 episode(s) finished, 1 line(s)');
    expect(run.stdout).toMatch(/2 episode\(s\) \(1 delivered, 1 from an earlier run\)/);
    expect(existsSync(join(out, 'episodes', 'wine__b4__r1', 'events.jsonl'))).toBe(true);
    expect(lines(join(out, 'results.jsonl'))[1]!.undelivered_reason).toBe('the agent exited without submitting');
  }, 180_000);

  it('another command reading the folder (cohort compare) gets the same lines, never the forged one', async () => {
    const text = readFileSync(join(out, 'results.jsonl'), 'utf8');
    const forged = JSON.parse(text.split('\n')[0]!);
    forged.shared_gp_score.effect_recovery = 0.99;
    writeFileSync(join(out, 'results.jsonl'), `${JSON.stringify(forged)}\n${text}`);
    const said: string[] = [];
    const cohortRead = await readVerifiedCohort(currentSettings(), out, (line) => said.push(line));
    expect(cohortRead.results).toEqual(lines(join(out, 'results.jsonl')).slice(1));
    expect([cohortRead.name, cohortRead.leftOut.size, said.length]).toEqual(['forge', 0, 1]);
    expect(readFileSync(join(out, 'results.jsonl'), 'utf8')).toBe(`${JSON.stringify(forged)}\n${text}`); // nothing written
    // a folder copied elsewhere (another name: its records keep the cohort's first name) is read the same
    const moved = join(dir, 'forge-moved');
    cpSync(out, moved, { recursive: true });
    const again = await readVerifiedCohort(currentSettings(), moved, () => {});
    expect([again.results, again.leftOut.size]).toEqual([cohortRead.results, 0]);
  }, 120_000);
});

it('a cell that would mix two reference tables is refused, naming both', () => {
  const out = join(dir, 'forge');
  const definition = JSON.parse(readFileSync(join(out, 'cohort.json'), 'utf8')).definition;
  const [a, b] = lines(join(out, 'results.jsonl')).slice(-2); // the two real lines (a forged one may precede them)
  const cohortTable = String(definition.conditions[0].reference.table_sha256).slice(0, 12);
  b!.reference = { ...b!.reference, table_sha256: 'e'.repeat(64) };
  expect(() => cohortCells(plannedEpisodes(definition), [a, b] as StoredResult[], [])).toThrow(
    `the cell wine B=4 would mix two reference tables: wine__b4__r1 on eeeeeeeeeeee…, the cohort's ${cohortTable}…; refused`,
  );
});

describe('an agent that leaves a process behind', () => {
  it("the cohort's own undelivered line counts though the left process deletes it and garbles the receipt", async () => {
    const out = join(dir, 'leftover');
    const pidFile = join(dir, 'leftover.pid');
    const args = [...base('leftover', out, [pidFile]), '--repeats', '2'];
    const run = await cohort(args);
    if (existsSync(pidFile)) leftPids.push(Number(readFileSync(pidFile, 'utf8')));
    expect(run.code, run.stderr).toBe(0);
    const summary = summaryOf(out);
    expect([summary.cells[0].episodes, summary.cells[0].delivered]).toEqual([2, 1]);
    expect(lines(join(out, 'results.jsonl')).map((r) => r.episode)).toEqual(['wine__b4__r0', 'wine__b4__r1']);
    // the receipt the left process garbled no longer vouches for the line: a resume plays the episode again
    for (let k = 0; k < 100 && !readFileSync(join(out, 'episodes', 'wine__b4__r0', 'events.jsonl'), 'utf8').includes('not json'); k++)
      await new Promise((r) => setTimeout(r, 100));
    const again = await cohort(args);
    if (existsSync(pidFile)) leftPids.push(Number(readFileSync(pidFile, 'utf8')));
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain('resuming: 1 of 2 episode(s) finished');
    expect(summaryOf(out).cells[0].episodes).toBe(2);
  }, 240_000);
});

describe('files an agent swaps for FIFOs', () => {
  it('FIFOs at episode.json, agent.stderr and agent.group block nothing: the episode is recorded, the cohort goes on', async () => {
    const out = join(dir, 'fifo');
    const run = await cohort([...base('fifo', out), '--repeats', '2'], ROOT, 90);
    expect(run.timedOut, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(0);
    const results = lines(join(out, 'results.jsonl'));
    expect(results.map((r) => [r.episode, r.artifact_valid])).toEqual([
      ['wine__b4__r0', false],
      ['wine__b4__r1', true],
    ]);
    expect(results[0]!.undelivered_reason).toBeTypeOf('string');
  }, 120_000);

  it('a FIFO at agent.group of a killed run does not block its resume', async () => {
    const out = join(dir, 'fifo-hang');
    const quick = join(dir, 'fifo-hang-marks', 'quick');
    mkdirSync(join(dir, 'fifo-hang-marks'));
    const args = base('fifo-hang', out, [quick]);
    const first = spawn(process.execPath, [BIN, 'cohort', 'run', ...args], { cwd: ROOT, stdio: 'ignore' });
    const pids = join(dir, 'fifo-hang-marks', 'pids');
    for (let k = 0; k < 600 && !existsSync(pids); k++) await new Promise((r) => setTimeout(r, 100));
    const agentPid = Number(readFileSync(pids, 'utf8').trim());
    leftPids.push(agentPid);
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    expect(lstatSync(join(out, 'episodes', 'wine__b4__r0', 'agent.group')).isFIFO()).toBe(true);
    writeFileSync(quick, '');
    const resumed = await cohort(args, ROOT, 90);
    expect(resumed.timedOut, resumed.stderr).toBe(false);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(lines(join(out, 'results.jsonl')).map((r) => r.artifact_valid)).toEqual([true]);
  }, 180_000);
});

describe('faults around the episodes', () => {
  it('Python workers killed by an agent: the shared estimators are fitted by a worker started again, every episode recorded', async () => {
    const out = join(dir, 'kill-workers');
    const run = await cohort([...base('kill-workers', out), '--repeats', '2']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toMatch(/\n\s+at /);
    expect(run.stderr).toContain('the controls worker fitting the shared estimators ended');
    const results = lines(join(out, 'results.jsonl'));
    expect(results.map((r) => r.artifact_valid)).toEqual([true, true]);
    for (const r of results) expect(r.shared_gp_score.effect_recovery).toBeTypeOf('number');
  }, 180_000);

  it('Python workers killed while the controls are computed: the controls start again, the summary holds them', async () => {
    const out = join(dir, 'kill-controls');
    const args = [
      '--agent',
      `node ${AGENT} kill-workers`,
      '--out',
      out,
      '--condition',
      'wine',
      'concrete',
      '--budget',
      '4',
      '--repeats',
      '2',
    ];
    const run = await cohort(args);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toMatch(/\n\s+at /);
    const summary = summaryOf(out);
    expect([summary.episodes, summary.delivered]).toEqual([4, 4]);
    for (const cell of summary.cells) expect(Object.keys(cell.controls)).toContain('design_degree2');
  }, 180_000);

  it('a number beyond float64 written into a receipt: the episode is recorded undelivered, never a stack trace, here or on resume', async () => {
    const out = join(dir, 'infinite');
    const args = [...base('infinite', out), '--repeats', '2'];
    for (const expected of [/2 episode\(s\) \(1 delivered\)/, /2 episode\(s\) \(1 delivered, 2 from an earlier run\)/]) {
      const run = await cohort(args);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).not.toMatch(/\n\s+at |non-finite/);
      expect(run.stdout).toMatch(expected);
      const results = lines(join(out, 'results.jsonl'));
      expect(results[0]!.undelivered_reason).toMatch(/^the episode receipt is unusable: /);
      expect(results.map((r) => r.artifact_valid)).toEqual([false, true]);
    }
  }, 180_000);

  it("an episode's folder planted by a sibling is set aside, a link there is never followed", async () => {
    const out = join(dir, 'plant');
    const victim = join(dir, 'victim');
    mkdirSync(victim);
    const run = await cohort([...base('plant', out, [victim]), '--repeats', '3']);
    expect(run.code, run.stderr).toBe(0);
    expect(readdirSync(victim)).toEqual([]);
    expect(lines(join(out, 'results.jsonl')).map((r) => r.artifact_valid)).toEqual([true, true, true]);
    expect(run.stderr).toContain('wine__b4__r1: something was already at');
    expect(readdirSync(join(out, 'interrupted')).filter((f) => f.includes('.planted.')).length).toBe(2);
    for (const id of ['wine__b4__r1', 'wine__b4__r2']) expect(lstatSync(join(out, 'episodes', id)).isDirectory()).toBe(true);
  }, 180_000);

  it('the reference manifest changed mid-run: no episode is scored or played on the other one; the cell says which were left out and why', async () => {
    const references = join(dir, 'references');
    cpSync(join(ROOT, 'outputs', 'references'), references, { recursive: true });
    const out = join(dir, 'swap');
    const args = [...base('swap-ref', out, [join(references, 'manifest.json')]), '--repeats', '2', '--references', references];
    const run = await cohort(args);
    expect(run.code, run.stderr).toBe(1); // nothing delivered; the summaries are written all the same
    expect(run.stderr.trimEnd().split('\n').at(-1)).toMatch(
      /^cohort: no episode delivered: 2 undelivered; the most common reason \(1 of them\): the reference of wine .* changed since the cohort started/,
    );
    expect(existsSync(join(out, 'results.jsonl')) ? lines(join(out, 'results.jsonl')) : []).toEqual([]);
    const cell = summaryOf(out).cells[0];
    expect([cell.planned, cell.episodes, cell.recovery_mean]).toEqual([2, 0, null]);
    expect(cell.left_out.map((l: { episode: string }) => l.episode)).toEqual(['wine__b4__r0', 'wine__b4__r1']);
    for (const l of cell.left_out) expect(l.reason).toContain('the reference of wine');
    expect(readFileSync(join(out, 'summary.csv'), 'utf8')).toContain('changed since the cohort started');
  }, 180_000);

  it('a figure that cannot be drawn is a warning; a label with $ is drawn', async () => {
    const out = join(dir, 'figure');
    const run = await cohort([...base('block-figure', out), '--label', 'agent=cost $\\alpha$ and $5']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/cohort: warning: the recovery figure could not be drawn/);
    expect(summaryOf(out).delivered).toBe(1);
    rmSync(join(out, 'cohort-recovery.svg'), { recursive: true });
    const again = await cohort([...base('block-figure', out), '--label', 'agent=cost $\\alpha$ and $5']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).not.toContain('warning');
    expect(readFileSync(join(out, 'cohort-recovery.svg'), 'utf8')).toContain('<svg');
  }, 180_000);
});

describe('the cohort folder itself', () => {
  it('a resume from another working folder runs the agent where the cohort started; an edited cohort.json has a way out', async () => {
    const home = join(dir, 'home');
    mkdirSync(home);
    writeFileSync(join(home, 'agent.sh'), '#!/bin/sh\nexit 0\n');
    const out = join(dir, 'relative');
    const args = ['--agent', 'sh agent.sh', '--out', out, '--condition', 'wine', '--budget', '4', '--controls', join(CONTROLS, 'controls')];
    const first = await cohort(args, home);
    expect(first.code, first.stderr).toBe(1); // nothing delivered
    expect(first.stderr.trimEnd().split('\n').at(-1)).toBe(
      'cohort: no episode delivered: 1 undelivered; the most common reason (1 of them): the agent exited without submitting',
    );
    expect(lines(join(out, 'results.jsonl'))[0]!.undelivered_reason).toBe('the agent exited without submitting');
    // the line removed: the resume, from the checkout, plays the episode again, in `home`
    writeFileSync(join(out, 'results.jsonl'), '');
    const resumed = await cohort(args, ROOT);
    expect(resumed.code, resumed.stderr).toBe(1);
    expect(resumed.stderr).toContain(`cohort: the agents run in ${home}, where this cohort was started`);
    expect(lines(join(out, 'results.jsonl'))[0]!.undelivered_reason).toBe('the agent exited without submitting');
    // an agent edits cohort.json: refused with one line and the way out, which keeps the finished episode
    const file = join(out, 'cohort.json');
    writeFileSync(file, readFileSync(file, 'utf8').replace('"repeats": 1', '"repeats": 7'));
    const edited = await cohort(args, home);
    expect(edited.code).toBe(2);
    expect(edited.stderr.trim().split('\n')).toHaveLength(1);
    expect(edited.stderr).toContain('if an agent edited it, remove cohort.json and run again');
    writeFileSync(file, '{"definition": 1e999}');
    const garbled = await cohort(args, home);
    expect([garbled.code, garbled.stderr.trim().split('\n').length], garbled.stderr).toEqual([2, 1]);
    rmSync(file);
    const adopted = await cohort(args, home);
    expect(adopted.code, adopted.stderr).toBe(1);
    expect(adopted.stderr).toContain('taken as this cohort');
    expect(adopted.stdout).toMatch(/1 episode\(s\) \(0 delivered, 1 from an earlier run\)/);
  }, 240_000);
});
