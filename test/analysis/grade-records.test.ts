// `wwref grade --records`: stored submissions scored again, observations checked, stored scores compared.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { cliInProcess } from '../support/cli.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-records-'));
const refs = join(dir, 'references');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// One instance with a 4- and a 6-option condition, and a condition of its own.
const u4 = (k: number) => 0.2 + 0.05 * (k % 5);
const u6 = (k: number) => 0.1 + 0.01 * ((k * 7) % 11);
writeSurfaceCatalog(refs, [
  { condition: 'inst', source: 'inst', dimensions: 4, utility: (_z, k) => u4(k) },
  { condition: 'inst__d6', source: 'inst', dimensions: 6, utility: (_z, k) => u6(k) },
  { condition: 'lone', dimensions: 4, utility: (z) => 0.3 + 0.1 * z[0]! },
]);

const table = (d: number, value: (k: number) => number) =>
  Object.fromEntries(Array.from({ length: 2 ** d }, (_, k) => [maskOf(k, d), value(k)]));
const writeLines = (name: string, records: unknown[]) => {
  const path = join(dir, name);
  writeFileSync(path, `${records.map((r) => JSON.stringify(r)).join('\n')}\n`);
  return path;
};
const grade = (file: string) => cliInProcess(['grade', '--references', refs, '--records', file], ROOT);

const base = [
  // an instance: the table's mask width chooses inst__d6; observations as a list
  {
    instance: 'inst',
    observations: [
      { mask: '000000', utility: u6(0) },
      { mask: '111111', utility: u6(63) },
    ],
    prediction_table: table(6, () => 0.5),
  },
  // the same instance, four options; observations as an object
  { instance: 'inst', observations: { '0000': u4(0), '1111': u4(15) }, prediction_table: table(4, u4) },
  { condition: 'lone', observations: [], prediction_table: table(4, (k) => (k >= 8 ? 0.4 : 0.3)) },
];

