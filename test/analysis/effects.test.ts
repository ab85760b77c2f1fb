// Effects, pair interactions, reversals and the files of `wwref effects`, on reference tables built
// in temporary folders (the real tables are not needed).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tableFromIPC } from 'apache-arrow';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import {
  analyzeCondition,
  analyzeReferences,
  argmaxMask,
  conditionalEffects,
  pairInteractions,
  reversingOptions,
  surfaceFromRecords,
  writeEffects,
  type ConditionalEffect,
} from '../../pipelines/analysis/effects.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { bits, sha, surfaceRecords, writeSurfaceCatalog, type SurfaceSpec } from '../support/fixtures.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { currentSettings } from '../support/workspace.ts';

const tmp: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'wwref-effects-'));
  tmp.push(d);
  return d;
};
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// A hand-computed four-option surface:
//   u = 0.1 + 0.2a + 0.1b − 0.03c − 0.002d + 0.15ac + 0.004bd
// so Δ_A = 0.2 + 0.15c, Δ_B = 0.1 + 0.004d, Δ_C = −0.03 + 0.15a, Δ_D = −0.002 + 0.004b,
// J_AC = 0.15, J_BD = 0.004, every other J = 0; max u(1111) = 0.522, min u(0011) = 0.068, range 0.454;
// A_t = (4·0.2 + 4·0.35 + 4·0.1 + 4·0.104 + 4·0.03 + 4·0.12 + 8·0.002) / 32 = 3.632 / 32 = 0.1135.
// Reversals: C (−0.03 / +0.12) and D (−0.002 / +0.002) above 1e-12; only C above 1% (0.00454) and
// 5% (0.0227); none above 10% (0.0454).
const hand: SurfaceSpec = {
  condition: 'hand4',
  dimensions: 4,
  utility: ([a, b, c, d]) => 0.1 + 0.2 * a! + 0.1 * b! - 0.03 * c! - 0.002 * d! + 0.15 * a! * c! + 0.004 * b! * d!,
};
const expectedDelta: Record<string, (z: number[]) => number> = {
  A: ([, , c]) => 0.2 + 0.15 * c!,
  B: ([, , , d]) => 0.1 + 0.004 * d!,
  C: ([a]) => -0.03 + 0.15 * a!,
  D: ([, b]) => -0.002 + 0.004 * b!,
};

