// What a cohort's results are, whatever is done to its folder (issue 40's red team): a line's `cohort`
// is the name cohort.json fixed at the cohort's creation (a forged one is left out, a copied folder
// keeps verifying); an edited cohort.json is refused by `cohort compare`, and lines of no planned
// episode are listed as left out; a copy of the state an agent broke (a FIFO at episode.json) gives
// the line its log gives, on the run and on resume alike; a folder or FIFO an agent put at
// results.jsonl or summary.json is set aside and the results written. Real agents (node, sh), the real
// server, controls worker and files; wine at B = 4.
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { digest } from '../../pipelines/core/hashing.ts';
import { UNUSABLE_RECEIPT } from '../../pipelines/evaluation/cohort/results.ts';
import { readVerifiedCohort } from '../../pipelines/evaluation/cohort/verified.ts';
import { currentSettings } from '../support/workspace.ts';
import { BIN } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-cohort-integrity-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const HOSTILE = join(ROOT, 'test', 'support', 'hostile-agent.mjs');
/** A finished cohort of two undelivered episodes (agent `true`), with its controls: copied below, its controls reused. */
const ORIGINAL = join(dir, 'original');

async function wwref(args: string[], seconds = 150) {
  const run = await execa('node', [BIN, ...args], { cwd: ROOT, reject: false, timeout: seconds * 1000, killSignal: 'SIGKILL' });
  return { code: run.exitCode ?? -1, stdout: String(run.stdout), stderr: String(run.stderr), timedOut: run.timedOut };
}
const cells = ['--condition', 'wine', '--budget', '4', '--repeats', '2'];
const cohort = (agent: string, out: string, more: string[] = []) =>
  wwref(['cohort', 'run', '--agent', agent, '--out', out, ...cells, ...more]);
const text = (file: string) => readFileSync(file, 'utf8');
const lines = (file: string) =>
  text(file)
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

beforeAll(async () => {
  const run = await cohort('true', ORIGINAL);
  expect(run.code, run.stderr).toBe(1); // nothing delivered
  expect(lines(join(ORIGINAL, 'results.jsonl'))).toHaveLength(2);
}, 300_000);

describe("a line's cohort", () => {
  it('is the name fixed at creation: a copied folder resumes with every line kept, and compares', async () => {
    expect(JSON.parse(text(join(ORIGINAL, 'cohort.json'))).cohort).toBe('original');
    const copy = join(dir, 'copy');
    cpSync(ORIGINAL, copy, { recursive: true });
    const resumed = await cohort('true', copy);
    expect(resumed.code, resumed.stderr).toBe(1);
    expect(resumed.stderr).toContain('resuming: 2 of 2 episode(s) finished');
    expect(resumed.stderr).not.toContain('left out');
    expect(text(join(copy, 'results.jsonl'))).toBe(text(join(ORIGINAL, 'results.jsonl')));
    expect(lines(join(copy, 'results.jsonl')).map((l) => l.cohort)).toEqual(['original', 'original']);
    const compared = await wwref(['cohort', 'compare', copy, '--controls', join(copy, 'controls'), '--out', join(dir, 'compare-copy')]);
    expect(compared.code, compared.stderr).toBe(0);
    const json = JSON.parse(text(join(dir, 'compare-copy', 'compare.json')));
    expect(json.methods.filter((m: any) => m.kind === 'cohort').map((m: any) => [m.name, m.from, m.rows])).toEqual([['original', copy, 2]]);
    expect(json.left_out).toEqual([]);
  }, 240_000);

  it('a line whose only change is its cohort is left out on resume, the episode played again', async () => {
    const forged = join(dir, 'forged');
    cpSync(ORIGINAL, forged, { recursive: true });
    const file = join(forged, 'results.jsonl');
    writeFileSync(file, text(file).replace('"cohort":"original"', '"cohort":"FORGED"'));
    expect(text(file)).toContain('"cohort":"FORGED"');
    const resumed = await cohort('true', forged);
    expect(resumed.code, resumed.stderr).toBe(1);
    expect(resumed.stderr).toContain('resuming: 1 of 2 episode(s) finished, 1 line(s)');
    expect(text(file)).not.toContain('FORGED');
    expect(lines(file).map((l) => [l.episode, l.cohort])).toEqual([
      ['wine__b4__r0', 'original'],
      ['wine__b4__r1', 'original'],
    ]);
  }, 240_000);
});

