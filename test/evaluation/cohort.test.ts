// `wwref cohort run` end to end with real agent processes, the real in-process MCP server, the pinned
// controls worker and real files: the example agent (examples/agents/pair_ridge.py, the official MCP
// Python SDK in its own environment) on 3 conditions × 2 budgets × 2 repeats, whose every record must
// equal the `design_degree2` control the same run computes; a deliberately faulty agent (crash, hang,
// output flood, a child left running, no submission) and a missing command, each recorded undelivered
// with its reason while the cohort goes on; Ctrl-C and resuming; and `/episodes/<id>/mcp` with one
// token per episode, in process and as `wwref serve --episodes`.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { referenceSurface } from '../../pipelines/analysis/grade.ts';
import { AGENT_SCORE_FIELDS } from '../../pipelines/analysis/grade-records.ts';
import { plannedEpisodes } from '../../pipelines/evaluation/cohort/plan.ts';
import { earlierResults } from '../../pipelines/evaluation/cohort/results.ts';
import { startControlsWorker } from '../../pipelines/evaluation/controls/worker.ts';
import { sharedScores } from '../../pipelines/evaluation/shared-scores.ts';
import { startEpisode } from '../../pipelines/evaluation/episode.ts';
import { serveEpisodes } from '../../pipelines/evaluation/episodes-server.ts';
import { BIN, cliProcess } from '../support/cli.ts';
import { runningPid } from '../support/processes.ts';
import { currentSettings } from '../support/workspace.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-cohort-'));
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
/** The fields of a published agent record (results/agent_results.json), in its order. */
const PUBLISHED_RECORD_FIELDS = [
  'instance',
  'family',
  'budget',
  'model',
  'repeat',
  'job_id',
  'artifact_valid',
  'observations',
  'credits_spent',
  'shared_degree1_score',
  'shared_degree2_score',
  'score',
  'cohort',
];
const pidsIn = (file: string) => [...readFileSync(file, 'utf8').matchAll(/^(?:pid|child) (\d+)$/gm)].map((m) => Number(m[1]));

