// Grading prediction tables against reference surfaces built in temporary folders.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import type { Surface } from '../../pipelines/analysis/effects.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import {
  gradeFile,
  gradeSurface,
  parseTolerances,
  readObservations,
  readPredictionTable,
  recoveryScore,
} from '../../pipelines/analysis/grade.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { publishedConditions } from '../../pipelines/catalog/published.ts';
import { currentSettings } from '../support/workspace.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-grade-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const csvOf = (values: readonly number[], d: number) => `mask,utility\n${values.map((v, k) => `${maskOf(k, d)},${v}`).join('\n')}\n`;

// A four-option reference: additive with an A×B interaction; range u(1101) − u(0010) = 0.6 − 0.05 = 0.55.
const four: Surface = {
  condition: 'four',
  dimensions: 4,
  utilities: [...Array(16).keys()].map((k) => {
    const [a, b, c, d] = [...maskOf(k, 4)].map(Number) as [number, number, number, number];
    return 0.1 + 0.2 * a + 0.1 * b - 0.05 * c + 0.1 * d + 0.1 * a * b;
  }),
};

// The two-option counterexample. Reference u(00)=0, u(10)=0.6, u(01)=0.2, u(11)=0.4 (range 0.6),
// so Δ_A(00)=0.6, Δ_A(01)=0.2, Δ_B(00)=0.2, Δ_B(10)=−0.2 and A_t = 1.2/4 = 0.3; the optimum is 10.
// Prediction: flat c everywhere except c+ε on 10. Its argmax is 10, the exact optimum, and its
// effects are Δ_A(00)=ε, Δ_A(01)=0, Δ_B(00)=0, Δ_B(10)=−ε. For 0 < ε ≤ 0.2 the errors are
// 0.6−ε, 0.2, 0.2, 0.2−ε, so E_t = (1.2 − 2ε)/4 = 0.3 − ε/2 and R_t = 1 − E_t/A_t = ε/0.6.
// Choosing ε = 0.6δ gives recovery exactly δ while the selection is perfect.
const two: Surface = { condition: 'two', dimensions: 2, utilities: [0, 0.2, 0.6, 0.4] }; // index = mask integer: 00, 01, 10, 11
const counterexample = (delta: number, c = 0.5) => [c, c, c + 0.6 * delta, c];

writeSurfaceCatalog(
  dir,
  [four, two].map(({ condition, dimensions, utilities }) => ({
    condition,
    dimensions,
    family: 'regression',
    metric: 'mae',
    utility: (_z, k) => utilities[k]!,
  })),
);

