// Issue 40, `grade --records`: stored derived fields (the gains over the shared estimators, the shared
// scores) are refitted and compared whole, never kept unread; an array item without "mask" is named as
// such; and a real cohort's own results file, purchases bought in unsorted batches and some episodes
// undelivered, is regraded with 0 differences (the shared estimators refitted in the acquisition order
// the cohort fitted them in), its undelivered lines scored as undelivered.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UNDELIVERED_SCORE } from '../../pipelines/analysis/grade-records.ts';
import { maskIndex } from '../../pipelines/catalog/masks.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { cliInProcess, cliProcess } from '../support/cli.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-records-derived-'));
const refs = join(dir, 'references');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const u4 = (k: number) => 0.2 + 0.05 * (k % 5) + 0.01 * (k >> 3);
writeSurfaceCatalog(refs, [
  { condition: 'inst', source: 'inst', dimensions: 4, utility: (_z, k) => u4(k) },
  { condition: 'inst__d6', source: 'inst', dimensions: 6, utility: (_z, k) => 0.1 + 0.01 * ((k * 7) % 11) },
]);
const table = Object.fromEntries(Array.from({ length: 16 }, (_, k) => [maskOf(k, 4), 0.3]));
const observations = ['0000', '1111', '0110', '1000', '0011'].map((mask) => ({ mask, utility: u4(maskIndex(mask, 4)) }));
const writeLines = (name: string, records: unknown[]) => {
  const path = join(dir, name);
  writeFileSync(path, `${records.map((r) => JSON.stringify(r)).join('\n')}\n`);
  return path;
};
const grade = (file: string) => cliInProcess(['grade', '--references', refs, '--records', file], ROOT);
const fieldsOf = (stdout: string) =>
  (JSON.parse(stdout).differences as { record: number; field: string }[]).map((d) => `${d.record} ${d.field}`);

describe('stored derived fields', () => {
  const record = { condition: 'inst', observations, prediction_table: table };

  it('are refitted and compared whole: gains and shared scores left incomplete or edited are differences', async () => {
    // the refitted values first, then stored back as they are: no difference
    const first = await cliInProcess(['grade', '--references', refs, '--records', writeLines('plain.jsonl', [record]), '--shared'], ROOT);
    expect(first.code, first.stderr).toBe(0);
    const [shared] = JSON.parse(first.stdout).shared_scores;
    const { record: _r, line: _l, condition: _c, ...refitted } = shared;
    const { effect_recovery: _e, ...withoutRecovery } = refitted.shared_degree1_score;
    const r = await grade(
      writeLines('derived.jsonl', [
        { ...record, ...refitted },
        { ...record, recovery_gain_over_shared: 0.5 },
        { ...record, recovery_gain_over_shared: {} },
        { ...record, recovery_gain_over_shared: { ...refitted.recovery_gain_over_shared, gp: 0.5 } },
        // wwref's form (it names its estimator): every field; the published form: at least the effect_recovery a summary reads
        { ...record, shared_gp_score: { estimator: 'gp', effect_recovery: refitted.shared_gp_score.effect_recovery } },
        { ...record, shared_degree1_score: { effect_mae: withoutRecovery.effect_mae } },
        { ...record, shared_degree2_score: refitted.shared_degree2_score.effect_recovery },
      ]),
    );
    expect(r.code).toBe(1);
    const fields = fieldsOf(r.stdout);
    expect(fields.filter((f) => f.startsWith('1 '))).toEqual([]);
    expect(fields).toContain('2 recovery_gain_over_shared');
    expect(fields.filter((f) => f.startsWith('3 '))).toEqual([
      '3 recovery_gain_over_shared.degree1',
      '3 recovery_gain_over_shared.degree2',
      '3 recovery_gain_over_shared.gp',
    ]);
    expect(fields.filter((f) => f.startsWith('4 '))).toEqual(['4 recovery_gain_over_shared.gp']);
    const gpFields = fields.filter((f) => f.startsWith('5 '));
    expect(gpFields).toEqual(expect.arrayContaining(['5 shared_gp_score.parameters', '5 shared_gp_score.prediction_table']));
    expect(gpFields).not.toContain('5 shared_gp_score.effect_recovery');
    expect(fields.filter((f) => f.startsWith('6 '))).toEqual(['6 shared_degree1_score.effect_recovery']);
    expect(fields.filter((f) => f.startsWith('7 '))).toEqual([]);
  }, 120_000);
});

describe('an array item without "mask"', () => {
  it('is named as such, not taken for a width of no condition', async () => {
    const items = Array.from({ length: 16 }, (_, k) => ({ mask: maskOf(k, 4), utility: 0.3 }));
    for (const [key, value] of [
      ['prediction_table', [{ utility: 0.3 }, ...items.slice(1)]],
      ['observations', [{ utility: 0.2 }]],
    ] as const) {
      const r = await grade(writeLines(`no-mask-${key}.jsonl`, [{ instance: 'inst', prediction_table: items, [key]: value }]));
      expect(r.code, key).toBe(2);
      expect(r.stderr.trim(), key).toMatch(new RegExp(`record 1 \\(line 1\\): ${key}: item 0 (has no "mask" string|is not a mask)`));
      expect(r.stderr, key).not.toMatch(/width/);
    }
  });
});

describe("a cohort's own results", () => {
  it('are regraded with 0 differences: purchases in unsorted batches refitted in their order, undelivered lines as undelivered', async () => {
    const out = join(dir, 'cohort');
    const agent = `node ${join('test', 'support', 'scrambled-agent.mjs')}`;
    const run = await cliProcess(
      [
        'cohort',
        'run',
        '--agent',
        agent,
        '--out',
        out,
        '--condition',
        'wine',
        'spambase__d6',
        '--budget',
        '8',
        '--repeats',
        '2',
        '--parallel',
        '2',
      ],
      ROOT,
    );
    expect(run.code, run.stderr).toBe(0);
    const lines = readFileSync(join(out, 'results.jsonl'), 'utf8').split('\n').filter(Boolean);
    const results = lines.map((l) => JSON.parse(l));
    expect(results).toHaveLength(4);
    expect(results.filter((r) => r.artifact_valid === false)).toHaveLength(2);
    for (const r of results) {
      const bought: string[] = r.acquisition_order.slice(2);
      expect(bought, r.episode).not.toEqual([...bought].sort());
    }
    const regraded = await cliProcess(['grade', '--records', join(out, 'results.jsonl')], ROOT);
    expect(regraded.stderr).toContain('4 record(s) scored, 4 stored score(s) compared: 0 difference(s)');
    expect(regraded.code).toBe(0);
    const graded = JSON.parse(regraded.stdout);
    const undelivered = graded.scores.filter((_s: unknown, k: number) => results[k].artifact_valid === false);
    expect(undelivered.map((s: { score: unknown }) => s.score)).toEqual([UNDELIVERED_SCORE, UNDELIVERED_SCORE]);
    expect(graded.shared_scores).toHaveLength(4);
  }, 300_000);
});
