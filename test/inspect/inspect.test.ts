// WhatWorkedBench as an Inspect AI task, end to end with the real Inspect (inspect/.venv, created here on
// first use by scripts/setup-inspect, as CI runs no `npm run setup`), real wwref episodes served over
// MCP, real receipts and `wwref cohort import`. Offline: the model is Inspect's `mockllm/model`. Scripted
// (inspect/scripted_eval.py, Inspect's Python API: the only way Inspect scripts its mock model) on one
// condition × 2 budgets × 4 repeats, one behaviour per repeat: the greedy degree-2 design and the
// pair-effect ridge (its records must equal the `design_degree2` controls computed here), NumPy in
// `calculate_python` and a submitted table, malformed tool arguments and then a model failure, and a
// model that never calls a tool; a model slower than the session. Unscripted through the `inspect eval`
// command line, a JSON log.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { sandboxAvailable } from '../../pipelines/evaluation/sandbox/isolation.ts';
import { cliInProcess, cliProcess } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-inspect-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const VENV = join(ROOT, 'inspect', '.venv');
const sandbox = sandboxAvailable();

/** Why Inspect's environment could not be made (undefined: it is there). */
let unavailable: string | undefined;
beforeAll(async () => {
  const setup = await execa('bash', [join(ROOT, 'scripts', 'setup-inspect')], { cwd: ROOT, reject: false });
  if (setup.exitCode !== 0 || !existsSync(join(VENV, 'bin', 'inspect')))
    unavailable = `inspect-ai could not be installed into ${VENV}: ${String(setup.stderr).trim().split('\n').at(-1)}`;
}, 900_000);

const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

/** `inspect log dump LOG` of the task's environment: the whole log as JSON. */
async function dump(log: string): Promise<Record<string, any>> {
  const result = await execa(join(VENV, 'bin', 'inspect'), ['log', 'dump', log], { cwd: ROOT, maxBuffer: 1 << 30 });
  return JSON.parse(String(result.stdout));
}

/** A value of a sample's events with Inspect's `attachment://<hash>` references (long texts stored once) put back. */
function resolved(value: unknown, attachments: Record<string, string>): unknown {
  if (typeof value === 'string' && value.startsWith('attachment://')) return attachments[value.slice('attachment://'.length)] ?? value;
  if (Array.isArray(value)) return value.map((v) => resolved(v, attachments));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolved(v, attachments)]));
  return value;
}

/** The tool calls of a sample as its log records them: function, arguments, and the error the model was shown. */
const toolCalls = (sample: Record<string, any>) =>
  (sample.events as Record<string, any>[])
    .filter((e) => e.event === 'tool')
    .map((e) => resolved(e, sample.attachments ?? {}) as Record<string, any>)
    .map((e) => ({ function: e.function as string, arguments: e.arguments, error: e.error?.message ?? null, result: e.result }));