describe('grading a prediction', () => {
  it('gives a perfect table recovery 1, regret 0 and the exact optimum', () => {
    const r = gradeSurface(four, four.utilities);
    expect(r.effect_mae).toBe(0);
    expect(r.effect_recovery).toBe(1);
    expect(r.support_regret).toBe(0);
    expect(r.exact_optimal_choice).toBe(true);
    expect(r.reference_optima).toEqual(['1101']);
    expect(r.selected_mask).toBe('1101');
    expect(r.grid_mae).toBe(0);
    expect(r.interaction_mae).toBe(0);
    expect(r.strict_tolerances).toEqual([{ tau: 0.1, threshold: expect.closeTo(0.055, 12), passed: true }]);
  });

  it('scores a constant shift as a perfect reconstruction of effects but not of the grid', () => {
    const r = gradeSurface(
      four,
      four.utilities.map((u) => u + 0.05),
    );
    expect(r.effect_mae).toBeCloseTo(0, 12);
    expect(r.effect_recovery).toBeCloseTo(1, 12);
    expect(r.grid_mae).toBeCloseTo(0.05, 12);
    expect(r.exact_optimal_choice).toBe(true);
  });

  for (const delta of [0.05, 0.1, 1 / 6, 0.3]) {
    it(`two-option counterexample: exact optimum yet recovery δ = ${delta.toFixed(4)}`, () => {
      const r = gradeSurface(two, counterexample(delta));
      expect(r.selected_mask).toBe('10');
      expect(r.exact_optimal_choice).toBe(true);
      expect(r.support_regret).toBe(0);
      expect(r.mean_absolute_true_edge_effect).toBeCloseTo(0.3, 12);
      expect(r.effect_mae).toBeCloseTo(0.3 - (0.6 * delta) / 2, 12);
      expect(r.effect_recovery).toBeCloseTo(delta, 12);
      // J_ref = 0.4 − 0.6 − 0.2 + 0 = −0.4; J_pred = c − (c+ε) − c + c = −ε.
      expect(r.interaction_mae).toBeCloseTo(0.4 - 0.6 * delta, 12);
      // The worst effect error 0.6 − ε is far above 10% of the range (0.06).
      expect(r.strict_effect_reconstruction).toBe(false);
    });
  }

  it('counterexample through the files: reference table + JSON prediction', () => {
    const table = file('two.json', JSON.stringify({ '00': 0.5, '01': 0.5, '10': 0.56, '11': 0.5 }));
    const r = gradeFile(currentSettings(), { condition: 'two', table, referencesDir: dir });
    expect(r.exact_optimal_choice).toBe(true);
    expect(r.effect_recovery).toBeCloseTo(0.1, 12);
  });

  it('breaks ties like the catalog: a flat prediction selects the empty mask', () => {
    const r = gradeSurface(two, [0.5, 0.5, 0.5, 0.5]);
    expect(r.selected_mask).toBe('00');
    expect(r.support_regret).toBeCloseTo(0.6, 12);
    expect(r.exact_optimal_choice).toBe(false);
    expect(r.effect_recovery).toBe(0); // E_t = A_t
    // A tie between 01 and 10 at the top goes to the lexically smaller 01.
    const tie = gradeSurface(two, [0.1, 0.9, 0.9, 0.2]);
    expect(tie.selected_mask).toBe('01');
    expect(tie.support_regret).toBeCloseTo(0.4, 12);
  });

  it('applies the flat-table rule', () => {
    const flat: Surface = { condition: 'flat', dimensions: 2, utilities: [0.3, 0.3, 0.3, 0.3] };
    expect(gradeSurface(flat, [0.7, 0.7, 0.7, 0.7]).effect_recovery).toBe(1);
    expect(gradeSurface(flat, [0.7, 0.7, 0.7, 0.71]).effect_recovery).toBe(0);
    expect(recoveryScore(0, 0)).toBe(1);
    expect(recoveryScore(1e-13, 1e-13)).toBe(1);
    expect(recoveryScore(1e-3, 1e-13)).toBe(0);
    expect(recoveryScore(0.5, 0.25)).toBe(0); // clipped at 0
  });

  it('scores strict reconstruction at τ = 0.1 and every requested tolerance', () => {
    // Raising one mask by 0.015 moves the 4 effects touching it by 0.015; range 0.55, so τ·range is
    // 0.0055 at τ=0.01 (fail), 0.0275 at τ=0.05 (pass), 0.055 at τ=0.1 (pass).
    const pred = [...four.utilities];
    pred[6] = pred[6]! + 0.015;
    const r = gradeSurface(four, pred, { tolerances: [0.05, 0.01, 0.1] });
    expect(r.max_effect_error).toBeCloseTo(0.015, 12);
    expect(r.strict_tolerances.map((s) => [s.tau, s.passed])).toEqual([
      [0.01, false],
      [0.05, true],
      [0.1, true],
    ]);
    expect(r.effect_mae).toBeCloseTo((4 * 0.015) / 32, 12);
    expect(parseTolerances('0.05, 0.1')).toEqual([0.05, 0.1]);
    expect(() => parseTolerances('0.05,abc')).toThrow(/'abc' is not a positive number/);
    expect(() => parseTolerances('-1')).toThrow(UserError);
  });

  it('replaces observed cells by the reference before scoring', () => {
    const wrong = [...four.utilities];
    wrong[0] = 0.9; // 0000
    wrong[13] = 0; // 1101, the optimum
    const table = file('wrong.csv', csvOf(wrong, 4));
    const plain = gradeFile(currentSettings(), { condition: 'four', table, referencesDir: dir });
    expect(plain.effect_recovery).toBeLessThan(0.9);
    expect(plain.exact_optimal_choice).toBe(false);
    const observed = gradeFile(currentSettings(), {
      condition: 'four',
      table,
      observed: file('obs.txt', 'mask\n0000\n1101\n'),
      referencesDir: dir,
    });
    expect(observed.observed).toEqual(['0000', '1101']);
    expect(observed.effect_recovery).toBe(1);
    expect(observed.exact_optimal_choice).toBe(true);
    expect(observed.grid_mae).toBe(0);
    // Observing only one of the two wrong cells fixes only part of the table.
    const half = gradeFile(currentSettings(), { condition: 'four', table, observed: file('obs.json', '["1101"]'), referencesDir: dir });
    expect(half.effect_recovery).toBeGreaterThan(plain.effect_recovery);
    expect(half.effect_recovery).toBeLessThan(1);
    expect(() => readObservations(file('bad-obs.txt', '0000, 000x, 0000'), 4)).toThrow(/unknown mask '000x'[\s\S]*duplicate mask 0000/);
    // measured values are checked: one that is not the reference's is an error
    const truth = four.utilities[13]!;
    expect(
      gradeFile(currentSettings(), {
        condition: 'four',
        table,
        observed: file('obs-values.json', JSON.stringify({ '1101': truth })),
        referencesDir: dir,
      }).effect_recovery,
    ).toBeLessThan(1);
    expect(() =>
      gradeFile(currentSettings(), {
        condition: 'four',
        table,
        observed: file('obs-wrong.json', JSON.stringify([{ mask: '1101', utility: truth + 1e-9 }])),
        referencesDir: dir,
      }),
    ).toThrow(/1 observation\(s\) differ from the reference of four: mask 1101 observed/);
  });
});

