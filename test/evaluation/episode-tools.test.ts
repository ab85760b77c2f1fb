// The agent's full interface, driven by the MCP SDK's own client: a calculation in the sandbox that
// fits the pair-effect ridge with `wwref_helpers` and submits its table, the same table fitted by the
// evaluator (`estimator: ridge_pair`), shared-estimator scores equal to `grade` of the refitted tables,
// the call limit, the deadline, undelivered episodes, a call cut short by kill -9, and `episode verify`
// replaying the calculations and naming the call whose receipt was edited. Real bubblewrap, Pyodide,
// pinned Python worker; one server per episode, each serving many assertions.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { calculate } from '../../pipelines/evaluation/calculations.ts';
import { sandboxAvailable } from '../../pipelines/evaluation/sandbox/isolation.ts';
import { BIN, cliInProcess } from '../support/cli.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-tools-'));
const refs = join(dir, 'references');
const settings = loadSettings({}, process.env);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// main effects and a pair interaction, so that the pair ridge and the shared estimators differ
writeSurfaceCatalog(refs, [
  { condition: 'toy', dimensions: 4, utility: (z, k) => 0.3 + 0.1 * z[0]! + 0.06 * z[1]! * z[2]! - 0.04 * z[3]! + 0.003 * k },
]);
const BOUGHT = ['0001', '0110', '1010', '0101', '1100'];
const sandbox = sandboxAvailable();
if (!sandbox.available) console.warn(`episode tools: no OS sandbox here (${sandbox.reason}); the calculation tests are skipped`);

const cli = async (args: string[]) => {
  const r = await cliInProcess(args, ROOT);
  return { ...r, json: r.code === 0 || args[0] === 'episode' ? tryJson(r.stdout) : undefined };
};
const tryJson = (text: string) => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};
let count = 0;
const startEpisode = async (budget: number, extra: string[] = []) => {
  const ep = join(dir, `ep${++count}`);
  const r = await cli([
    'episode',
    'start',
    '--episode',
    ep,
    '--condition',
    'toy',
    '--budget',
    String(budget),
    '--references',
    refs,
    ...extra,
  ]);
  expect(r.stderr).toBe('');
  return ep;
};
const events = (ep: string) =>
  readFileSync(join(ep, 'events.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
const refusedLine = (r: { code: number; stderr: string }, pattern: RegExp) => {
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(pattern);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
};

async function stdioClient(ep: string): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: 'node', args: [BIN, 'serve', '--episode', ep], cwd: ROOT, stderr: 'pipe' }));
  return client;
}
type Called = { isError?: boolean; content: { type: string; text: string }[]; structuredContent?: Record<string, any> };
const call = async (client: Client, name: string, args: Record<string, unknown> = {}) => {
  const r = (await client.callTool({ name, arguments: args })) as Called;
  if (!r.isError) expect(JSON.parse(r.content[0]!.text)).toEqual(r.structuredContent); // the same JSON as text, for older clients
  return { isError: r.isError === true, text: r.content[0]!.text, json: r.structuredContent as Record<string, any> };
};

/** Python: the pair-effect ridge of wwref_helpers on the evidence's observations, its table on stdout. */
const PAIR_RIDGE = `
import json, wwref_helpers as h
fit = h.ridge_pair(evidence["observations"])
print(json.dumps({"predictions": fit["predictions"], "alpha": fit["alpha"], "left": evidence["calculation_calls_remaining"],
    "elapsed": evidence["session_seconds_elapsed"], "remaining": evidence["session_seconds_remaining"], "same": observations == evidence["observations"]}))
`;