describe('a cohort of the example agent', () => {
  const out = join(dir, 'pair');
  const args = [
    'cohort',
    'run',
    '--agent',
    'examples/agents/.venv/bin/python examples/agents/pair_ridge.py',
    '--out',
    out,
    '--condition',
    'wine',
    'concrete',
    'seeds',
    '--budget',
    '4',
    '8',
    '--repeats',
    '2',
    '--parallel',
    '2',
    '--label',
    'agent=pair_ridge',
  ];

  it('equals the design_degree2 controls record for record; writes results, receipts, summaries and the figure; resumes', async () => {
    const run = await cliProcess(args, ROOT);
    expect(run.stderr).toMatch(/\[cohort\] 12\/12 episodes/);
    expect(run.code, run.stderr).toBe(0);
    const results = lines(join(out, 'results.jsonl'));
    expect(results).toHaveLength(12);
    expect(new Set(results.map((r) => r.episode)).size).toBe(12);
    const controls = lines(join(out, 'controls', 'records.jsonl'));
    for (const r of results) {
      expect(r.artifact_valid, r.episode).toBe(true);
      expect(r.labels).toEqual({ agent: 'pair_ridge' });
      const control = controls.find((c) => c.method === 'design_degree2' && c.condition === r.condition && c.budget === r.budget)!;
      // the same purchases in the same order (the published list form), and the same table and score to the last bit
      expect(
        r.observations.map((o: { mask: string }) => o.mask),
        r.episode,
      ).toEqual(control.acquisition_order);
      expect(r.acquisition_order).toEqual(control.acquisition_order);
      expect(Object.fromEntries(r.observations.map((o: { mask: string; utility: number }) => [o.mask, o.utility]))).toEqual(
        control.observations,
      );
      expect(Object.fromEntries(Object.keys(control.score).map((k) => [k, r.score[k]]))).toEqual(control.score);
      expect(r.credits_spent).toBe(r.budget);
      // the published agent record's fields first, in its order; its score's fields all there
      expect(Object.keys(r).slice(0, PUBLISHED_RECORD_FIELDS.length)).toEqual(PUBLISHED_RECORD_FIELDS);
      expect([r.model, r.job_id, r.cohort]).toEqual(['pair_ridge', r.episode, 'pair']);
      expect(Object.keys(r.score)).toEqual(expect.arrayContaining([...AGENT_SCORE_FIELDS]));
      expect([r.score.effect_error, r.score.n_grid_cells, r.score.n_observed_cells]).toEqual([r.score.effect_mae / 2, 16, r.budget + 2]);
      expect(Object.keys(r.score.per_support.task.base_effects)).toEqual(['A', 'B', 'C', 'D']);
      // the pair-effect ridge refitted on the agent's observations is its own table
      expect(r.shared_degree2_score.effect_recovery).toBe(r.effect_recovery);
      expect(r.recovery_gain_over_shared.degree2).toBe(0);
      // its receipt: start, one purchase, the submission (and the evaluator's reads)
      const actions = lines(join(out, 'episodes', r.episode, 'events.jsonl')).filter((e) => e.outcome === 'ok' && e.kind === 'action');
      expect(actions.map((e) => e.action).filter((a) => a !== 'task' && a !== 'status' && a !== 'score')).toEqual([
        'start',
        'observe',
        'submit',
      ]);
      // the episode itself carries the cohort's labels and limits
      const start = actions.find((e) => e.action === 'start')!;
      expect([start.labels, start.limits.calls, start.limits.call_seconds, start.limits.session_seconds]).toEqual([
        { agent: 'pair_ridge' },
        20,
        45,
        1800,
      ]);
    }
    // grade --records gives every field of every line again: scores, shared estimators refitted in acquisition order, gains
    const regraded = await cliProcess(['grade', '--records', join(out, 'results.jsonl')], ROOT);
    expect(regraded.stderr).toContain('12 record(s) scored, 12 stored score(s) compared: 0 difference(s)');
    expect(regraded.code).toBe(0);
    expect(JSON.parse(regraded.stdout).shared_scores).toHaveLength(12);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    expect(summary.cells).toHaveLength(6);
    for (const cell of summary.cells) {
      expect([cell.episodes, cell.delivered]).toEqual([2, 2]);
      expect(cell.gain_over_controls.design_degree2).toBe(0);
      expect(cell.controls).toHaveProperty('gp_grid_variance');
    }
    expect(summary.family_macro.map((c: any) => [c.track, c.budget, c.sources])).toEqual([
      ['four', 4, 3],
      ['four', 8, 3],
    ]);
    for (const cell of summary.family_macro) {
      expect(cell.recovery_interval[0]).toBeLessThanOrEqual(cell.recovery);
      expect(cell.recovery_interval[1]).toBeGreaterThanOrEqual(cell.recovery);
      expect(cell.controls.design_degree2.gain).toBe(0);
    }
    expect(readFileSync(join(out, 'macro.csv'), 'utf8')).toMatch(
      /^track,budget,families,sources,episodes,delivered_rate,recovery,recovery_low/,
    );
    expect(readFileSync(join(out, 'cohort-recovery.svg'), 'utf8')).toContain('<svg');

    // the same command again: every episode kept, nothing run again
    const before = readFileSync(join(out, 'results.jsonl'));
    const again = await cliProcess(args, ROOT);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('12 from an earlier run');
    expect(readFileSync(join(out, 'results.jsonl'))).toEqual(before);
    // another cohort into the same folder: one line, exit 2
    const other = await cliProcess([...args, '--session-seconds', '60'], ROOT);
    expect(other.code).toBe(2);
    expect(other.stderr.trim().split('\n')).toHaveLength(1);
    expect(other.stderr).toContain('holds another cohort (the session seconds differ)');
  }, 300_000);
});