describe('cohort compare reads cohort.json as written', () => {
  it('an edited definition is refused (one line, naming the file); lines of no planned episode are left out, with why', async () => {
    const edited = join(dir, 'edited');
    cpSync(ORIGINAL, edited, { recursive: true });
    const file = join(edited, 'cohort.json');
    const json = JSON.parse(text(file));
    json.definition.repeats = 1; // definition_sha256 left as it was
    writeFileSync(file, JSON.stringify(json, null, 2));
    const refused = await wwref(['cohort', 'compare', edited, '--out', join(dir, 'compare-edited')]);
    expect(refused.code).toBe(2);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toContain(`cohort file ${file}: its definition is not the one its definition_sha256 records`);
    expect(existsSync(join(dir, 'compare-edited'))).toBe(false);
    // the digest made to match: read, and the line of the episode it no longer plans is listed as left out
    json.definition_sha256 = digest(json.definition);
    writeFileSync(file, JSON.stringify(json, null, 2));
    const read = await readVerifiedCohort(currentSettings(), edited, () => {});
    expect(read.name).toBe('original');
    expect(read.results.map((r) => r.episode)).toEqual(['wine__b4__r0']);
    expect([...read.leftOut]).toEqual([['wine__b4__r1 (line 2)', 'not a planned episode of the definition in cohort.json']]);
    // a cohort.json without the name (an older folder): the folder's name, which these lines were not written under
    delete json.cohort;
    delete json.name_sha256;
    writeFileSync(file, JSON.stringify(json, null, 2));
    const older = await readVerifiedCohort(currentSettings(), edited, () => {});
    expect([older.name, older.results.length, older.leftOut.get('wine__b4__r0')]).toEqual([
      'edited',
      0,
      'not the line its receipt and the plan give',
    ]);
  }, 120_000);
});

describe('an agent breaking the files the cohort writes', () => {
  it('a FIFO at episode.json: the line is the one its log gives, kept on resume (no replay)', async () => {
    const out = join(dir, 'fifo');
    const args = ['--controls', join(ORIGINAL, 'controls')];
    const run = await cohort(`node ${HOSTILE} fifo`, out, args);
    expect(run.timedOut, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(0);
    const first = lines(join(out, 'results.jsonl'));
    expect(first.map((r) => [r.episode, r.artifact_valid, r.undelivered_reason])).toEqual([
      ['wine__b4__r0', false, 'the agent exited with status 1 without submitting'],
      ['wine__b4__r1', true, null],
    ]);
    expect(first[0]!.undelivered_reason).not.toContain(UNUSABLE_RECEIPT);
    expect(run.stderr).toMatch(/wine__b4__r0: its episode\.json could not be used .*: set aside as /);
    const before = text(join(out, 'results.jsonl'));
    const resumed = await cohort(`node ${HOSTILE} fifo`, out, args);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain('resuming: 2 of 2 episode(s) finished');
    expect(resumed.stderr).not.toContain('left out');
    expect(text(join(out, 'results.jsonl'))).toBe(before);
    expect(readdirSync(join(out, 'interrupted')).filter((f) => f.startsWith('wine__b4__r0'))).toEqual([]);
  }, 240_000);

  it('a folder at results.jsonl and summary.json, a FIFO at summary.csv: set aside, the results and summaries written', async () => {
    const agent = join(dir, 'swap-results.mjs');
    writeFileSync(
      agent,
      [
        "import { mkdirSync, rmSync } from 'node:fs';",
        "import { execFileSync } from 'node:child_process';",
        "import { dirname, join } from 'node:path';",
        'const out = dirname(dirname(JSON.parse(process.env.WWREF_MCP_COMMAND).at(-1)));',
        "if (process.env.WWREF_EPISODE_ID.endsWith('__r1')) {",
        "  for (const f of ['results.jsonl', 'summary.json']) { rmSync(join(out, f), { force: true, recursive: true }); mkdirSync(join(out, f, 'x'), { recursive: true }); }",
        "  rmSync(join(out, 'summary.csv'), { force: true }); execFileSync('mkfifo', [join(out, 'summary.csv')]);",
        '}',
      ].join('\n'),
    );
    const out = join(dir, 'swapped');
    const run = await cohort(`node ${agent}`, out, ['--controls', join(ORIGINAL, 'controls')]);
    expect(run.timedOut, run.stderr).toBe(false);
    expect(run.code, run.stderr).toBe(1); // nothing delivered, every result recorded
    expect(run.stderr).toMatch(/results\.jsonl is not a file \(a folder, FIFO or link was put there\): set aside as .*interrupted/);
    expect(lines(join(out, 'results.jsonl')).map((l) => l.episode)).toEqual(['wine__b4__r0', 'wine__b4__r1']);
    expect(lstatSync(join(out, 'summary.json')).isFile()).toBe(true);
    expect(JSON.parse(text(join(out, 'summary.json'))).cells[0].episodes).toBe(2);
    expect(lstatSync(join(out, 'summary.csv')).isFile()).toBe(true);
    const aside = readdirSync(join(out, 'interrupted')).map((f) => f.replace(/\d+\.[0-9a-f]{12}$/, 'T'));
    expect(aside.sort()).toEqual(['results.jsonl.planted.T', 'summary.csv.planted.T', 'summary.json.planted.T']);
  }, 240_000);
});

/** A node agent at `dir/<name>.mjs`: it buys two masks, submits the pair ridge, then runs `after` (JS, with `out`, `episode`, `repeat`, fs and path at hand). */
function submittingAgent(name: string, after: string): string {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    [
      "import * as fs from 'node:fs';",
      "import { execFileSync } from 'node:child_process';",
      "import { dirname, join } from 'node:path';",
      'const episode = JSON.parse(process.env.WWREF_MCP_COMMAND).at(-1);',
      'const out = dirname(dirname(episode));',
      'const repeat = Number(/__r(\\d+)$/.exec(process.env.WWREF_EPISODE_ID)[1]);',
      'let id = 0;',
      'const call = async (name, args) => {',
      '  const r = await fetch(process.env.WWREF_MCP_URL, { method: "POST", headers: { authorization: "Bearer " + process.env.WWREF_MCP_TOKEN, "content-type": "application/json", accept: "application/json, text/event-stream" },',
      '    body: JSON.stringify({ jsonrpc: "2.0", id: ++id, method: "tools/call", params: { name, arguments: args } }) });',
      '  return r.text();',
      '};',
      "await call('observe', { masks: ['0011', '0101'] });",
      "await call('submit_diagnosis', { estimator: 'ridge_pair' });",
      after,
    ].join('\n'),
  );
  return `node ${file}`;
}