describe.skipIf(!sandbox.available)('the agent interface over MCP', () => {
  const helper = { ep: '', table: {} as Record<string, number>, alpha: 0 };
  const fitted = { ep: '', table: {} as Record<string, number> };

  beforeAll(async () => {
    helper.ep = await startEpisode(6, ['--calls', '1', '--label', 'agent=test', '--label', 'run=1', '--engine', 'pyodide']);
    fitted.ep = await startEpisode(6);
  });

  it('a calculation fits the pair ridge on the purchases and its table is submitted; status is served while it runs; the call limit refuses', async () => {
    const client = await stdioClient(helper.ep);
    try {
      const { tools } = await client.listTools();
      const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
      expect(Object.keys(byName).sort()).toEqual(['calculate_python', 'observe', 'status', 'submit_diagnosis', 'task']);
      for (const name of ['task', 'status']) expect(byName[name]!.annotations?.readOnlyHint).toBe(true);
      for (const name of Object.keys(byName)) expect(byName[name]!.outputSchema?.type).toBe('object');
      expect(byName.submit_diagnosis!.inputSchema.type).toBe('object');
      expect(Object.keys(byName.submit_diagnosis!.inputSchema.properties ?? {}).sort()).toEqual(['estimator', 'predictions_json']);
      expect(byName.calculate_python!.description).toMatch(/standard library only/); // this episode's engine is pyodide

      expect((await call(client, 'observe', { masks: BOUGHT })).json.credits_remaining).toBe(1);
      // the calculation runs outside the episode's lock: status answers long before it ends
      let done = false;
      const running = call(client, 'calculate_python', { code: PAIR_RIDGE }).finally(() => {
        done = true;
      });
      await new Promise((r) => setTimeout(r, 300));
      const status = await call(client, 'status');
      expect(done).toBe(false);
      expect(status.json.calculations).toEqual({ limit: 1, used: 1, remaining: 0 });
      const result = await running;
      expect(result.json).toMatchObject({
        call: 1,
        status: 'ok',
        returncode: 0,
        timed_out: false,
        stderr: '',
        calculation_calls_remaining: 0,
      });
      const out = JSON.parse(result.json.stdout);
      expect(out).toMatchObject({ left: 0, remaining: null, same: true });
      expect(out.elapsed).toBeGreaterThan(0);
      helper.table = out.predictions;
      helper.alpha = out.alpha;

      const over = await call(client, 'calculate_python', { code: 'print(1)' });
      expect([over.isError, over.text]).toEqual([true, 'all 1 calculation calls of the episode are used']);
      const submitted = await call(client, 'submit_diagnosis', { predictions_json: helper.table });
      expect([submitted.isError, submitted.json.closed, submitted.json.estimator]).toEqual([false, true, undefined]);
    } finally {
      await client.close();
    }
    const log = events(helper.ep);
    expect(log[0]).toMatchObject({ action: 'start', labels: { agent: 'test', run: '1' }, limits: { calls: 1, call_seconds: 45 } });
    const reserved = log.find((e) => e.action === 'calculate' && e.outcome === 'ok');
    expect(reserved).toMatchObject({ call: 1, code: PAIR_RIDGE, credits_before: 1, credits_after: 1 });
    expect(JSON.parse(reserved.evidence).observations.map((o: { mask: string }) => o.mask)).toEqual(['0000', '1111', ...BOUGHT]);
    const receipt = log.find((e) => e.kind === 'calculation');
    expect(receipt).toMatchObject({
      call: 1,
      receipt: { status: 'ok', codeSha256: reserved.code_sha256, evidenceSha256: reserved.evidence_sha256 },
    });
    expect(log.find((e) => e.action === 'calculate' && e.outcome === 'refused')?.reason).toMatch(/all 1 calculation calls/);
  }, 120_000);

  it('the same table by `estimator: ridge_pair`, fitted by the evaluator (as close as the helpers are documented to be), its parameters recorded', async () => {
    const client = await stdioClient(fitted.ep);
    try {
      await call(client, 'observe', { masks: BOUGHT });
      const submitted = await call(client, 'submit_diagnosis', { estimator: 'ridge_pair' });
      expect(submitted.isError, submitted.text).toBe(false);
      expect(submitted.json.estimator).toMatchObject({ name: 'ridge_pair', parameters: { degree: 2 } });
      expect(submitted.json.estimator.parameters.alpha).toBe(helper.alpha); // the same penalty chosen
    } finally {
      await client.close();
    }
    const submit = events(fitted.ep).find((e) => e.action === 'submit' && e.outcome === 'ok');
    expect(submit.estimator.name).toBe('ridge_pair');
    fitted.table = submit.prediction_table;
    // the helper's documented agreement (sandbox/README.md): 1e-12 where the penalty is 1e-3 or more, 1e-9 at 1e-5
    const tolerance = helper.alpha >= 1e-3 ? 1e-12 : 1e-9;
    for (let k = 0; k < 16; k++) {
      const mask = maskOf(k, 4);
      expect(Math.abs(fitted.table[mask]! - helper.table[mask]!), `${mask} (alpha ${helper.alpha})`).toBeLessThanOrEqual(tolerance);
    }
    expect(JSON.parse(readFileSync(join(fitted.ep, 'episode.json'), 'utf8')).submission.estimator.name).toBe('ridge_pair');
  }, 120_000);

  it('episode score adds the shared-estimator scores, each equal to grade of its refitted table, and the gains over them', async () => {
    const score = (await cli(['episode', 'score', '--episode', fitted.ep])).json;
    expect([score.delivered, score.artifact_valid, score.estimator.name]).toEqual([true, true, 'ridge_pair']);
    // the agent's table is the evaluator's ridge_pair on the same observations: the very same table and score
    expect(score.shared_degree2_score.prediction_table).toEqual(score.prediction_table);
    expect(score.recovery_gain_over_shared.degree2).toBe(0);
    const observed = join(dir, 'observed.json');
    const state = JSON.parse(readFileSync(join(fitted.ep, 'episode.json'), 'utf8'));
    writeFileSync(
      observed,
      JSON.stringify(state.observations.map(({ mask, utility }: { mask: string; utility: number }) => ({ mask, utility }))),
    );
    for (const [field, gain] of [
      ['shared_degree1_score', 'degree1'],
      ['shared_degree2_score', 'degree2'],
      ['shared_gp_score', 'gp'],
    ] as const) {
      const shared = score[field];
      const table = join(dir, `${field}.json`);
      writeFileSync(table, JSON.stringify(shared.prediction_table));
      const graded = await cli(['grade', '--condition', 'toy', '--table', table, '--observed', observed, '--references', refs]);
      expect(graded.code, graded.stderr).toBe(0);
      const expected = JSON.parse(graded.stdout);
      for (const key of ['effect_recovery', 'effect_mae', 'interaction_mae', 'grid_mae', 'selected_mask', 'strict_effect_reconstruction'])
        expect(shared[key], `${field}.${key}`).toEqual(expected[key]);
      expect(score.recovery_gain_over_shared[gain]).toBe(score.effect_recovery - expected.effect_recovery);
    }
    expect(score.shared_gp_score.estimator).toBe('gp');
    expect(score.shared_degree1_score.prediction_table).not.toEqual(score.prediction_table);

    // the episode as a stored agent record: grade --records refits the shared scores it carries and compares them
    const record = {
      condition: 'toy',
      observations: state.observations.map(({ mask, utility }: { mask: string; utility: number }) => ({ mask, utility })),
      prediction_table: score.prediction_table,
      shared_degree1_score: score.shared_degree1_score,
      shared_degree2_score: { ...score.shared_degree2_score, effect_recovery: score.shared_degree2_score.effect_recovery + 0.01 },
      shared_gp_score: score.shared_gp_score.effect_recovery,
    };
    const records = join(dir, 'agent-records.jsonl');
    writeFileSync(records, `${JSON.stringify(record)}\n`);
    const regraded = await cli(['grade', '--references', refs, '--records', records]);
    expect(regraded.code).toBe(1);
    expect(regraded.stderr).toMatch(
      /^record 1 \(line 1, toy\): shared_degree2_score\.effect_recovery: stored [0-9.e-]+, recomputed [0-9.e-]+\n1 record/,
    );
    const outcome = JSON.parse(regraded.stdout);
    expect(outcome.differences_total).toBe(1);
    expect(outcome.shared_scores[0].shared_gp_score).toEqual(score.shared_gp_score);
    expect(outcome.shared_scores[0].recovery_gain_over_shared).toEqual(score.recovery_gain_over_shared);
  }, 120_000);

  it('episode verify replays every calculation byte for byte, and fails naming the call whose receipt output was edited', async () => {
    const ok = await cli(['episode', 'verify', '--episode', helper.ep]);
    expect([ok.code, ok.stderr]).toEqual([0, '']);
    expect(ok.json).toEqual({
      ok: true,
      calls: [{ call: 1, outcome: 'replayed', status: 'ok', outputs_compared: true, differences: [] }],
    });
    const path = join(helper.ep, 'events.jsonl');
    const text = readFileSync(path, 'utf8');
    const lines = text.split('\n');
    const at = lines.findIndex((l) => l.includes('"kind":"calculation"'));
    const edited = JSON.parse(lines[at]!);
    edited.receipt.stdout = edited.receipt.stdout.replace(/"alpha": [^,]+/, '"alpha": 0.5');
    lines[at] = JSON.stringify(edited);
    writeFileSync(path, lines.join('\n'));
    try {
      const bad = await cli(['episode', 'verify', '--episode', helper.ep]);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toBe("calculation call 1 does not replay: stdout text differs from the receipt's\n");
      expect(bad.json.calls[0]).toMatchObject({ call: 1, outcome: 'differs' });
    } finally {
      writeFileSync(path, text);
    }
  }, 120_000);
});