describe('the whatworked task with a scripted mockllm/model', () => {
  const out = join(dir, 'scripted');
  const behaviours = { '0': 'design', '1': 'numpy', '2': 'malformed', '3': 'silent' };

  it('runs 8 samples: the design equals the design_degree2 controls record for record; faults are undelivered; the import regrades', async (ctx) => {
    if (unavailable) return ctx.skip(unavailable);
    // the controls of the same cells, computed here: their purchases are what the scripted model buys
    const controls = await cliProcess(
      ['controls', 'run', '--condition', 'wine', '--budget', '4', '8', '--method', 'design_degree2', '--out', join(out, 'controls')],
      ROOT,
    );
    expect(controls.code, controls.stderr).toBe(0);
    const records = lines(join(out, 'controls', 'records.jsonl'));
    const designs = Object.fromEntries(records.map((r) => [`${r.condition}__b${r.budget}`, r.acquisition_order.slice(2)]));
    const plan = join(out, 'plan.json');
    writeFileSync(
      plan,
      JSON.stringify({
        task_args: { conditions: 'wine', budgets: '4,8', repeats: 4, max_messages: 12 },
        log_dir: join(out, 'logs'),
        designs,
        behaviours,
      }),
    );
    const run = await execa(join(VENV, 'bin', 'python'), [join(ROOT, 'inspect', 'scripted_eval.py'), plan], { cwd: ROOT, reject: false });
    expect(run.exitCode, String(run.stderr).slice(-2000)).toBe(0);
    const log = String(run.stdout).trim().split('\n').at(-1)!;
    expect(log).toMatch(/\.eval$/);

    // the log: every sample scored by wwref, every tool call with its arguments and what the model was shown
    const eval_ = await dump(log);
    expect(eval_.status).toBe('success');
    expect(eval_.samples).toHaveLength(8);
    const byId = new Map((eval_.samples as Record<string, any>[]).map((s) => [s.id as string, s]));
    for (const [id, sample] of byId) {
      const calls = toolCalls(sample);
      const score = sample.scores.episode_score;
      const kind = behaviours[id.slice(-1) as keyof typeof behaviours];
      expect(sample.error ?? null, id).toBeNull();
      expect(score.metadata.episode, id).toContain(`${id}`);
      if (kind === 'design') {
        expect(calls.map((c) => c.function)).toEqual(['task', 'observe', 'submit_diagnosis']);
        expect(calls[1]!.arguments).toEqual({ masks: designs[id.replace(/__r\d+$/, '')] });
        expect(calls[2]!.arguments).toEqual({ estimator: 'ridge_pair' });
        expect([score.answer, score.metadata.delivered, score.metadata.estimator.name]).toEqual(['delivered', true, 'ridge_pair']);
      } else if (kind === 'numpy' && sandbox.available) {
        expect(calls.map((c) => c.function)).toEqual(['observe', 'calculate_python', 'submit_diagnosis']);
        expect(calls[1]!.arguments.code).toContain('np.linalg.lstsq');
        expect(calls.map((c) => c.error)).toEqual([null, null, null]);
        expect([score.answer, score.metadata.estimator, score.metadata.calls_used]).toEqual(['delivered', null, 1]);
      } else if (kind === 'malformed') {
        // each refused with its reason shown to the model: a string for a list, an unknown argument, no JSON, a text value
        expect(calls.map((c) => c.function)).toEqual(['observe', 'observe', 'observe', 'submit_diagnosis']);
        for (const call of calls) expect(call.error, JSON.stringify(call)).toBeTruthy();
        expect(calls[2]!.error).toContain("Expecting ','");
        expect(score.answer).toBe('undelivered');
        expect(score.metadata.ended.reason).toBe(
          'the agent stopped on an error: RuntimeError: scripted model failure after malformed calls',
        );
      } else if (kind === 'silent') {
        expect(calls).toEqual([]);
        expect(score.answer).toBe('undelivered');
        expect(score.metadata.ended.reason).toBe('no submission within 12 messages: the agent was stopped');
      }
      if (kind !== 'design' && kind !== 'numpy') expect([score.value, score.metadata.purchased], id).toEqual([0, 0]);
    }
    // the metrics: family-macro recovery per (track, budget), the mean, the delivered share
    const metrics = eval_.results.scores[0].metrics;
    expect(Object.keys(metrics).sort()).toEqual(['delivered', 'four_b4', 'four_b8', 'mean']);
    expect(metrics.delivered.value).toBe(sandbox.available ? 0.5 : 0.25);

    // the import: a cohort folder whose design records are the controls', regraded with 0 differences
    const cohort = join(out, 'cohort');
    const imported = await cliProcess(['cohort', 'import', '--inspect-log', log, '--out', cohort], ROOT);
    expect(imported.code, imported.stderr).toBe(0);
    expect(imported.stdout).toContain(`8 episode(s) of mockllm/model (${sandbox.available ? 4 : 2} delivered)`);
    const results = lines(join(cohort, 'results.jsonl'));
    expect(results.map((r) => r.episode).sort()).toEqual([...byId.keys()].sort());
    for (const r of results.filter((r) => r.repeat === 0)) {
      const control = records.find((c) => c.condition === r.condition && c.budget === r.budget)!;
      expect(r.acquisition_order, r.episode).toEqual(control.acquisition_order);
      expect(Object.fromEntries(r.observations.map((o: { mask: string; utility: number }) => [o.mask, o.utility]))).toEqual(
        control.observations,
      );
      expect(Object.fromEntries(Object.keys(control.score).map((k) => [k, r.score[k]]))).toEqual(control.score);
      expect([r.model, r.labels, r.artifact_valid]).toEqual(['mockllm/model', { agent: 'inspect-react', model: 'mockllm/model' }, true]);
    }
    for (const r of results.filter((r) => r.repeat >= 2)) {
      expect([r.artifact_valid, r.score], r.episode).toEqual([false, { effect_recovery: 0, strict_effect_reconstruction: false }]);
      expect(r.undelivered_reason).toMatch(/^(the agent stopped on an error|no submission within 12 messages)/);
    }
    const regraded = await cliProcess(['grade', '--records', join(cohort, 'results.jsonl')], ROOT);
    expect(regraded.stderr).toContain('8 record(s) scored, 8 stored score(s) compared: 0 difference(s)');
    expect(regraded.code).toBe(0);
    const summary = JSON.parse(readFileSync(join(cohort, 'summary.json'), 'utf8'));
    expect(summary.family_macro.map((c: any) => [c.track, c.budget, c.episodes])).toEqual([
      ['four', 4, 4],
      ['four', 8, 4],
    ]);
    expect(existsSync(join(cohort, 'cohort-recovery.svg'))).toBe(true);
    expect(JSON.parse(readFileSync(join(cohort, 'inspect.json'), 'utf8')).model).toBe('mockllm/model');

    // a log whose score is not what its episode gives is refused: the import scores every receipt again
    const forged = join(out, 'forged.json');
    const first = eval_.samples.find((s: any) => s.id === 'wine__b4__r0');
    first.scores.episode_score.metadata.effect_recovery = 1;
    writeFileSync(forged, JSON.stringify(eval_));
    const refused = await cliInProcess(['cohort', 'import', '--inspect-log', forged, '--out', join(out, 'forged')], ROOT);
    expect(refused.code).toBe(2);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toContain(
      "sample wine__b4__r0: the score its log records is not what its episode's receipt gives (effect_recovery differs)",
    );
    // and leaves nothing of itself in the folder it was given
    expect(existsSync(join(out, 'forged')) ? readdirSync(join(out, 'forged')).filter((f) => f !== '.wwref.lock') : []).toEqual([]);
  }, 1_800_000);
});

