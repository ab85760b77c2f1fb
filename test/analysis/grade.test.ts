// Grading prediction tables against reference surfaces built in temporary folders.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
  readObservedMasks,
  readPredictionTable,
  recoveryScore,
} from '../../pipelines/analysis/grade.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
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
    expect(r.recovery).toBe(1);
    expect(r.regret).toBe(0);
    expect(r.exact_optimum).toBe(true);
    expect(r.reference_optimum).toBe('1101');
    expect(r.selected_mask).toBe('1101');
    expect(r.grid_mae).toBe(0);
    expect(r.pair_interaction_mae).toBe(0);
    expect(r.strict).toEqual([{ tau: 0.1, threshold: expect.closeTo(0.055, 12), passed: true }]);
  });

  it('scores a constant shift as a perfect reconstruction of effects but not of the grid', () => {
    const r = gradeSurface(
      four,
      four.utilities.map((u) => u + 0.05),
    );
    expect(r.effect_mae).toBeCloseTo(0, 12);
    expect(r.recovery).toBeCloseTo(1, 12);
    expect(r.grid_mae).toBeCloseTo(0.05, 12);
    expect(r.exact_optimum).toBe(true);
  });

  for (const delta of [0.05, 0.1, 1 / 6, 0.3]) {
    it(`two-option counterexample: exact optimum yet recovery δ = ${delta.toFixed(4)}`, () => {
      const r = gradeSurface(two, counterexample(delta));
      expect(r.selected_mask).toBe('10');
      expect(r.exact_optimum).toBe(true);
      expect(r.regret).toBe(0);
      expect(r.mean_abs_effect).toBeCloseTo(0.3, 12);
      expect(r.effect_mae).toBeCloseTo(0.3 - (0.6 * delta) / 2, 12);
      expect(r.recovery).toBeCloseTo(delta, 12);
      // J_ref = 0.4 − 0.6 − 0.2 + 0 = −0.4; J_pred = c − (c+ε) − c + c = −ε.
      expect(r.pair_interaction_mae).toBeCloseTo(0.4 - 0.6 * delta, 12);
      // The worst effect error 0.6 − ε is far above 10% of the range (0.06).
      expect(r.strict[0]!.passed).toBe(false);
    });
  }

  it('counterexample through the files: reference table + JSON prediction', () => {
    const table = file('two.json', JSON.stringify({ '00': 0.5, '01': 0.5, '10': 0.56, '11': 0.5 }));
    const r = gradeFile(currentSettings(), { condition: 'two', table, referencesDir: dir });
    expect(r.exact_optimum).toBe(true);
    expect(r.recovery).toBeCloseTo(0.1, 12);
  });

  it('breaks ties like the catalog: a flat prediction selects the empty mask', () => {
    const r = gradeSurface(two, [0.5, 0.5, 0.5, 0.5]);
    expect(r.selected_mask).toBe('00');
    expect(r.regret).toBeCloseTo(0.6, 12);
    expect(r.exact_optimum).toBe(false);
    expect(r.recovery).toBe(0); // E_t = A_t
    // A tie between 01 and 10 at the top goes to the lexically smaller 01.
    const tie = gradeSurface(two, [0.1, 0.9, 0.9, 0.2]);
    expect(tie.selected_mask).toBe('01');
    expect(tie.regret).toBeCloseTo(0.4, 12);
  });

  it('applies the flat-table rule', () => {
    const flat: Surface = { condition: 'flat', dimensions: 2, utilities: [0.3, 0.3, 0.3, 0.3] };
    expect(gradeSurface(flat, [0.7, 0.7, 0.7, 0.7]).recovery).toBe(1);
    expect(gradeSurface(flat, [0.7, 0.7, 0.7, 0.71]).recovery).toBe(0);
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
    expect(r.strict.map((s) => [s.tau, s.passed])).toEqual([
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
    expect(plain.recovery).toBeLessThan(0.9);
    expect(plain.exact_optimum).toBe(false);
    const observed = gradeFile(currentSettings(), {
      condition: 'four',
      table,
      observed: file('obs.txt', 'mask\n0000\n1101\n'),
      referencesDir: dir,
    });
    expect(observed.observed).toEqual(['0000', '1101']);
    expect(observed.recovery).toBe(1);
    expect(observed.exact_optimum).toBe(true);
    expect(observed.grid_mae).toBe(0);
    // Observing only one of the two wrong cells fixes only part of the table.
    const half = gradeFile(currentSettings(), { condition: 'four', table, observed: file('obs.json', '["1101"]'), referencesDir: dir });
    expect(half.recovery).toBeGreaterThan(plain.recovery);
    expect(half.recovery).toBeLessThan(1);
    expect(() => readObservedMasks(file('bad-obs.txt', '0000, 000x, 0000'), 4)).toThrow(/unknown mask '000x'[\s\S]*duplicate mask 0000/);
  });
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
  it('names a duplicate mask, in CSV and in a JSON object', () => {
    reject(csv([...lines, '0011,0.5']), /line 18: duplicate mask 0011 \(also at line 5\)/);
    const text = `{${good.map((v, k) => `"${maskOf(k, 4)}": ${v}`).join(', ')}, "0011": 0.5}`;
    reject(file('dup.json', text), /duplicate mask 0011/);
  });
  it('names a non-finite value', () => {
    reject(csv(lines.map((l) => (l.startsWith('0110,') ? '0110,nan' : l))), /non-finite value NaN for mask 0110/);
    reject(csv(lines.map((l) => (l.startsWith('0110,') ? '0110,inf' : l))), /non-finite value Infinity for mask 0110/);
    const pythonJson = `{${good.map((v, k) => `"${maskOf(k, 4)}": ${k === 2 ? 'NaN' : v}`).join(', ')}}`;
    reject(file('nan.json', pythonJson), /non-finite value NaN for mask 0010/);
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
  it('names a missing header column and a non-numeric value', () => {
    reject(csv(['mask,score', ...lines.slice(1)]), /needs a 'mask' column and a 'utility'/);
    reject(
      file('str.json', JSON.stringify({ ...Object.fromEntries(good.map((v, k) => [maskOf(k, 4), v])), '0001': 'high' })),
      /value of mask 0001 is not a number/,
    );
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
    expect(json.recovery).toBeCloseTo(0.25, 12);
    expect(json.exact_optimum).toBe(true);
    expect(json.strict.map((s: { tau: number; passed: boolean }) => [s.tau, s.passed])).toEqual([
      [0.1, false],
      [0.5, false],
      [2, true],
    ]);
    expect(ok.stderr).toContain('recovery R_t 0.250000');
  });
});
