// `wwref grade --records` on agent records in the benchmark's form (results/agent_results.json): the
// published agent-score fields beside grade's, an undelivered record's published score, the derived
// fields (credits spent, the record's own recovery), and the order the shared estimators are refitted
// in (a list's own; an object's acquisition_order). Then, when a copy of the published agent records is
// kept in ../shared/published, every one of them regraded with 0 differences (read at test time).
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AGENT_SCORE_FIELDS, agentScore, gradeRecords, UNDELIVERED_SCORE } from '../../pipelines/analysis/grade-records.ts';
import { gradeSurface, referenceSurface } from '../../pipelines/analysis/grade.ts';
import { allMasks, maskIndex } from '../../pipelines/catalog/masks.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { cliInProcess, cliProcess } from '../support/cli.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';
import { currentSettings } from '../support/workspace.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-agent-records-'));
const refs = join(dir, 'references');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const u4 = (k: number) => 0.2 + 0.05 * (k % 5) + 0.01 * (k >> 3);
writeSurfaceCatalog(refs, [{ condition: 'inst', source: 'inst', dimensions: 4, utility: (_z, k) => u4(k) }]);
const settings = currentSettings();
const surface = referenceSurface(settings, 'inst', refs);
const table = (value: (k: number) => number) => Object.fromEntries(Array.from({ length: 16 }, (_, k) => [maskOf(k, 4), value(k)]));
const flat = (value: number) => Array.from({ length: 16 }, () => value);
const observed = (masks: string[]) => masks.map((mask) => ({ mask, utility: u4(maskIndex(mask, 4)) }));
const writeLines = (name: string, records: unknown[]) => {
  const path = join(dir, name);
  writeFileSync(path, `${records.map((r) => JSON.stringify(r)).join('\n')}\n`);
  return path;
};
const grade = (file: string) => cliInProcess(['grade', '--references', refs, '--records', file], ROOT);
const pick = (o: object, keys: readonly string[]) => Object.fromEntries(keys.map((k) => [k, (o as Record<string, unknown>)[k]]));

describe('the published agent-score fields', () => {
  it("are grade's, halved or quartered, over the unobserved masks, and the reference's option effects on both backgrounds", () => {
    const masks = ['0000', '1111', '0110', '1000'];
    const graded = gradeSurface(surface, flat(0.3), { observed: masks });
    const score = agentScore(surface, graded);
    expect(Object.keys(score)).toEqual(expect.arrayContaining([...AGENT_SCORE_FIELDS, 'selected_mask', 'exact_optimal_choice']));
    expect([score.effect_error, score.interaction_error]).toEqual([graded.effect_mae / 2, graded.interaction_mae / 4]);
    const unobserved = allMasks(4).filter((m) => !masks.includes(m));
    const mean = unobserved.reduce((sum, m) => sum + Math.abs(0.3 - u4(maskIndex(m, 4))), 0) / unobserved.length;
    expect(score.unobserved_grid_mae).toBeCloseTo(mean, 15);
    expect(score.grid_mae).toBeCloseTo((mean * unobserved.length) / 16, 15);
    expect([score.n_grid_cells, score.n_observed_cells, score.n_support, score.n_components]).toEqual([16, 4, 1, 4]);
    expect(score.canonicalization_corrections).toEqual([]);
    const task = score.per_support.task;
    expect(pick(task, ['effect_error', 'interaction_error', 'grid_mae', 'support_regret', 'selected_mask'])).toEqual(
      pick(score, ['effect_error', 'interaction_error', 'grid_mae', 'support_regret', 'selected_mask']),
    );
    // A is the first (leftmost) option: on the all-off background A alone against none, on the all-on one all against all but A
    expect(task.base_effects).toEqual({ A: u4(8) - u4(0), B: u4(4) - u4(0), C: u4(2) - u4(0), D: u4(1) - u4(0) });
    expect(task.full_effects).toEqual({ A: u4(15) - u4(7), B: u4(15) - u4(11), C: u4(15) - u4(13), D: u4(15) - u4(14) });
    // every mask observed: nothing left unobserved
    expect(agentScore(surface, gradeSurface(surface, flat(0.3), { observed: allMasks(4) })).unobserved_grid_mae).toBe(0);
  });
});