describe.skipIf(!sandbox.available)("the benchmark's protocol: native calculations, its receipt form, its prompt", () => {
  it('calculate_python runs numpy and the public helpers on the globals; a killed call returns 137; submit_diagnosis takes JSON text', async () => {
    const ep = await startEpisode(6, ['--call-seconds', '2']);
    const client = await stdioClient(ep);
    try {
      const tools = Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t]));
      expect(tools.calculate_python!.description).toMatch(/numpy, scipy and scikit-learn/);
      expect((await call(client, 'observe', { masks: BOUGHT })).json.credits_remaining).toBe(1);
      const code = [
        'import json, os, numpy as np',
        'from wwb_helpers import fit_surface, suggest_experiments',
        'fit = fit_surface(observations, degree=2)',
        'print(json.dumps({"files": sorted(os.listdir(".")), "cwd": os.getcwd(), "condition": task["condition"],',
        '  "masks": [o["mask"] for o in observations], "left": evidence["calculation_calls_remaining"],',
        '  "next": suggest_experiments(observations, count=1, degree=2), "n": len(fit["predictions"]), "np": np.__version__}))',
      ].join('\n');
      const fitted = await call(client, 'calculate_python', { code });
      expect(fitted.json, fitted.json.stderr).toMatchObject({
        returncode: 0,
        timed_out: false,
        status: 'ok',
        calculation_calls_remaining: 19,
      });
      const out = JSON.parse(fitted.json.stdout);
      expect(out).toMatchObject({ files: ['evidence.json', 'wwb_helpers.py'], cwd: '/job', condition: 'toy', n: 16, left: 19 });
      expect(out.masks).toEqual(['0000', '1111', ...BOUGHT]);
      expect(out.next).toHaveLength(1);
      // stopped by its 2-second wall limit: the benchmark's receipt says 137 and timed out
      const slept = await call(client, 'calculate_python', { code: 'import time\nprint("a", flush=True)\ntime.sleep(30)' });
      expect(slept.json).toMatchObject({ returncode: 137, timed_out: true, status: 'timed_out' });
      const table = Object.fromEntries(Array.from({ length: 16 }, (_, k) => [maskOf(k, 4), 0.5]));
      const submitted = await call(client, 'submit_diagnosis', { predictions_json: JSON.stringify(table) });
      expect(submitted.json.closed).toBe(true);
    } finally {
      await client.close();
    }
    // native calculations replay bit for bit under the profile; the stopped one is said so, not replayed
    const verified = (await cli(['episode', 'verify', '--episode', ep])).json;
    expect(verified.calls.map((c: { outcome: string }) => c.outcome)).toEqual(['replayed', 'stopped']);
    expect(verified.ok).toBe(true);
  }, 120_000);

  it("the prompt `episode` says every fact of the benchmark's prompt; --prompt FILE replaces it, an unknown placeholder is refused", async () => {
    const ep = await startEpisode(6, ['--session-seconds', '1800']);
    const client = await stdioClient(ep);
    try {
      const { prompts } = await client.listPrompts();
      expect(prompts.map((p) => p.name)).toEqual(['episode']);
      const text = ((await client.getPrompt({ name: 'episode' })).messages[0]!.content as { text: string }).text;
      for (const fact of [
        '16 configurations',
        'A,B,C,D',
        'buy 6 more',
        '32 pairs',
        '1800 seconds',
        'at most 20 calls',
        '30 CPU seconds',
        '45 wall',
      ])
        expect(text).toContain(fact);
      expect(text).toMatch(/submit_diagnosis with predictions_json[\s\S]*ridge_main[\s\S]*FREE OBSERVATIONS:\n\[\{"mask":"0000"/);
      expect(JSON.parse(text.slice(text.indexOf('TASK:\n') + 6))).toMatchObject({ condition: 'toy', dimensions: 4 });
    } finally {
      await client.close();
    }
    const template = join(dir, 'prompt.txt');
    writeFileSync(template, 'Options {{letters}}, budget {{budget}}.');
    const own = new Client({ name: 'test-agent', version: '1.0.0' });
    await own.connect(
      new StdioClientTransport({ command: 'node', args: [BIN, 'serve', '--episode', ep, '--prompt', template], cwd: ROOT, stderr: 'pipe' }),
    );
    try {
      expect(((await own.getPrompt({ name: 'episode' })).messages[0]!.content as { text: string }).text).toBe('Options A,B,C,D, budget 6.');
    } finally {
      await own.close();
    }
    writeFileSync(template, 'Budget {{money}}.');
    refusedLine(
      await cli(['serve', '--episode', ep, '--prompt', template]),
      /^wwref: --prompt .* names \{\{money\}\}, which is not one of \{\{configurations\}\}/,
    );
  }, 120_000);
});