describe('a faulty agent', () => {
  const out = join(dir, 'faults');
  const args = ['cohort', 'run', '--agent', 'node test/support/fault-agent.mjs', '--out', out, '--condition', 'wine', '--budget', '4'];
  const all = [...args, '--repeats', '6', '--parallel', '2', '--session-seconds', '10'];

  it('each fault is recorded undelivered with its reason and its processes stopped; Ctrl-C stops the agents; the run resumes', async () => {
    // Ctrl-C while the hanging agent runs
    const first = execa('node', [BIN, ...all], { cwd: ROOT, reject: false });
    const hangOut = join(out, 'episodes', 'wine__b4__r1', 'agent.stdout');
    const hanging = () => existsSync(hangOut) && /hanging/.test(readFileSync(hangOut, 'utf8'));
    for (let k = 0; k < 600 && !hanging(); k++) await new Promise((d) => setTimeout(d, 50));
    const hangPid = pidsIn(hangOut)[0]!;
    expect(runningPid(hangPid), readFileSync(hangOut.replace('stdout', 'stderr'), 'utf8')).toBe(true);
    first.kill('SIGINT');
    const stopped = await first;
    expect(stopped.exitCode, String(stopped.stderr)).toBe(130);
    expect(String(stopped.stderr)).toContain('run the same command to resume');
    expect(runningPid(hangPid)).toBe(false);

    const run = await cliProcess(all, ROOT);
    expect(run.code, run.stderr).toBe(0);
    expect(readdirSync(join(out, 'interrupted')).some((f) => f.startsWith('wine__b4__r1.'))).toBe(true);
    const results = new Map(lines(join(out, 'results.jsonl')).map((r) => [r.repeat as number, r]));
    // the repeats of test/support/fault-agent.mjs: crash, hang, flood, child, quiet, submit
    expect([...results.keys()].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    const fault = (k: number) => results.get(k) as Record<string, any>;
    const [crash, hang, flood, child, quiet, submit] = [fault(0), fault(1), fault(2), fault(3), fault(4), fault(5)];
    // undelivered: the published form of the record's score
    expect([crash, hang, flood, quiet].map((r) => [r.artifact_valid, r.effect_recovery, r.score])).toEqual(
      Array(4).fill([false, 0, { effect_recovery: 0, strict_effect_reconstruction: false }]),
    );
    expect(crash.undelivered_reason).toBe('the agent exited with status 1 without submitting');
    expect(crash.credits_spent).toBe(1); // what it bought before crashing is kept and refitted
    expect(crash.shared_gp_score.effect_recovery).toBeTypeOf('number');
    expect(readFileSync(join(out, 'episodes', crash.episode, 'agent.stderr'), 'utf8')).toContain('fault-agent: crashing');
    // and said on the run's stderr, with the agent's last line of its own (in whichever of the two runs it ran)
    expect(`${stopped.stderr}${run.stderr}`).toContain(
      `cohort: ${crash.episode} undelivered: the agent exited with status 1 without submitting; its stderr ends: "fault-agent: crashing" (`,
    );
    expect(hang.undelivered_reason).toBe("no submission within the session's 10 s: the agent was stopped");
    expect(hang.process.stopped).toBe('deadline');
    expect(runningPid(pidsIn(join(out, 'episodes', hang.episode, 'agent.stdout'))[0]!)).toBe(false);
    expect(flood.process.stopped).toBe('output');
    expect(flood.process.output_truncated).toBe(true);
    expect(statSync(join(out, 'episodes', flood.episode, 'agent.stdout')).size).toBe(1 << 20);
    expect(quiet.undelivered_reason).toBe('the agent exited without submitting');
    // an undelivered episode is ended in its own receipt, with the reason the results line gives
    for (const r of [crash, flood, quiet]) {
      const ends = lines(join(out, 'episodes', r.episode, 'events.jsonl')).filter((e) => e.action === 'end' && e.outcome === 'ok');
      expect(ends.map((e) => e.reason)).toEqual([r.undelivered_reason]);
    }
    expect([child.artifact_valid, child.process.left_children, submit.artifact_valid]).toEqual([true, true, true]);
    const [, childPid] = pidsIn(join(out, 'episodes', child.episode, 'agent.stdout'));
    expect(runningPid(childPid!)).toBe(false);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    expect([summary.episodes, summary.delivered]).toEqual([6, 2]);
    // delivered and undelivered lines alike are given again by grade --records, the shared estimators refitted
    const regraded = await cliProcess(['grade', '--records', join(out, 'results.jsonl')], ROOT);
    expect(regraded.stderr).toContain('6 record(s) scored, 6 stored score(s) compared: 0 difference(s)');
    expect(regraded.code).toBe(0);
    expect(summary.cells[0].recovery_mean).toBeCloseTo((child.effect_recovery + submit.effect_recovery) / 6, 15);

    // a resumed run keeps only verified lines: an edited score, an observation or a second copy are left out
    const definition = JSON.parse(readFileSync(join(out, 'cohort.json'), 'utf8')).definition;
    const text = readFileSync(join(out, 'results.jsonl'), 'utf8').split('\n').filter(Boolean);
    const edited = join(dir, 'edited.jsonl');
    const delivered = text.findIndex((l) => l.includes('"artifact_valid":true'));
    const others = text.filter((_, k) => k !== delivered);
    writeFileSync(
      edited,
      [
        text[delivered]!.replace(/("score":\{[^{}]*"effect_mae":)[^,]+/, (_, head) => `${head}0.5`),
        others[0]!.replace(/("observations":\[\{"mask":"0000","utility":)[^}]+/, (_, head) => `${head}0.123`),
        ...others.slice(1),
        others[1],
        '{"torn',
      ].join('\n'),
    );
    const worker = await startControlsWorker(currentSettings());
    try {
      const kept = await earlierResults(edited, plannedEpisodes(definition), {
        definition,
        cohort: 'faults',
        episodes: join(out, 'episodes'),
        surfaceOf: (c) => referenceSurface(currentSettings(), c),
        refit: (surface, observations, own) => sharedScores(worker, surface, observations, own),
      });
      expect([kept.lines.size, kept.dropped]).toEqual([4, 4]);
      expect([...kept.lines.values()]).toEqual(others.slice(1));
    } finally {
      await worker.close();
    }

    // a command that does not exist, with the controls of the run above
    const missing = await cliProcess(
      [
        'cohort',
        'run',
        '--agent',
        'wwref-no-such-agent-command',
        '--out',
        join(dir, 'missing'),
        '--condition',
        'wine',
        '--budget',
        '4',
        '--controls',
        join(out, 'controls'),
      ],
      ROOT,
    );
    // nothing delivered: exit 1, with one line saying how many and why
    expect(missing.code, missing.stderr).toBe(1);
    expect(missing.stderr.trimEnd().split('\n').at(-1)).toMatch(
      /^cohort: no episode delivered: 1 undelivered; the most common reason \(1 of them\): the agent command was not found \(exit status 127\); its stderr ends: ".*wwref-no-such-agent-command.*not found"$/,
    );
    const [line] = lines(join(dir, 'missing', 'results.jsonl'));
    expect(line!.undelivered_reason).toBe('the agent command was not found (exit status 127)');
    expect(existsSync(join(dir, 'missing', 'controls'))).toBe(false);
  }, 300_000);
});

describe('serving many episodes', () => {
  const settings = currentSettings();
  const post = (url: string, headers: Record<string, string>) =>
    new Promise<number>((done, fail) => {
      const req = request(
        url,
        { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } },
        (res) => {
          res.resume();
          done(res.statusCode!);
        },
      );
      req.on('error', fail);
      req.end('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
    });
  const connect = async (url: string, token: string) => {
    const client = new Client({ name: 'test-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }),
    );
    return client;
  };

  it('reaches an episode with its own token only, and nothing once it is removed', async () => {
    const a = join(dir, 'many', 'a');
    const b = join(dir, 'many', 'b');
    await startEpisode(settings, { dir: a, condition: 'wine', budget: 2 });
    await startEpisode(settings, { dir: b, condition: 'wine', budget: 3 });
    const server = await serveEpisodes(settings, { host: '127.0.0.1', port: 0 });
    try {
      const ea = server.add('a', a);
      const eb = server.add('b', b);
      const client = await connect(ea.url, ea.token);
      const status = (await client.callTool({ name: 'status', arguments: {} })) as { content: { text: string }[] };
      expect(JSON.parse(status.content[0]!.text).budget).toBe(2);
      await client.close();
      expect(await post(eb.url, { authorization: `Bearer ${ea.token}` })).toBe(401);
      expect(await post(ea.url, {})).toBe(401);
      expect(await post(ea.url.replace('/episodes/a/', '/episodes/zz/'), { authorization: `Bearer ${ea.token}` })).toBe(401);
      expect(await post(eb.url, { authorization: `Bearer ${eb.token}`, host: 'evil.example:80' })).toBe(403);
      expect(await post(eb.url, { authorization: `Bearer ${eb.token}` })).toBe(200);
      server.remove('b');
      expect(await post(eb.url, { authorization: `Bearer ${eb.token}` })).toBe(401);
    } finally {
      await server.close();
    }
  });

  it('wwref serve --episodes DIR writes each endpoint and token to a private file', async () => {
    const endpoints = join(dir, 'endpoints.json');
    const child = execa('node', [BIN, 'serve', '--episodes', join(dir, 'many'), '--endpoints', endpoints], { cwd: ROOT, reject: false });
    try {
      await new Promise<void>((done, fail) => {
        child.stderr!.on('data', (c: Buffer) => /serving 2 episode/.test(String(c)) && done());
        child.once('exit', () => fail(new Error('serve exited')));
      });
      expect(statSync(endpoints).mode & 0o777).toBe(0o600);
      const { episodes } = JSON.parse(readFileSync(endpoints, 'utf8'));
      expect(Object.keys(episodes)).toEqual(['a', 'b']);
      const client = await connect(episodes.b.url, episodes.b.token);
      const status = (await client.callTool({ name: 'status', arguments: {} })) as { content: { text: string }[] };
      expect(JSON.parse(status.content[0]!.text).budget).toBe(3);
      await client.close();
    } finally {
      child.kill('SIGTERM');
      await child;
    }
  });
});