describe('a model past the session', () => {
  it('is stopped at the session deadline, scored undelivered, imported as stopped by the deadline', async (ctx) => {
    if (unavailable) return ctx.skip(unavailable);
    const out = join(dir, 'slow');
    const plan = join(dir, 'slow-plan.json');
    // each model turn takes 120 s; the session is 4 s
    const task_args = { conditions: 'wine', budgets: '4', repeats: 1, session_seconds: 4 };
    writeFileSync(plan, JSON.stringify({ task_args, log_dir: join(out, 'logs'), behaviours: { '0': 'slow' } }));
    const run = await execa(join(VENV, 'bin', 'python'), [join(ROOT, 'inspect', 'scripted_eval.py'), plan], { cwd: ROOT, reject: false });
    expect(run.exitCode, String(run.stderr).slice(-2000)).toBe(0);
    const log = String(run.stdout).trim().split('\n').at(-1)!;
    const [sample] = (await dump(log)).samples;
    expect(sample.scores.episode_score.value).toBe(0);
    expect(sample.scores.episode_score.metadata.ended.reason).toBe("no submission within the session's 4 s: the agent was stopped");
    expect(sample.total_time).toBeLessThan(100);
    const imported = await cliProcess(['cohort', 'import', '--inspect-log', log, '--out', join(out, 'cohort')], ROOT);
    expect(imported.code, imported.stderr).toBe(0);
    const [result] = lines(join(out, 'cohort', 'results.jsonl'));
    expect([result!.artifact_valid, result!.process.stopped, result!.undelivered_reason]).toEqual([
      false,
      'deadline',
      "no submission within the session's 4 s: the agent was stopped",
    ]);
  }, 900_000);
});

describe('the whatworked task from the inspect eval command line', () => {
  it('runs mockllm/model unscripted on 4 samples: no tool call, each scored undelivered, the JSON log imported', async (ctx) => {
    if (unavailable) return ctx.skip(unavailable);
    const logs = join(dir, 'cli-logs');
    const grid = ['-T', 'conditions=wine,concrete', '-T', 'budgets=4', '-T', 'repeats=2', '-T', 'max_messages=20', '--max-samples', '2'];
    const run = await execa(
      join(VENV, 'bin', 'inspect'),
      ['eval', 'inspect/whatworked.py@whatworked', '--model', 'mockllm/model', ...grid],
      {
        cwd: ROOT,
        reject: false,
        env: { INSPECT_LOG_DIR: logs, INSPECT_LOG_FORMAT: 'json', INSPECT_DISPLAY: 'plain' },
      },
    );
    expect(run.exitCode, String(run.stderr).slice(-2000)).toBe(0);
    const found = readdirSync(logs).filter((f) => f.endsWith('.json') && f.includes('whatworked'));
    expect(found, String(run.stdout)).toHaveLength(1);
    const log = join(logs, found[0]!);
    const eval_ = JSON.parse(readFileSync(log, 'utf8'));
    expect(eval_.samples).toHaveLength(4);
    for (const sample of eval_.samples) {
      expect(toolCalls(sample), sample.id).toEqual([]);
      // mockllm's default answer is prose: the agent is reminded until its message limit, or (no network for
      // the tokenizer mockllm downloads to count its tokens) the model fails at once; undelivered either way
      expect(sample.scores.episode_score.value).toBe(0);
      expect(sample.scores.episode_score.metadata.ended.reason).toMatch(
        /^(no submission within 20 messages|the agent stopped on an error)/,
      );
    }
    const cohort = join(dir, 'cli-cohort');
    const imported = await cliProcess(['cohort', 'import', '--inspect-log', log, '--out', cohort], ROOT);
    expect(imported.code, imported.stderr).toBe(0);
    const results = lines(join(cohort, 'results.jsonl'));
    expect(results.map((r) => [r.artifact_valid, r.effect_recovery])).toEqual(Array(4).fill([false, 0]));
    expect(new Set(results.map((r) => r.episode)).size).toBe(4);
    // refusals: one line, exit 2
    for (const args of [
      ['cohort', 'import', '--out', join(dir, 'none')],
      ['cohort', 'import', '--inspect-log', join(ROOT, 'package.json'), '--out', join(dir, 'none')],
    ]) {
      const refused = await cliInProcess(args, ROOT);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    }
  }, 900_000);
});
