// What an agent or a user can do wrong around a cohort: a results line copied from another episode
// under the agent's own id (left out: its receipt disagrees), a receipt made unreadable (recorded
// undelivered, the cohort goes on), --out inside the repository and an unreadable --controls folder
// (one line, before any agent runs). Real agent processes, real files.
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { cliProcess } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-cohort-forgery-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// repeat 0 submits the evaluator's ridge through MCP; repeat 1 copies repeat 0's results line as its
// own (the folder is in WWREF_MCP_COMMAND) and exits without submitting
const AGENT = `#!/bin/sh
case "$WWREF_EPISODE_ID" in
  *__r0) exec node -e '
    const url = process.env.WWREF_MCP_URL, auth = "Bearer " + process.env.WWREF_MCP_TOKEN;
    fetch(url, { method: "POST", headers: { authorization: auth, "content-type": "application/json",
      accept: "application/json, text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1,
      method: "tools/call", params: { name: "submit_diagnosis", arguments: { estimator: "ridge_pair" } } }) })
      .then((r) => r.text()).then(() => {});' ;;
esac
exec node -e '
  const { readFileSync, appendFileSync } = require("node:fs");
  const { dirname, join } = require("node:path");
  const out = dirname(dirname(JSON.parse(process.env.WWREF_MCP_COMMAND).at(-1)));
  const line = JSON.parse(readFileSync(join(out, "results.jsonl"), "utf8").split("\\n")[0]);
  appendFileSync(join(out, "results.jsonl"), JSON.stringify({ ...line, episode: process.env.WWREF_EPISODE_ID, repeat: 1 }) + "\\n");'
`;

describe('an agent writing into the cohort folder', () => {
  it('a results line copied from another episode is left out: the receipt says undelivered', async () => {
    const agent = join(dir, 'forge.sh');
    writeFileSync(agent, AGENT);
    chmodSync(agent, 0o755);
    const out = join(dir, 'c');
    const args = ['cohort', 'run', '--agent', agent, '--out', out, '--condition', 'wine', '--budget', '4', '--repeats', '2'];
    const run = await cliProcess(args, ROOT);
    expect(run.code, run.stderr).toBe(0);
    const results = readFileSync(join(out, 'results.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { episode: string; artifact_valid: boolean });
    expect(results.map((r) => [r.episode, r.artifact_valid])).toEqual([
      ['wine__b4__r0', true],
      ['wine__b4__r1', false],
    ]);
    expect(run.stderr).toMatch(/1 line\(s\) of .* left out/);
    // the shared estimators' tables are in mask order in the line's text, as the agent's
    const raw = readFileSync(join(out, 'results.jsonl'), 'utf8').split('\n')[0]!;
    const gp = raw.slice(raw.indexOf('"shared_gp_score"'));
    expect(gp.indexOf('"0000":')).toBeLessThan(gp.indexOf('"1000":'));
    expect(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).delivered).toBe(1);
  }, 120_000);

  it('an agent that makes its receipt unreadable is recorded undelivered and the cohort goes on; resuming keeps the line', async () => {
    const agent = join(dir, 'garble.sh');
    const episode = '$(node -p "JSON.parse(process.env.WWREF_MCP_COMMAND).at(-1)")';
    writeFileSync(agent, `#!/bin/sh\ncase "$WWREF_EPISODE_ID" in *__r0) echo garbage >> "${episode}/events.jsonl" ;; esac\nexit 0\n`);
    chmodSync(agent, 0o755);
    const out = join(dir, 'garbled');
    const args = ['cohort', 'run', '--agent', agent, '--out', out, '--condition', 'wine', '--budget', '4', '--repeats', '2'];
    const run = await cliProcess(args, ROOT);
    expect(run.code, run.stderr).toBe(1); // nothing delivered
    const results = () =>
      readFileSync(join(out, 'results.jsonl'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { episode: string; undelivered_reason: string });
    expect(results().map((r) => [r.episode, r.undelivered_reason.split(':')[0]])).toEqual([
      ['wine__b4__r0', 'the episode receipt is unusable'],
      ['wine__b4__r1', 'the agent exited without submitting'],
    ]);
    const again = await cliProcess(args, ROOT);
    expect(again.code, again.stderr).toBe(1);
    expect(again.stdout).toMatch(/2 episode\(s\) \(0 delivered, 2 from an earlier run\)/);
    expect(again.stderr).toContain('cohort: 2 earlier episode(s) undelivered: kept; --retry-undelivered plays them again');
    expect(results()).toHaveLength(2);
  }, 120_000);

  it('--out inside the repository is refused with one line, nothing written', async () => {
    const out = join(ROOT, 'outputs', `cohort-test-${process.pid}`);
    const run = await cliProcess(['cohort', 'run', '--agent', 'true', '--out', out, '--condition', 'wine', '--budget', '4'], ROOT);
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toEqual([
      `wwref: --out ${out} is inside the repository (${ROOT}); name a folder outside it, e.g. ~/cohorts/NAME`,
    ]);
    expect(existsSync(out)).toBe(false);
  }, 60_000);

  it('--controls without records is refused before any agent runs', async () => {
    const out = join(dir, 'no-controls');
    const args = [
      'cohort',
      'run',
      '--agent',
      'true',
      '--out',
      out,
      '--condition',
      'wine',
      '--budget',
      '4',
      '--controls',
      join(dir, 'nope'),
    ];
    const run = await cliProcess(args, ROOT);
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toEqual([
      `wwref: --controls ${join(dir, 'nope')} holds no records.jsonl (a finished 'wwref controls run')`,
    ]);
    expect(existsSync(join(out, 'episodes'))).toBe(false);
  }, 60_000);
});