describe('conditional effects and pair interactions', () => {
  const surface = surfaceFromRecords(surfaceRecords(hand));
  const effects = conditionalEffects(surface);

  it('has one effect per option and background with the option off: 32 for four options', () => {
    expect(effects).toHaveLength(32);
    for (const letter of 'ABCD') expect(effects.filter((e) => e.option === letter)).toHaveLength(8);
    const i = (e: ConditionalEffect) => 'ABCD'.indexOf(e.option);
    for (const e of effects) {
      expect(e.background[i(e)]).toBe('0');
      expect(e.mask).toBe(`${e.background.slice(0, i(e))}1${e.background.slice(i(e) + 1)}`);
    }
    expect(new Set(effects.map((e) => `${e.option}${e.background}`)).size).toBe(32);
  });

  it('matches the hand-computed effects on every background', () => {
    for (const e of effects) expect(e.effect).toBeCloseTo(expectedDelta[e.option]!(bits(e.background)), 12);
    // Spot checks with the masks written out.
    const find = (o: string, bg: string) => effects.find((e) => e.option === o && e.background === bg)!;
    expect(find('A', '0010').effect).toBeCloseTo(0.35, 12);
    expect(find('A', '0000').effect).toBeCloseTo(0.2, 12);
    expect(find('C', '1000').effect).toBeCloseTo(0.12, 12);
    expect(find('C', '0101').effect).toBeCloseTo(-0.03, 12);
    expect(find('D', '0100').effect).toBeCloseTo(0.002, 12);
  });

  it('matches the hand-computed pair interactions (six pairs)', () => {
    const pairs = pairInteractions(surface);
    expect(pairs.map((p) => p.pair)).toEqual(['AB', 'AC', 'AD', 'BC', 'BD', 'CD']);
    const expected: Record<string, number> = { AB: 0, AC: 0.15, AD: 0, BC: 0, BD: 0.004, CD: 0 };
    for (const p of pairs) {
      expect(p.backgrounds).toBe(4);
      expect(p.interaction).toBeCloseTo(expected[p.pair]!, 12);
    }
  });

  it('computes range, A_t, best mask and reversals at each floor', () => {
    const a = analyzeCondition(surfaceRecords(hand));
    expect(a.response_range).toBeCloseTo(0.454, 12);
    expect(a.mean_abs_effect).toBeCloseTo(0.1135, 12);
    expect(a.best_mask).toBe('1111');
    expect(a.reversals['1e12']!.options).toEqual(['C', 'D']);
    expect(a.reversals['1pct']!.options).toEqual(['C']);
    expect(a.reversals['5pct']!.options).toEqual(['C']);
    expect(a.reversals['10pct']!.options).toEqual([]);
    expect(a.reversals['10pct']!.floor).toBeCloseTo(0.0454, 12);
  });

  it('requires both signs strictly above the floor', () => {
    const e = (option: string, effect: number) => ({ option, effect }) as ConditionalEffect;
    expect(reversingOptions([e('A', 0.1), e('A', -0.1)], 0.1)).toEqual([]);
    expect(reversingOptions([e('A', 0.1), e('A', -0.2)], 0.1)).toEqual([]);
    expect(reversingOptions([e('A', 0.2), e('A', -0.1)], 0.1)).toEqual([]);
    expect(reversingOptions([e('A', 0.1), e('A', -0.1)], 0.0999)).toEqual(['A']);
    expect(reversingOptions([e('A', 0.5), e('A', 0.2), e('B', -0.5)], 0)).toEqual([]);
    // 1e-12 floor: numerical noise does not count as a reversal.
    expect(analyzeCondition(surfaceRecords({ condition: 'flat', dimensions: 4, utility: () => 0.5 })).reversals['1e12']!.options).toEqual(
      [],
    );
  });

  it('gives 192 effects and 15 pairs for six options', () => {
    const six = surfaceFromRecords(
      surfaceRecords({ condition: 'six', dimensions: 6, utility: (z) => z.reduce((s, x, k) => s + x * (k + 1), 0) / 21 }),
    );
    expect(conditionalEffects(six)).toHaveLength(192);
    expect(pairInteractions(six)).toHaveLength(15);
    for (const e of conditionalEffects(six)) expect(e.effect).toBeCloseTo(('ABCDEF'.indexOf(e.option) + 1) / 21, 12);
  });

  it('breaks argmax ties by fewer options, then the lexically smaller mask', () => {
    // masks 0011 (idx 3), 0100 (idx 4) and 1000 (idx 8) tie at the top: 0100 has one option and is smaller than 1000.
    const values = Array(16).fill(0.2);
    values[3] = values[4] = values[8] = 0.9;
    expect(argmaxMask(values)).toBe(4);
    values[15] = 0.95;
    expect(argmaxMask(values)).toBe(15);
  });

  it('refuses an incomplete surface', () => {
    const recs = surfaceRecords(hand);
    recs[5] = { ...recs[5]!, status: 'failed', utility: null, error: 'boom' };
    expect(() => surfaceFromRecords(recs)).toThrow(UserError);
    expect(() => surfaceFromRecords(recs)).toThrow(/mask 0101 has no utility/);
    expect(() => surfaceFromRecords(surfaceRecords(hand).slice(1))).toThrow(/missing mask\(s\) 0000/);
  });
});

// ---------------------------------------------------------------------------------------------
// A catalog shaped like the real one: 22 four-option and 14 six-option conditions.