describe('limits, deadline and undelivered episodes', () => {
  it('after the deadline observe, calculate and submit are refused (one line, logged); the episode scores as undelivered', async () => {
    const ep = await startEpisode(3, ['--session-seconds', '1', '--calls', '2']);
    expect((await cli(['episode', 'observe', '--episode', ep, '--masks', '0011'])).code).toBe(0);
    await new Promise((r) => setTimeout(r, 1100));
    const status = (await cli(['episode', 'status', '--episode', ep])).json;
    expect(status.session).toMatchObject({ seconds_left: 0, deadline_seconds: 1 });
    expect(status.session.seconds_used).toBeGreaterThanOrEqual(1);
    const deadline = /the session's deadline \(1 s after the start\) has passed/;
    refusedLine(await cli(['episode', 'observe', '--episode', ep, '--masks', '0101']), deadline);
    refusedLine(await cli(['episode', 'submit', '--episode', ep, '--estimator', 'ridge_main']), deadline);
    await expect(calculate(settings, ep, 'print(1)')).rejects.toThrow(deadline);
    const refusals = events(ep).filter((e) => e.outcome === 'refused');
    expect(refusals.map((e) => e.action)).toEqual(['observe', 'submit', 'calculate']);
    const score = (await cli(['episode', 'score', '--episode', ep])).json;
    expect(score).toMatchObject({
      delivered: false,
      undelivered: true,
      artifact_valid: false,
      effect_recovery: 0,
      strict_effect_reconstruction: false,
      prediction_table: null,
      purchased: 1,
      // when the deadline fell: the start's time and one second
      ended: { reason: 'the session deadline passed', at: new Date(Date.parse(events(ep)[0].at) + 1000).toISOString() },
    });
    expect(score.recovery_gain_over_shared.gp).toBe(-score.shared_gp_score.effect_recovery);
  }, 60_000);

  it('episode end closes without a submission (logged); it scores as undelivered; the wrong options and a second end are refused', async () => {
    const ep = await startEpisode(2);
    refusedLine(await cli(['episode', 'end', '--episode', ep]), /episode end needs --reason TEXT/);
    refusedLine(await cli(['episode', 'end', '--episode', ep, '--reason', 'x', '--masks', '0001']), /does not take --masks/);
    // a reason is shown on one line (status, a refusal): no newline, tab or terminal escape in it
    for (const reason of ['two\nlines', 'tab\there', 'red \u001b[31m'])
      refusedLine(await cli(['episode', 'end', '--episode', ep, '--reason', reason]), /--reason holds a control character/);
    expect((await cli(['episode', 'status', '--episode', ep])).json.closed).toBe(false);
    refusedLine(
      await cli([
        'episode',
        'start',
        '--episode',
        join(dir, 'bad'),
        '--condition',
        'toy',
        '--budget',
        '1',
        '--calls',
        '99',
        '--references',
        refs,
      ]),
      /--calls must be a whole number from 0 to 50/,
    );
    refusedLine(await cli(['episode', 'score', '--episode', ep]), /still open/);
    const ended = await cli(['episode', 'end', '--episode', ep, '--reason', 'the agent exited']);
    expect([ended.code, ended.json.closed, ended.json.reason]).toEqual([0, true, 'the agent exited']);
    refusedLine(await cli(['episode', 'observe', '--episode', ep, '--masks', '0001']), /ended without a submission \(the agent exited\)/);
    refusedLine(await cli(['episode', 'end', '--episode', ep, '--reason', 'again']), /already ended/);
    const score = (await cli(['episode', 'score', '--episode', ep])).json;
    expect(score).toMatchObject({ undelivered: true, effect_recovery: 0, ended: { reason: 'the agent exited' }, purchased: 0 });
    expect(Object.keys(score)).toEqual(expect.arrayContaining(['shared_degree1_score', 'shared_degree2_score', 'shared_gp_score']));
  }, 60_000);

  it.skipIf(!sandbox.available)(
    'a server launched holding descriptors of host files (fds 40 and 250, not close-on-exec): no calculation reaches them',
    async () => {
      const ep = await startEpisode(1, ['--engine', 'pyodide']); // its scan is JavaScript (the native engine's: sandbox-escapes.test.ts)
      const victim = join(dir, 'victim.txt');
      const secret = join(dir, 'secret.txt');
      writeFileSync(victim, 'untouched\n');
      writeFileSync(secret, 'SECRET-OF-THE-HOST\n');
      const client = new Client({ name: 'test-agent', version: '1.0.0' });
      // (node itself reuses its low descriptors at start: those a launcher leaves higher up stay open in it)
      const launcher = `exec 40>>"$1" 250<"$2"; exec node "$3" serve --episode "$4"`;
      await client.connect(
        new StdioClientTransport({
          command: 'bash',
          args: ['-c', launcher, 'launcher', victim, secret, BIN, ep],
          cwd: ROOT,
          stderr: 'pipe',
        }),
      );
      try {
        // every descriptor of the calculation's process that is a file: written to and read
        const scan =
          "import pyodide_js\nprint(pyodide_js.FS.mkdir.constructor(\"const fs = process.getBuiltinModule('fs'); const found = []; " +
          'for (let fd = 3; fd < 1024; fd++) { try { if (!fs.fstatSync(fd).isFile()) continue } catch { continue } found.push(fd); ' +
          "try { fs.writeSync(fd, 'WRITTEN-FROM-SANDBOX') } catch {} try { const b = Buffer.alloc(64); fs.readSync(fd, b, 0, 64, 0); found.push(String(b)) } catch {} } " +
          'return JSON.stringify(found)")())';
        const result = await call(client, 'calculate_python', { code: scan });
        expect(result.json).toMatchObject({ status: 'ok', returncode: 0, stdout: '[]\n' });
      } finally {
        await client.close();
      }
      expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
    },
    60_000,
  );

  it('where calculations are off, the server offers no calculate and its instructions say why; a calculation is refused, logged', async () => {
    const ep = await startEpisode(1);
    const client = new Client({ name: 'test-agent', version: '1.0.0' });
    const env = { ...(process.env as Record<string, string>), WWREF_SANDBOX: 'off' };
    await client.connect(
      new StdioClientTransport({ command: 'node', args: [BIN, 'serve', '--episode', ep], cwd: ROOT, env, stderr: 'pipe' }),
    );
    try {
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(['observe', 'status', 'submit_diagnosis', 'task']);
      expect(client.getInstructions()).toMatch(/No `calculate_python` tool: .*\(calculations are turned off here \(WWREF_SANDBOX=off\)\)/);
    } finally {
      await client.close();
    }
    const script = join(ROOT, 'test', 'support', 'episode-calculate.ts');
    const child = await execa('node', ['--import', 'tsx', script, ep, 'print(1)'], {
      cwd: ROOT,
      env: { WWREF_SANDBOX: 'off' },
      reject: false,
    });
    expect(child.stderr).toMatch(/calculations are not offered here: calculations are turned off here/);
    expect(events(ep).at(-1)).toMatchObject({ action: 'calculate', outcome: 'refused' });
    expect((await cli(['episode', 'status', '--episode', ep])).json.calculations.used).toBe(0);
  }, 60_000);

  it.skipIf(!sandbox.available)(
    'a call cut short by kill -9 stays counted: the next call is the next number, verify reports it unanswered',
    async () => {
      const ep = await startEpisode(1, ['--calls', '2']);
      const script = join(ROOT, 'test', 'support', 'episode-calculate.ts');
      const child = execa('node', ['--import', 'tsx', script, ep, 'print(1)'], { cwd: ROOT, reject: false });
      // killed once its call is reserved (the reservation is in the log), before its receipt
      const reserved = () => events(ep).some((e) => e.action === 'calculate');
      for (let k = 0; k < 400 && !reserved() && child.exitCode === null; k++) await new Promise((r) => setTimeout(r, 25));
      expect(events(ep).at(-1), String(child.exitCode)).toMatchObject({ action: 'calculate', outcome: 'ok', call: 1 });
      child.kill('SIGKILL');
      await child;
      expect(events(ep).some((e) => e.kind === 'calculation')).toBe(false);
      expect((await cli(['episode', 'status', '--episode', ep])).json.calculations).toEqual({ limit: 2, used: 1, remaining: 1 });
      const next = await calculate(settings, ep, 'print(evidence["calculation_calls_remaining"], evidence["call"])');
      expect([next.call, next.stdout]).toEqual([2, '0 2\n']);
      const verified = (await cli(['episode', 'verify', '--episode', ep])).json;
      expect(verified.ok).toBe(true);
      expect(verified.calls.map((c: { outcome: string }) => c.outcome)).toEqual(['unanswered', 'replayed']);
    },
    120_000,
  );
});