describe('an agent breaking the set-aside names and the episodes folder (issue 40, second red team)', () => {
  it('interrupted/ linked elsewhere, results.jsonl a folder, the set-aside names planted: the results are written', async () => {
    const victim = join(dir, 'victim-interrupted');
    mkdirSync(victim);
    const agent = submittingAgent(
      'aside',
      [
        'const interrupted = join(out, "interrupted");',
        `if (repeat === 0) { fs.rmSync(interrupted, { recursive: true, force: true }); fs.symlinkSync(${JSON.stringify(victim)}, interrupted); }`,
        'if (repeat >= 1) {',
        '  if (repeat === 2) { const now = Date.now(); for (let t = now; t < now + 3000; t++) fs.mkdirSync(join(interrupted, "results.jsonl.planted." + t, "x"), { recursive: true }); }',
        '  fs.rmSync(join(out, "results.jsonl"), { force: true }); fs.mkdirSync(join(out, "results.jsonl", "x"), { recursive: true });',
        '}',
      ].join('\n'),
    );
    const out = join(dir, 'aside');
    const args = ['--controls', join(ORIGINAL, 'controls')];
    const run = await cohort(agent, out, args);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/interrupted was no folder of the cohort .*: set aside as .*interrupted\.planted\.\d+\.[0-9a-f]{12}/);
    expect(lines(join(out, 'results.jsonl')).map((l) => l.episode)).toEqual(['wine__b4__r0', 'wine__b4__r1']);
    expect(lstatSync(join(out, 'interrupted')).isDirectory()).toBe(true);
    expect(readdirSync(victim)).toEqual([]); // nothing set aside through the link
    // extended: r2 plants folders at every name a timestamp alone would give
    const extended = await wwref(['cohort', 'run', '--agent', agent, '--out', out, ...cells.slice(0, -1), '3', ...args]);
    expect(extended.code, extended.stderr).toBe(0);
    expect(lines(join(out, 'results.jsonl')).map((l) => l.episode)).toEqual(['wine__b4__r0', 'wine__b4__r1', 'wine__b4__r2']);
  }, 240_000);

  it('an edited cohort name is refused by cohort run and compare (one line); an unprintable or long name is refused at creation', async () => {
    const renamed = join(dir, 'renamed');
    cpSync(ORIGINAL, renamed, { recursive: true });
    const file = join(renamed, 'cohort.json');
    const json = JSON.parse(text(file));
    expect(json.name_sha256).toMatch(/^[0-9a-f]{64}$/);
    json.cohort = 'other';
    writeFileSync(file, JSON.stringify(json, null, 2));
    const resumed = await cohort('true', renamed);
    expect(resumed.code).toBe(2);
    expect(resumed.stderr.trim().split('\n')).toHaveLength(1);
    expect(resumed.stderr).toContain(
      'its cohort name is not the one its name_sha256 records (the file was edited); if an agent edited it, remove cohort.json',
    );
    await expect(readVerifiedCohort(currentSettings(), renamed, () => {})).rejects.toThrow(
      `cohort file ${file}: its cohort name is not the one its name_sha256 records`,
    );
    // a word joiner would make a name that looks like a control's (issue 40, third red team: Q5)
    for (const name of ['bad\u001b[8mname', 'n'.repeat(201), 'design_degree2\u2060', 'design\u202e2eerged']) {
      const made = await cohort('true', join(dir, name));
      expect(made.code).toBe(2);
      expect(made.stderr.trim().split('\n')).toHaveLength(1);
      expect(existsSync(join(dir, name, 'cohort.json'))).toBe(false);
    }
  }, 120_000);

  it('a FIFO at its own events.jsonl after submitting: the undelivered line is kept on resume and by compare', async () => {
    const agent = submittingAgent(
      'fifo-events',
      'if (repeat === 1) { fs.rmSync(join(episode, "events.jsonl")); execFileSync("mkfifo", [join(episode, "events.jsonl")]); }',
    );
    const out = join(dir, 'fifo-events');
    const args = ['--controls', join(ORIGINAL, 'controls')];
    const run = await cohort(agent, out, args);
    expect(run.code, run.stderr).toBe(0);
    const first = text(join(out, 'results.jsonl'));
    expect(lines(join(out, 'results.jsonl')).map((l) => [l.episode, l.artifact_valid])).toEqual([
      ['wine__b4__r0', true],
      ['wine__b4__r1', false],
    ]);
    expect(lines(join(out, 'results.jsonl'))[1]!.undelivered_reason).toContain(UNUSABLE_RECEIPT);
    const resumed = await cohort(agent, out, args);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain('resuming: 2 of 2 episode(s) finished');
    expect(resumed.stderr).not.toContain('left out');
    expect(text(join(out, 'results.jsonl'))).toBe(first);
    const read = await readVerifiedCohort(currentSettings(), out, () => {});
    expect([read.results.length, read.leftOut.size]).toEqual([2, 0]);
  }, 240_000);

  it('episodes/ linked outside OUT: set aside, the lines only its receipts there vouched for replayed; compare reads no receipt through a link', async () => {
    const copy = join(dir, 'episodes-copy');
    const marker = join(dir, 'episodes-linked');
    const agent = submittingAgent(
      'link-episodes',
      `if (repeat === 0 && !fs.existsSync(${JSON.stringify(marker)})) { fs.writeFileSync(${JSON.stringify(marker)}, ''); fs.cpSync(join(out, 'episodes'), ${JSON.stringify(copy)}, { recursive: true }); fs.renameSync(join(out, 'episodes'), join(out, 'episodes.moved')); fs.symlinkSync(${JSON.stringify(copy)}, join(out, 'episodes')); }`,
    );
    const out = join(dir, 'linked-episodes');
    const args = ['--controls', join(ORIGINAL, 'controls')];
    const run = await cohort(agent, out, args);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/episodes was no folder of the cohort .*: set aside as /);
    const resumed = await cohort(agent, out, args);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain('resuming: 1 of 2 episode(s) finished, 1 line(s)');
    expect(lstatSync(join(out, 'episodes')).isDirectory()).toBe(true);
    expect(readdirSync(join(out, 'episodes')).sort()).toEqual(['wine__b4__r0', 'wine__b4__r1']);
    // read-only: a cohort folder whose episodes/ is a link vouches for no line
    const linked = join(dir, 'linked-copy');
    cpSync(ORIGINAL, linked, { recursive: true });
    rmSync(join(linked, 'episodes'), { recursive: true });
    symlinkSync(join(ORIGINAL, 'episodes'), join(linked, 'episodes'));
    const read = await readVerifiedCohort(currentSettings(), linked, () => {});
    expect(read.results).toEqual([]);
    expect(read.leftOut.get('wine__b4__r0')).toContain('no receipt is read through it');
  }, 240_000);
});