describe('wwref effects on a full-size catalog', () => {
  const dir = tempDir();
  const specs: SurfaceSpec[] = [
    hand,
    ...Array.from(
      { length: 21 },
      (_, k): SurfaceSpec => ({
        condition: `four_${String(k).padStart(2, '0')}`,
        dimensions: 4,
        // option D has no effect and its prediction hash ignores it: 8 classes of 2 masks.
        utility: ([a, b, c]) => 0.3 + 0.01 * k + 0.1 * a! - 0.05 * b! + 0.02 * a! * c!,
        hash: k === 0 ? (m) => sha(m.slice(0, 3)) : undefined,
      }),
    ),
    ...Array.from(
      { length: 14 },
      (_, k): SurfaceSpec => ({
        condition: `six_${String(k).padStart(2, '0')}`,
        dimensions: 6,
        // A reverses sign with F on odd conditions (±0.04, range ≈ 0.38): a reversal at every floor.
        utility: ([a, b, c, d, e, f]) =>
          0.2 + 0.05 * b! + 0.03 * c! + 0.02 * d! + 0.01 * e! + 0.2 * f! + (k % 2 ? 0.04 * a! * (f! ? 1 : -1) : 0.01 * a!),
      }),
    ),
  ];
  writeSurfaceCatalog(dir, specs);
  const out = join(tempDir(), 'effects'); // outside the reference folder: no output goes inside one
  const analyses = analyzeReferences(currentSettings().paths, [], dir);
  const { summary, files } = writeEffects(currentSettings().paths, analyses, out);

  it('counts 3,392 effects and 342 pair interactions over 36 conditions', () => {
    expect(summary.conditions).toBe(36);
    expect(summary.four_option_conditions).toBe(22);
    expect(summary.six_option_conditions).toBe(14);
    expect(summary.masks).toBe(22 * 16 + 14 * 64);
    expect(summary.conditional_effects).toBe(3392);
    expect(summary.pair_interactions).toBe(342);
    expect(summary.equivalence_classes).toBe(8);
    expect(summary.masks_in_equivalence_classes).toBe(16);
    expect(summary.reversals['10pct']!.six_option).toBe(7);
    expect(summary.reversals['10pct']!.four_option).toBe(0);
    expect(summary.reversals['1e12']!.four_option).toBe(1); // the hand surface
  });

  it('writes the Arrow and CSV tables with one row per item', () => {
    expect(files.sort()).toEqual(
      ['conditional_effects', 'pair_interactions', 'conditions', 'equivalence_classes']
        .flatMap((n) => [`${n}.arrow`, `${n}.csv`])
        .concat('summary.json')
        .sort(),
    );
    const rows = { conditional_effects: 3392, pair_interactions: 342, conditions: 36, equivalence_classes: 8 };
    for (const [name, n] of Object.entries(rows)) {
      const table = tableFromIPC(readFileSync(join(out, `${name}.arrow`)));
      expect(table.numRows).toBe(n);
      expect(
        readFileSync(join(out, `${name}.csv`), 'utf8')
          .trimEnd()
          .split('\n'),
      ).toHaveLength(n + 1);
    }
    const effects = tableFromIPC(readFileSync(join(out, 'conditional_effects.arrow')))
      .toArray()
      .map((r) => r.toJSON());
    const row = effects.find((r) => r.condition === 'hand4' && r.option === 'A' && r.background === '0010')!;
    expect(row.mask).toBe('1010');
    expect(row.effect).toBeCloseTo(0.35, 12);
    const csv = readFileSync(join(out, 'conditions.csv'), 'utf8').split('\n');
    expect(csv[0]).toContain('reversal_floor_10pct');
    expect(csv.find((l) => l.startsWith('hand4,'))).toMatch(/,true,[^,]+,CD,/);
    const classes = readFileSync(join(out, 'equivalence_classes.csv'), 'utf8').split('\n');
    expect(classes[1]).toMatch(/^four_00,1,2,0000 0001,[0-9a-f]{64}$/);
    const written = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    expect(written.conditional_effects).toBe(3392);
    expect(written.reversals['5pct'].conditions).toBe(summary.reversals['5pct']!.conditions);
  });

  it('runs from the command line and prints the reversal summary per floor', async () => {
    const cliOut = `${dir}-cli-effects`; // outputs may not go inside a reference folder
    const { stdout, exitCode } = await execa(
      'node',
      ['bin/wwref.mjs', 'effects', '--references', dir, '--out', cliOut, '--condition', 'hand4', 'six_01'],
      {
        cwd: ROOT,
      },
    );
    expect(exitCode).toBe(0);
    expect(stdout).toContain('2 conditions (1 four-option, 1 six-option), 80 masks, 224 conditional effects, 21 pair interactions');
    expect(stdout).toMatch(/sign reversal at floor 1e-12\s+2\/2 conditions/);
    expect(stdout).toMatch(/sign reversal at floor 10% of range\s+1\/2 conditions \(0\/1 four-option, 1\/1 six-option\)/);
  });

  it('reports an unknown condition as a user error (exit 2)', async () => {
    const result = await execa('node', ['bin/wwref.mjs', 'effects', '--references', dir, '--out', `${dir}-x`, '--condition', 'nope'], {
      cwd: ROOT,
      reject: false,
    });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/condition 'nope' is not in the reference manifest/);
  });
});