describe('grade --records', () => {
  it('scores every record, choosing the condition of an instance by the mask width', async () => {
    const r = await grade(writeLines('plain.jsonl', base));
    expect(r.stderr).toContain('3 record(s) scored, 0 stored score(s) compared: 0 difference(s)');
    expect(r.code).toBe(0);
    const outcome = JSON.parse(r.stdout);
    expect(outcome.scores.map((s: { condition: string }) => s.condition)).toEqual(['inst__d6', 'inst', 'lone']);
    const [d6, d4, lone] = outcome.scores.map((s: { score: Record<string, unknown> }) => s.score);
    expect(d6.observed).toEqual(['000000', '111111']);
    expect(d6.prediction_table['000000']).toBe(u6(0)); // the observed cell, replaced
    expect([d4.effect_mae, d4.effect_recovery, d4.exact_optimal_choice]).toEqual([0, 1, true]);
    expect([lone.effect_mae, lone.grid_mae, lone.selected_mask]).toEqual([0, 0, '1000']);
  });

  it('passes stored scores that agree and flags a changed field, naming record and field (exit 1)', async () => {
    const first = JSON.parse((await grade(writeLines('plain2.jsonl', base))).stdout);
    const stored = base.map((rec, k) => ({ ...rec, score: first.scores[k].score }));
    const same = await grade(writeLines('same.jsonl', stored));
    expect(same.code).toBe(0);
    expect(same.stderr).toContain('3 stored score(s) compared: 0 difference(s)');
    // a stored score may leave out the reader's fields, not the benchmark's: each one missing is a difference
    const { reference_optima, true_maximum, strict_tolerances, ...benchmark } = first.scores[2].score;
    expect([reference_optima, true_maximum, strict_tolerances]).not.toContain(undefined);
    expect((await grade(writeLines('subset.jsonl', [{ ...base[2], score: benchmark }]))).code).toBe(0);
    const empty = await grade(writeLines('empty-score.jsonl', [{ ...base[2], score: {} }]));
    expect(empty.code).toBe(1);
    expect(JSON.parse(empty.stdout).differences).toHaveLength(14);
    expect(empty.stderr).toContain('record 1 (line 1, lone): score.effect_mae: stored absent, recomputed 0');
    const { grid_mae: _dropped, ...without } = benchmark;
    const dropped = await grade(writeLines('no-grid.jsonl', [{ ...base[2], score: without }]));
    expect([dropped.code, JSON.parse(dropped.stdout).differences.map((d: { field: string }) => d.field)]).toEqual([1, ['score.grid_mae']]);

    const changed = structuredClone(stored);
    changed[1]!.score.effect_recovery = 0.99;
    changed[0]!.score.prediction_table['010101'] = 0.25;
    changed[2]!.score.near_optimal_choice = false;
    (changed[2]!.score as Record<string, unknown>).budget = 8;
    const r = await grade(writeLines('changed.jsonl', changed));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('record 1 (line 1, inst__d6): score.prediction_table.010101: stored 0.25, recomputed 0.5');
    expect(r.stderr).toContain('record 2 (line 2, inst): score.effect_recovery: stored 0.99, recomputed 1');
    expect(r.stderr).toContain('record 3 (line 3, lone): score.near_optimal_choice: stored false, recomputed true');
    expect(r.stderr).toContain('record 3 (line 3, lone): score.budget: stored 8, recomputed absent');
    expect(JSON.parse(r.stdout).differences).toHaveLength(4);
  });

  it('--shared with a record of fewer than two observations: one line naming the record, exit 2', async () => {
    const file = writeLines('one-observation.jsonl', [base[0], { ...base[2], observations: { '0000': 0.3 } }]);
    const r = await cliInProcess(['grade', '--references', refs, '--records', file, '--shared'], ROOT);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      'wwref: record 2 (line 2): 1 observation(s); the shared estimators need at least two (leave out --shared)',
    ]);
  });

  it('holds observations to no budget: a record carries none', async () => {
    const all = Object.fromEntries(Array.from({ length: 16 }, (_, k) => [maskOf(k, 4), u4(k)]));
    const r = await grade(writeLines('all-observed.jsonl', [{ ...base[1], observations: all }]));
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).scores[0].score.observed).toHaveLength(16);
  });

  it('flags an observation that is not the reference value', async () => {
    const wrong = [{ ...base[1], observations: { '0000': u4(0), '1111': u4(15) + 1e-6 } }];
    const r = await grade(writeLines('wrong-obs.jsonl', wrong));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/record 1 \(line 1, inst\): observations\.1111: stored 0\.\d+, recomputed 0\.\d+/);
  });

  it('refuses a malformed record with one line naming it (exit 2)', async () => {
    const cases: [string, RegExp][] = [
      [
        `${JSON.stringify(base[2])}\n{"condition": "lone", "condition": "lone"}`,
        /record 2 \(line 2\) is not strict JSON: duplicate key "condition"/,
      ],
      [
        JSON.stringify({ instance: 'nope', prediction_table: table(4, () => 0.5) }),
        /record 1 \(line 1\): instance 'nope' has no condition of 4 options/,
      ],
      [JSON.stringify({ instance: 'inst', prediction_table: table(5, () => 0.5) }), /instance 'inst' has no condition of 5 options/],
      [
        JSON.stringify({ condition: 'lone', prediction_table: { ...table(4, () => 0.5), '0001': 'x' } }),
        /record 1 \(line 1\): prediction_table is invalid .*\n {2}- key "0001": the value of mask 0001 is not a decimal number/,
      ],
      [JSON.stringify({ condition: 'lone', prediction_table: table(4, () => 0.5), score: [1] }), /"score" is not an object/],
      [
        JSON.stringify({ condition: 'lone', instance: 'inst', prediction_table: table(4, () => 0.5) }),
        /record 1 \(line 1\): instance "inst" is not the source of condition 'lone' \(src_lone\)/,
      ],
      ['', /records file .* holds no record/],
      ['\n  \n', /records file .* holds no record/],
      // a misspelled key or a prototype key is refused, never ignored
      [
        JSON.stringify({ condition: 'lone', prediction_table: table(4, () => 0.5), scores: {} }),
        /record 1 \(line 1\): key "scores" is not "score" \(a misspelled key is refused, never ignored\)/,
      ],
      [JSON.stringify({ condition: 'lone', prediction_table: table(4, () => 0.5), Score: {} }), /key "Score" is not "score"/],
      [
        `{"condition": "lone", "__proto__": {"score": {}}, "prediction_table": ${JSON.stringify(table(4, () => 0.5))}}`,
        /key "__proto__" is an object's prototype key; refused/,
      ],
      // a condition named like an object's inherited member is no condition of the manifest
      [
        JSON.stringify({ condition: 'constructor', prediction_table: table(4, () => 0.5) }),
        /condition 'constructor' is not in the reference manifest/,
      ],
      [
        JSON.stringify({ condition: 'toString', prediction_table: table(4, () => 0.5) }),
        /condition 'toString' is not in the reference manifest/,
      ],
    ];
    for (const [text, pattern] of cases) {
      const path = join(dir, 'bad.jsonl');
      writeFileSync(path, text);
      const r = await grade(path);
      expect(r.code, text).toBe(2);
      expect(r.stderr).toMatch(pattern);
    }
    // read in blocks, a line at a time: an over-long line and a file of newlines end with one line, exit 2
    const huge = join(dir, 'huge.jsonl');
    writeFileSync(huge, `${JSON.stringify(base[2])}\n{"condition": "lone", "x": "${'y'.repeat(5 << 20)}"}\n`);
    const long = await grade(huge);
    expect([long.code, long.stderr]).toEqual([
      2,
      expect.stringMatching(/^wwref: records file \S+, line 2 is over 4194304 bytes; refused\n$/),
    ]);
    writeFileSync(huge, '\n'.repeat(50 << 20));
    const blank = await grade(huge);
    expect([blank.code, blank.stderr]).toEqual([2, expect.stringMatching(/^wwref: records file \S+ holds no record\n$/)]);
    const mixed = await cliInProcess(['grade', '--references', refs, '--records', join(dir, 'bad.jsonl'), '--condition', 'lone'], ROOT);
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toMatch(/--records takes the condition/);
  });
});