describe('the benchmark definitions on hand-built surfaces', () => {
  // Three masks tie at the top (0.9): 0110, 1001 and 1100 (two options each); 1111 is 0.89.
  const tied: Surface = {
    condition: 'tied',
    dimensions: 4,
    utilities: [...Array(16).keys()].map((k) => ([6, 9, 12].includes(k) ? 0.9 : k === 15 ? 0.89 : 0.1 + k / 100)),
  };

  it('counts any tied reference optimum as an exact choice, and names every one', () => {
    for (const mask of ['0110', '1001', '1100']) {
      const pred = tied.utilities.map((_, k) => (maskOf(k, 4) === mask ? 1 : 0));
      const r = gradeSurface(tied, pred);
      expect(r.selected_mask).toBe(mask);
      expect(r.support_regret).toBe(0);
      expect(r.exact_optimal_choice).toBe(true);
    }
    const r = gradeSurface(tied, tied.utilities);
    expect(r.reference_optima).toEqual(['0110', '1001', '1100']);
    expect(r.n_reference_optima).toBe(3);
    // a perfect table selects the first optimum by the tie rule (fewest options, then lexicographic)
    expect(r.selected_mask).toBe('0110');
    // 1111 is 0.01 below the optimum: near-optimal, not exact; 0000 is neither
    const near = gradeSurface(
      tied,
      tied.utilities.map((_, k) => (k === 15 ? 1 : 0)),
    );
    expect([near.selected_mask, near.exact_optimal_choice, near.near_optimal_choice]).toEqual(['1111', false, true]);
    expect(near.support_regret).toBeCloseTo(0.01, 15);
    const far = gradeSurface(
      tied,
      tied.utilities.map(() => 0.5),
    );
    expect([far.selected_mask, far.exact_optimal_choice, far.near_optimal_choice]).toEqual(['0000', false, false]);
  });

  it('breaks predicted ties by fewer enabled options before lexicographic order', () => {
    // 1000 (one option) and 0011 (two options) tie in the prediction: 1000 wins though '0011' < '1000'
    const pred = tied.utilities.map((_, k) => (k === 8 || k === 3 ? 0.7 : 0.1));
    expect(gradeSurface(tied, pred).selected_mask).toBe('1000');
  });

  it('has the contrast counts d·2^(d−1) and d(d−1)/2', () => {
    for (const d of [2, 4, 6]) {
      const flat: Surface = { condition: 'c', dimensions: d, utilities: new Array(2 ** d).fill(0.5) };
      const r = gradeSurface(flat, flat.utilities);
      expect([r.n_effect_contrasts, r.n_interaction_contrasts]).toEqual([d * 2 ** (d - 1), (d * (d - 1)) / 2]);
    }
  });

  it('zero amplitude: recovery 1 only for effects within 1e-12; strict threshold 1e-12', () => {
    const flat: Surface = { condition: 'flat', dimensions: 4, utilities: new Array(16).fill(0.4) };
    const shifted = gradeSurface(flat, new Array(16).fill(0.6));
    expect([
      shifted.mean_absolute_true_edge_effect,
      shifted.true_utility_range,
      shifted.effect_recovery,
      shifted.strict_effect_reconstruction,
    ]).toEqual([0, 0, 1, true]);
    expect(shifted.grid_mae).toBeCloseTo(0.2, 15);
    expect(shifted.reference_optima).toHaveLength(16);
    const bumped = gradeSurface(
      flat,
      new Array(16).fill(0.6).map((v, k) => (k === 5 ? v + 1e-9 : v)),
    );
    expect([bumped.effect_recovery, bumped.strict_effect_reconstruction, bumped.exact_optimal_choice]).toEqual([0, false, true]);
    expect(bumped.strict_tolerances[0]!.threshold).toBe(1e-12);
  });

  it('all cells observed: the score of the reference itself, whatever was predicted', () => {
    const wild = four.utilities.map((_, k) => (k % 2 ? 1 : 0));
    const r = gradeSurface(four, wild, { observed: [...Array(16).keys()].map((k) => maskOf(k, 4)) });
    expect([r.effect_mae, r.interaction_mae, r.grid_mae, r.effect_recovery, r.support_regret]).toEqual([0, 0, 0, 1, 0]);
    expect([r.exact_optimal_choice, r.near_optimal_choice, r.strict_effect_reconstruction]).toEqual([true, true, true]);
    expect(four.utilities.map((_, k) => r.prediction_table[maskOf(k, 4)])).toEqual(four.utilities);
    expect(r.observed).toHaveLength(16);
  });

  it('interaction MAE is the mean error of the mean second differences', () => {
    // adding 0.08·a·b to the four-option surface changes J_AB by 0.08 and no other interaction
    const pred = four.utilities.map((u, k) => u + (k & 8 && k & 4 ? 0.08 : 0));
    const r = gradeSurface(four, pred);
    expect(r.interaction_mae).toBeCloseTo(0.08 / 6, 15);
    // of the 32 effects only Δ_A on b=1 backgrounds (4) and Δ_B on a=1 backgrounds (4) move, by 0.08
    expect(r.effect_mae).toBeCloseTo((8 * 0.08) / 32, 15);
  });
});