describe('issue 40, third red team', () => {
  it('--retry-undelivered with a --controls that is refused moves no episode folder (every refusal comes first)', async () => {
    const copy = join(dir, 'retry-refused');
    cpSync(ORIGINAL, copy, { recursive: true });
    const before = readdirSync(join(copy, 'episodes')).sort();
    const empty = join(dir, 'controls-empty');
    mkdirSync(empty);
    const run = await cohort('true', copy, ['--retry-undelivered', '--controls', empty]);
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain(`--controls ${empty} holds no records.jsonl`);
    expect(readdirSync(join(copy, 'episodes')).sort()).toEqual(before);
    expect(existsSync(join(copy, 'retried'))).toBe(false);
    expect(existsSync(join(copy, 'interrupted'))).toBe(false);
    expect(text(join(copy, 'results.jsonl'))).toBe(text(join(ORIGINAL, 'results.jsonl')));
  }, 120_000);

  it('a controls folder cut down, its run.json edited to match, is refused by cohort run and compare naming what is missing (Q2)', async () => {
    const cut = join(dir, 'controls-cut');
    mkdirSync(cut);
    const source = join(ORIGINAL, 'controls');
    const records = text(join(source, 'records.jsonl')).split('\n').filter(Boolean);
    // every random design's seed from 5 on left out, and the design_degree2 control: run.json's count edited to match
    const kept = records.filter(
      (l) => !l.includes('"method":"design_degree2"') && !/"method":"random_degree2".*"seed":([5-9]|1\d),/.test(l),
    );
    expect(kept.length).toBe(records.length - 16);
    writeFileSync(join(cut, 'records.jsonl'), `${kept.join('\n')}\n`);
    const run = JSON.parse(text(join(source, 'run.json')));
    writeFileSync(join(cut, 'run.json'), JSON.stringify({ ...run, tasks: run.tasks - 16 }));
    const missing =
      /records\.jsonl is not a complete controls run of the cells needed .*: wine B=4 design_degree2; wine B=4 random_degree2 seeds 5 … 19 \(15\); run 'wwref controls run'/;
    const compared = await wwref(['cohort', 'compare', ORIGINAL, '--controls', cut, '--out', join(dir, 'compare-cut')]);
    expect(compared.code, compared.stderr).toBe(2);
    expect(compared.stderr).toMatch(missing);
    expect(compared.stderr.trim().split('\n')).toHaveLength(1);
    const copy = join(dir, 'cut-controls-cohort');
    cpSync(ORIGINAL, copy, { recursive: true });
    const resumed = await cohort('true', copy, ['--controls', cut]);
    expect(resumed.code, resumed.stderr).toBe(2);
    expect(resumed.stderr).toMatch(missing);
  }, 120_000);

  it("the cohort's own controls made with fewer seeds (another run.json): set aside under interrupted/ and computed afresh, said (Q2)", async () => {
    const copy = join(dir, 'own-controls-fewer');
    cpSync(ORIGINAL, copy, { recursive: true });
    rmSync(join(copy, 'controls'), { recursive: true });
    const fewer = await wwref(['controls', 'run', '--condition', 'wine', '--budget', '4', '--seeds', '2', '--out', join(copy, 'controls')]);
    expect(fewer.code, fewer.stderr).toBe(0);
    const resumed = await cohort('true', copy);
    expect(resumed.code, resumed.stderr).toBe(1); // nothing delivered, as before
    expect(resumed.stderr).toMatch(/controls could not be resumed \(.*another run.*\): set aside as .*interrupted\/controls\.planted\./);
    const seeds = lines(join(copy, 'controls', 'records.jsonl'))
      .filter((r) => r.method === 'random_degree2')
      .map((r) => r.seed);
    expect(new Set(seeds).size).toBe(20);
    expect(text(join(copy, 'controls', 'records.jsonl'))).toBe(text(join(ORIGINAL, 'controls', 'records.jsonl')));
  }, 120_000);

  it('an agent that deletes or links away its own folder after failing to submit: undelivered (0) for the run, a resume and compare alike (Q8/Q9)', async () => {
    const away = join(dir, 'gone-away');
    const file = join(dir, 'gone.mjs');
    writeFileSync(
      file,
      [
        "import * as fs from 'node:fs';",
        'const episode = JSON.parse(process.env.WWREF_MCP_COMMAND).at(-1);',
        'const repeat = Number(/__r(\\d+)$/.exec(process.env.WWREF_EPISODE_ID)[1]);',
        'const call = (name, args) => fetch(process.env.WWREF_MCP_URL, { method: "POST", headers: { authorization: "Bearer " + process.env.WWREF_MCP_TOKEN, "content-type": "application/json", accept: "application/json, text/event-stream" },',
        '  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name, arguments: args } }) }).then((r) => r.text());',
        "await call('observe', { masks: ['0011', '0101', '0110', '1001'] });",
        "if (repeat === 2) await call('submit_diagnosis', { estimator: 'ridge_pair' });",
        'if (repeat === 0) fs.rmSync(episode, { recursive: true, force: true });',
        `if (repeat === 1) { fs.cpSync(episode, ${JSON.stringify(away)}, { recursive: true }); fs.rmSync(episode, { recursive: true, force: true }); fs.symlinkSync(${JSON.stringify(away)}, episode); }`,
      ].join('\n'),
    );
    const out = join(dir, 'gone');
    const args = [
      'cohort',
      'run',
      '--agent',
      `node ${file}`,
      '--out',
      out,
      ...cells.slice(0, -1),
      '3',
      '--controls',
      join(ORIGINAL, 'controls'),
    ];
    const run = await wwref(args);
    expect(run.code, run.stderr).toBe(0);
    const written = text(join(out, 'results.jsonl'));
    const own = lines(join(out, 'results.jsonl'));
    expect(own.map((l) => [l.episode, l.artifact_valid, l.effect_recovery])).toEqual([
      ['wine__b4__r0', false, 0],
      ['wine__b4__r1', false, 0],
      ['wine__b4__r2', true, own[2]!.effect_recovery],
    ]);
    // compare reads the same three lines: the two undelivered count 0, never left out (which would raise the mean)
    const read = await readVerifiedCohort(currentSettings(), out, () => {});
    expect(read.results.map((r) => [r.episode, r.effect_recovery])).toEqual(own.map((l) => [l.episode, l.effect_recovery]));
    expect(read.leftOut.size).toBe(0);
    // a plain resume replays neither (no second chance); --retry-undelivered would
    const resumed = await wwref(args);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain('resuming: 3 of 3 episode(s) finished');
    expect(text(join(out, 'results.jsonl'))).toBe(written);
    expect(existsSync(join(out, 'episodes', 'wine__b4__r0'))).toBe(false);
    // a line alone vouches for nothing: one the cohort's record of the lines it wrote does not name is left out (and replayed)
    const copy = join(dir, 'gone-unrecorded');
    cpSync(out, copy, { recursive: true, verbatimSymlinks: true });
    const record = join(copy, 'written.jsonl');
    expect(text(record).split('\n').filter(Boolean)).toHaveLength(3);
    writeFileSync(
      record,
      text(record)
        .split('\n')
        .filter((l) => !l.includes('wine__b4__r0'))
        .join('\n'),
    );
    const unrecorded = await readVerifiedCohort(currentSettings(), copy, () => {});
    expect(unrecorded.results.map((r) => r.episode)).toEqual(['wine__b4__r1', 'wine__b4__r2']);
    expect(unrecorded.leftOut.get('wine__b4__r0')).toBe('no folder of its episode');
  }, 240_000);

  it("cohort.json removed: a folder holding the cohort's own interrupted.planted.* entries is still taken as this cohort's", async () => {
    const copy = join(dir, 'adopt-planted', 'original'); // its folder's name: the name its lines carry
    cpSync(ORIGINAL, copy, { recursive: true });
    // what folders.ts leaves when an agent planted a file at `interrupted`
    writeFileSync(join(copy, 'interrupted.planted.1765000000000.0123456789ab'), 'planted');
    rmSync(join(copy, 'cohort.json'));
    const run = await cohort('true', copy, ['--controls', join(ORIGINAL, 'controls')]);
    expect(run.stderr).not.toContain('holds files of its own');
    expect(run.stderr).toContain('taken as this cohort');
    expect(run.code, run.stderr).toBe(1); // resumed: its two undelivered lines kept, nothing delivered
    expect(run.stderr).toContain('resuming: 2 of 2 episode(s) finished');
  }, 120_000);
});