describe('grade --records on agent records', () => {
  const masks = ['0000', '1111', '0110', '1000'];
  const full = agentScore(surface, gradeSurface(surface, flat(0.3), { observed: masks }));
  const agentForm = pick(full, AGENT_SCORE_FIELDS);
  const delivered = {
    instance: 'inst',
    family: 'classification',
    budget: 2,
    model: 'm',
    repeat: 0,
    job_id: 'j',
    artifact_valid: true,
    observations: observed(masks),
    credits_spent: 2,
    score: agentForm,
    cohort: 'c',
  };
  // undelivered: no table; the condition is the instance's of the observations' width
  const undelivered = { ...delivered, artifact_valid: false, score: UNDELIVERED_SCORE };

  it('regrades the published form, delivered and undelivered, with 0 differences', async () => {
    const r = await grade(writeLines('agent.jsonl', [delivered, undelivered, { ...delivered, score: full }]));
    expect(r.stderr).toContain('3 record(s) scored, 3 stored score(s) compared: 0 difference(s)');
    expect(r.code).toBe(0);
    const scores = JSON.parse(r.stdout).scores.map((s: { score: unknown }) => s.score);
    expect(scores[1]).toEqual({ effect_recovery: 0, strict_effect_reconstruction: false });
    expect(scores[0]).toMatchObject(JSON.parse(JSON.stringify(full)));
  });

  it('names each field that differs: a field of the form left out, the undelivered score, the credits, the own recovery', async () => {
    const { unobserved_grid_mae: _left, ...without } = agentForm;
    const records = [
      { ...delivered, score: without },
      { ...delivered, score: { ...agentForm, per_support: { task: { ...full.per_support.task, base_effects: {} } } } },
      { ...undelivered, score: { effect_recovery: 0.1, strict_effect_reconstruction: false } },
      { ...undelivered, score: full },
      { ...delivered, credits_spent: 3, effect_recovery: 0.5 },
    ];
    const r = await grade(writeLines('agent-wrong.jsonl', records));
    expect(r.code).toBe(1);
    const fields = JSON.parse(r.stdout).differences.map((d: { record: number; field: string }) => `${d.record} ${d.field}`);
    expect(fields).toEqual([
      '1 score.unobserved_grid_mae',
      '2 score.per_support.task.base_effects.A',
      '2 score.per_support.task.base_effects.B',
      '2 score.per_support.task.base_effects.C',
      '2 score.per_support.task.base_effects.D',
      '3 score.effect_recovery',
      // a full score where the undelivered one belongs: every field but those equal to the published form's
      ...Object.entries(full)
        .filter(([k, v]) => !Object.hasOwn(UNDELIVERED_SCORE, k) || UNDELIVERED_SCORE[k as keyof typeof UNDELIVERED_SCORE] !== v)
        .map(([k]) => `4 score.${k}`),
      '5 credits_spent',
      '5 effect_recovery',
    ]);
  });

  it('refits the shared estimators in the acquisition order: a list in its own, an object in its acquisition_order', () => {
    const order = ['0000', '1111', '1000', '0110', '0001'];
    const asObject = Object.fromEntries(order.map((m) => [m, u4(maskIndex(m, 4))]));
    // a parsed object puts integer-like masks ("1111", "1000") first: its key order is not the record's
    expect(Object.keys(JSON.parse(JSON.stringify(asObject)))).not.toEqual(order);
    const file = writeLines('order.jsonl', [
      { ...delivered, observations: observed(order), prediction_table: table(() => 0.3), score: undefined, shared_degree2_score: 0 },
      { condition: 'inst', observations: asObject, acquisition_order: order, prediction_table: table(() => 0.3), shared_degree1_score: 0 },
    ]);
    const outcome = gradeRecords(settings, file, refs);
    expect(outcome.shared_requests.map((q) => q.observations.map(([m]) => m))).toEqual([order, order]);
    expect(outcome.shared_requests[0]!.observations[2]).toEqual(['1000', u4(8)]);
    // a list whose acquisition_order disagrees is a difference; an order that is not the object's masks is refused
    const wrong = gradeRecords(
      settings,
      writeLines('order-wrong.jsonl', [{ ...delivered, acquisition_order: [...masks].reverse() }]),
      refs,
    );
    expect(wrong.differences.map((d) => d.field)).toEqual(['acquisition_order']);
    const bad = writeLines('order-bad.jsonl', [{ condition: 'inst', observations: asObject, acquisition_order: order.slice(1) }]);
    expect(() => gradeRecords(settings, bad, refs)).toThrow(/"acquisition_order" is not the list of the observations' masks/);
  });
});

describe('the published agent records', () => {
  // a copy of results/agent_results.json (a JSON array) kept beside the other published facts
  const candidates = ['agent_results.json', join('results', 'agent_results.json')].map((f) => join(settings.paths.published, f));
  const published = candidates.find((f) => existsSync(f));
  if (!published) console.warn(`skipped: no published agent records at ${candidates.join(' or ')}`);
  it.skipIf(!published)(
    'every field of every published agent record is regraded with 0 differences (scores, shared estimators, credits)',
    async () => {
      // conditions whose committed references are not the published ones (the manifest says so: their
      // prepared inputs could not be recovered) are left out, and said
      const manifest = JSON.parse(readFileSync(join(ROOT, 'outputs', 'references', 'manifest.json'), 'utf8')) as {
        conditions: Record<string, { source: string; published?: { comparable?: boolean } }>;
      };
      const apart = new Set(
        Object.values(manifest.conditions)
          .filter((c) => c.published?.comparable === false)
          .map((c) => c.source),
      );
      const all = JSON.parse(readFileSync(published!, 'utf8')) as { instance?: string }[];
      const records = all.filter((r) => !apart.has(String(r.instance)));
      if (records.length < all.length)
        console.warn(
          `${all.length - records.length} published agent record(s) of ${[...apart].join(', ')} left out: their references are not the published ones`,
        );
      expect(records.length).toBeGreaterThan(0);
      const file = writeLines('published.jsonl', records);
      const r = await cliProcess(['grade', '--records', file], ROOT);
      expect(r.stderr).toMatch(
        new RegExp(`^${records.length} record\\(s\\) scored, \\d+ stored score\\(s\\) compared: 0 difference\\(s\\)$`, 'm'),
      );
      expect(r.code).toBe(0);
    },
    900_000,
  );
});