describe('conformance with the published catalog', () => {
  const settings = currentSettings();
  const published = join(settings.paths.published, 'references');
  const present = existsSync(published);
  if (!present) console.warn(`skipped: no published references at ${published}`);
  it.skipIf(!present)(
    'a published table graded against the committed references, masks in the public factor order, scores a perfect reconstruction',
    () => {
      const conditions = publishedConditions(settings.paths.published);
      for (const condition of ['wine', 'mitdb_100__d6']) {
        const factors = conditions[condition] as unknown as { factor_order: string[] } | undefined;
        if (factors) expect(factors.factor_order.join('')).toBe('ABCDEF'.slice(0, factors.factor_order.length));
        const table = join(published, `${condition}.csv`);
        const r = gradeFile(settings, { condition, table });
        expect([r.effect_mae, r.grid_mae, r.effect_recovery, r.support_regret, r.exact_optimal_choice]).toEqual([0, 0, 1, 0, true]);
        // the tied optima are those of the published table, read here
        const rows = readFileSync(table, 'utf8')
          .trim()
          .split('\n')
          .slice(1)
          .map((l) => l.split(','));
        const max = Math.max(...rows.map((c) => Number(c[1])));
        expect(r.reference_optima).toEqual(rows.filter((c) => Number(c[1]) >= max - 1e-12).map((c) => c[0]));
      }
    },
  );
});

describe('rejecting malformed prediction tables', () => {
  const good = four.utilities;
  const lines = csvOf(good, 4).trimEnd().split('\n');
  const csv = (rows: string[]) => file(`t${Math.random().toString(36).slice(2)}.csv`, `${rows.join('\n')}\n`);
  const reject = (path: string, pattern: RegExp) => {
    expect(() => readPredictionTable(path, 4)).toThrow(UserError);
    expect(() => readPredictionTable(path, 4)).toThrow(pattern);
  };

  it('accepts a complete table in CSV and in both JSON forms', () => {
    expect(readPredictionTable(csv(lines), 4)).toEqual(good);
    const object = Object.fromEntries(good.map((v, k) => [maskOf(k, 4), v]));
    expect(readPredictionTable(file('ok.json', JSON.stringify(object)), 4)).toEqual(good);
    const array = good.map((v, k) => ({ mask: maskOf(k, 4), utility: v }));
    expect(readPredictionTable(file('ok-array.json', JSON.stringify(array)), 4)).toEqual(good);
  });

  it('names a missing mask', () => {
    reject(csv(lines.filter((l) => !l.startsWith('0101,'))), /missing mask\(s\): 0101/);
  });
  const objectText = (edit: (pairs: string[]) => string[]) => `{${edit(good.map((v, k) => `"${maskOf(k, 4)}": ${v}`)).join(', ')}}`;
  const oneLine = (path: string, pattern: RegExp) => {
    reject(path, pattern);
    expect(() => readPredictionTable(path, 4)).toThrow(/^[^\n]+$/);
  };

  it('names a duplicate mask in CSV; refuses a JSON key repeated however it is escaped', () => {
    reject(csv([...lines, '0011,0.5']), /line 18: duplicate mask 0011 \(also at line 5\)/);
    oneLine(
      file(
        'dup.json',
        objectText((p) => [...p, '"0011": 0.5']),
      ),
      /not strict JSON: duplicate key "0011"/,
    );
    // "\u0030" is "0": JSON.parse would keep the last of the two silently
    oneLine(
      file(
        'dup-escaped.json',
        objectText((p) => [...p, '"\\u0030000": 0.9']),
      ),
      /duplicate key "0000" \(written "\\u0030000" here\)/,
    );
    const array = good.map((v, k) => `{"mask": "${maskOf(k, 4)}", "utility": ${v}${k === 3 ? ', "utility": 0.9' : ''}}`);
    oneLine(file('dup-item.json', `[${array.join(', ')}]`), /duplicate key "utility" .*line 1/);
  });
  it('refuses mixed or repeated value columns', () => {
    oneLine(csv(['mask,utility,prediction', ...lines.slice(1).map((l) => `${l},0.5`)]), /several value columns \(utility, prediction\)/);
    oneLine(csv(['mask,utility,utility', ...lines.slice(1).map((l) => `${l},0.5`)]), /repeats column\(s\) utility/);
    const both = good.map((v, k) => ({ mask: maskOf(k, 4), utility: v, ...(k === 5 ? { prediction: v } : {}) }));
    oneLine(file('both.json', JSON.stringify(both)), /item 5 has several value keys \(utility, prediction\)/);
    const mixed = good.map((v, k) => (k === 7 ? { mask: maskOf(k, 4), prediction: v } : { mask: maskOf(k, 4), utility: v }));
    oneLine(file('mixed.json', JSON.stringify(mixed)), /mix value keys \(utility, prediction\)/);
  });
  it('refuses non-decimal numbers, NaN and Infinity', () => {
    for (const bad of ['0x1', 'nan', 'inf', '', '1e', '½'])
      reject(csv(lines.map((l) => (l.startsWith('0110,') ? `0110,${bad}` : l))), /line 8: the value of mask 0110 is not a decimal number/);
    for (const bad of ['NaN', 'Infinity', '-Infinity'])
      oneLine(
        file(
          `${bad}.json`,
          objectText((p) => p.map((x, k) => (k === 2 ? `"0010": ${bad}` : x))),
        ),
        new RegExp(`${bad} is not a JSON number`),
      );
    oneLine(
      file(
        'hex.json',
        objectText((p) => p.map((x, k) => (k === 2 ? '"0010": 0x1' : x))),
      ),
      /'0x…' is not a decimal number/,
    );
    oneLine(
      file(
        'huge.json',
        objectText((p) => p.map((x, k) => (k === 2 ? '"0010": 1e999' : x))),
      ),
      /beyond the range of a float64/,
    );
    reject(
      file('str.json', JSON.stringify({ ...Object.fromEntries(good.map((v, k) => [maskOf(k, 4), v])), '0001': '0.5' })),
      /value of mask 0001 is not a decimal number \("0.5"\)/,
    );
  });
  it('names a value out of range', () => {
    reject(csv(lines.map((l) => (l.startsWith('1000,') ? '1000,1.2' : l))), /value 1.2 for mask 1000 is out of range \[0, 1\]/);
    reject(csv(lines.map((l) => (l.startsWith('1000,') ? '1000,-0.1' : l))), /out of range/);
  });
  it('names a mask of the wrong width', () => {
    reject(csv([...lines, '00110,0.5']), /mask '00110' has the wrong width: 5 characters, the condition has 4 options/);
    // A spreadsheet that dropped the leading zeros of 0011 gives "11": wrong width and a missing mask.
    reject(
      csv(lines.map((l) => (l.startsWith('0011,') ? l.replace('0011', '11') : l))),
      /missing mask\(s\): 0011[\s\S]*mask '11' has the wrong width/,
    );
  });
  it('names an unknown mask', () => {
    reject(csv([...lines, '00a1,0.5']), /unknown mask '00a1'/);
    reject(csv([...lines, 'ABCD,0.5']), /unknown mask 'ABCD'/);
  });
  it('names a missing header column', () => {
    oneLine(csv(['mask,score', ...lines.slice(1)]), /needs a 'mask' column and one 'utility'/);
  });
  it('caps and summarises the problem list; refuses an oversized table or one with far too many entries unread', () => {
    const rows = lines.slice(1).map((l) => l.replace(/,.*/, ',2'));
    const many = csv(['mask,utility', ...rows, ...['00a', '00b', '00c'].map((m) => `${m},0.5`)]);
    let message = '';
    try {
      readPredictionTable(many, 4);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/\(19 problem\(s\)\)/);
    const items = message.split('\n  - ').slice(1);
    expect(items).toHaveLength(19);
    const d6 = Array.from({ length: 64 }, (_, k) => `${maskOf(k, 6)},7`);
    const capped = (() => {
      try {
        readPredictionTable(csv(['mask,utility', ...d6]), 6);
      } catch (error) {
        return (error as Error).message;
      }
    })()!;
    expect(capped.split('\n  - ')).toHaveLength(20 + 2); // header, 20 listed, the summary
    expect(capped).toMatch(/… 44 more problem\(s\) not listed \(64 in all: 64 out-of-range values\)$/);
    oneLine(csv(['mask,utility', ...Array.from({ length: 40 }, () => 'x,1')]), /holds 40 entries; a 4-option table has 16 masks/);
    const big = file('big.json', `{"0000": 0.5${' '.repeat(1 << 20)}}`);
    oneLine(big, /is \d+ bytes, more than the 1048576 allowed; refused/);
  });

  it('rejects from the command line with exit 2 and the message, and grades a good table to JSON', async () => {
    const cwd = ROOT;
    const bad = await execa(
      'node',
      ['bin/wwref.mjs', 'grade', '--references', dir, '--condition', 'four', '--table', csv(lines.slice(0, -1))],
      { cwd, reject: false },
    );
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(/wwref: prediction table .* is invalid .*\n\s+- missing mask\(s\): 1111/);
    expect(bad.stderr).not.toMatch(/at .*\.ts:\d+/); // no stack
    const ok = await execa(
      'node',
      [
        'bin/wwref.mjs',
        'grade',
        '--references',
        dir,
        '--condition',
        'two',
        '--table',
        file('c.csv', csvOf(counterexample(0.25), 2)),
        '--tolerances',
        '0.5,2',
      ],
      { cwd },
    );
    const json = JSON.parse(ok.stdout);
    expect(json.effect_recovery).toBeCloseTo(0.25, 12);
    expect(json.exact_optimal_choice).toBe(true);
    expect(json.strict_tolerances.map((s: { tau: number; passed: boolean }) => [s.tau, s.passed])).toEqual([
      [0.1, false],
      [0.5, false],
      [2, true],
    ]);
    expect(ok.stderr).toContain('effect_recovery 0.250000');
  });
});
