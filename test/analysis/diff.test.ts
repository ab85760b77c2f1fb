// `wwref diff` on the committed reference tables: a folder against itself and against its own pack
// changes nothing; a verified copy with one utility changed reports exactly that record, its delta and
// the conditional effects it moves; a changed best mask and a new sign reversal, made from our own
// records, are detected; a copy whose table no longer matches its manifest is refused.
import { readReferenceManifest, readReferenceTable, writeReferenceManifest, writeReferenceTable } from '../support/raw-references.ts';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diffCondition, diffReferences, diffSides, loadDiffSide } from '../../pipelines/analysis/diff.ts';
import { analyzeCondition } from '../../pipelines/analysis/effects.ts';
import { maskIndex, maskString, optionBit } from '../../pipelines/catalog/masks.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import type { ReferenceRecord } from '../../pipelines/execution/records.ts';
import { exportPack } from '../../pipelines/jobs/wwb.ts';

import { cliInProcess } from '../support/cli.ts';
import { currentSettings } from '../support/workspace.ts';

const REFS = join(ROOT, 'outputs', 'references');
const SETTINGS = currentSettings();
const PATHS = SETTINGS.paths;
let work: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'wwref-diff-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A copy of the committed references in which `change` rewrites one table, re-hashed into the manifest. */
function copyWithTable(name: string, condition: string, change: (records: ReferenceRecord[]) => void): string {
  const dir = join(work, name);
  cpSync(REFS, dir, { recursive: true });
  const manifest = readReferenceManifest(dir)!;
  const entry = manifest.conditions[condition]!;
  const table = readReferenceTable(join(dir, entry.table));
  change(table.records);
  const bytes = writeReferenceTable(join(dir, entry.table), table.records, table.metadata);
  entry.table_sha256 = sha256Hex(bytes);
  writeReferenceManifest(manifest, dir);
  return dir;
}

/** The records of one committed condition, as fresh objects. */
function committed(condition: string): ReferenceRecord[] {
  return structuredClone(loadDiffSide(PATHS, REFS, [condition]).conditions.get(condition)!);
}

describe('wwref diff', () => {
  it('a reference folder against itself: no change anywhere, recovery 1 for every condition', () => {
    const report = diffReferences(PATHS, REFS, REFS);
    expect(report.totals.conditions).toBe(Object.keys(readReferenceManifest(REFS)!.conditions).length);
    expect(report.totals.records).toBe(report.conditions.reduce((n, d) => n + 2 ** d.dimensions, 0));
    expect(report.totals).toMatchObject({
      conditions_changed: 0,
      hash_changed: 0,
      utility_changed: 0,
      status_changed: 0,
      warnings_changed: 0,
      max_abs_delta: 0,
      best_mask_changed: [],
      classes_changed: [],
    });
    for (const d of report.conditions) {
      expect(d.surface, d.condition).not.toBeNull();
      expect(d.surface!.effect_mae).toBe(0);
      expect(d.surface!.effect_recovery).toBe(1);
      expect(d.surface!.effects_moved).toEqual([]);
    }
    expect(Object.values(report.totals.reversals_changed).flat()).toEqual([]);
  });

  it('a folder against its own exported pack (published layout) reports no change', () => {
    const pack = join(work, 'pack');
    exportPack(SETTINGS, pack, ['wine', 'graph_lesmis__d6'], REFS);
    const report = diffReferences(PATHS, REFS, pack, ['wine', 'graph_lesmis__d6']);
    expect(report.b.layout).toBe('pack');
    expect(report.totals).toMatchObject({ conditions: 2, records: 16 + 64, conditions_changed: 0, hash_changed: 0, utility_changed: 0 });
  });

  it('one utility changed in a verified copy: exactly that record, its delta, and the d effects through it', () => {
    const condition = 'wine';
    const original = committed(condition);
    const before = analyzeCondition(original);
    // a mask that is not the best one, lowered by a tenth of the range
    const mask = original.map((r) => r.mask).find((m) => m !== before.best_mask && m !== '0000')!;
    const delta = -before.response_range / 10;
    const copy = copyWithTable('one-utility', condition, (records) => {
      const r = records.find((x) => x.mask === mask)!;
      r.utility = r.utility! + delta;
    });
    const report = diffReferences(PATHS, REFS, copy);
    expect(report.totals.conditions_changed).toBe(1);
    expect(report.totals.utility_changed).toBe(1);
    expect(report.totals.hash_changed).toBe(0);
    const d = report.conditions.find((x) => x.condition === condition)!;
    expect(d.utility_changed).toHaveLength(1);
    const [u] = d.utility_changed;
    expect(u!.mask).toBe(mask);
    expect(u!.delta).toBeCloseTo(delta, 12);
    expect(u!.relative).toBeCloseTo(0.1, 12);
    expect(d.max_abs_delta).toBeCloseTo(-delta, 12);
    expect(d.mean_abs_delta).toBeCloseTo(-delta / 16, 12);

    // The effects through `mask`: option i with background mask−e_i (bit set: the effect drops by
    // |delta|) or background mask (bit clear: the effect rises by |delta|); no other effect moves.
    const k = maskIndex(mask, 4);
    const expected = [0, 1, 2, 3]
      .map((i) => {
        const bit = optionBit(i, 4);
        return { option: 'ABCD'[i]!, background: maskString(k & ~bit, 4), change: k & bit ? delta : -delta };
      })
      .sort((x, y) => x.option.localeCompare(y.option));
    const moved = [...d.surface!.effects_moved].sort((x, y) => x.option.localeCompare(y.option));
    expect(moved.map((m) => [m.option, m.background])).toEqual(expected.map((e) => [e.option, e.background]));
    moved.forEach((m, j) => {
      expect(m.b - m.a).toBeCloseTo(expected[j]!.change, 12);
    });
    // 4 of the 32 conditional effects move by |delta|: MAE = |delta|/8
    expect(d.surface!.effect_mae).toBeCloseTo(-delta / 8, 12);
    expect(d.surface!.effect_recovery).toBeLessThan(1);
    expect(d.surface!.best_mask.changed).toBe(false);
    // every other condition is unchanged
    expect(
      report.conditions
        .filter((x) => x.condition !== condition)
        .every((x) => x.utility_changed.length === 0 && x.surface!.effect_mae === 0),
    ).toBe(true);
  });

  it('a copy whose table was changed without re-hashing it is refused before anything is compared', () => {
    const dir = join(work, 'tampered');
    cpSync(REFS, dir, { recursive: true });
    const file = join(dir, 'wine.arrow');
    const bytes = readFileSync(file);
    const table = readReferenceTable(file);
    table.records[3]!.utility = 0.123;
    writeReferenceTable(file, table.records, table.metadata);
    expect(sha256Hex(readFileSync(file))).not.toBe(sha256Hex(bytes));
    expect(() => diffReferences(PATHS, REFS, dir)).toThrow(UserError);
    expect(() => diffReferences(PATHS, REFS, dir)).toThrow(/sha256/);
  });

  it('a changed best mask, made from our own records, is detected', () => {
    const a = committed('concrete');
    const before = analyzeCondition(a);
    const b = structuredClone(a);
    const runnerUp = b.filter((r) => r.mask !== before.best_mask).sort((x, y) => y.utility! - x.utility!)[0]!;
    runnerUp.utility = before.best_utility + before.response_range / 100;
    const d = diffCondition(a, b);
    expect(d.surface!.best_mask).toMatchObject({ a: before.best_mask, b: runnerUp.mask, changed: true });
    const report = diffSides(
      { ...loadDiffSide(PATHS, REFS, ['concrete']) },
      { ...loadDiffSide(PATHS, REFS, ['concrete']), conditions: new Map([['concrete', b]]) },
    );
    expect(report.totals.best_mask_changed).toEqual(['concrete']);
  });

  it('a sign reversal that appears at the absolute floor, made from our own records, is detected', () => {
    // Find, in the committed tables, an option that does not reverse at 1e-12 and has at least two
    // effects of one sign; flipping one of them makes it reverse.
    const side = loadDiffSide(PATHS, REFS);
    let found: { condition: string; option: string; records: ReferenceRecord[]; changed: ReferenceRecord[] } | undefined;
    for (const [condition, records] of side.conditions) {
      const analysis = analyzeCondition(records);
      const reversing = analysis.reversals['1e12']!.options;
      for (const option of 'ABCDEF'.slice(0, analysis.dimensions)) {
        if (reversing.includes(option)) continue;
        const effects = analysis.effects.filter((e) => e.option === option && Math.abs(e.effect) > 1e-9);
        if (effects.length < 2) continue;
        const flip = effects[0]!;
        const changed = structuredClone(records);
        // u(z + e_i) := u(z) − Δ: the effect on this background changes sign, the others keep theirs
        changed.find((r) => r.mask === flip.mask)!.utility = flip.u_background - flip.effect;
        found = { condition, option, records, changed };
        break;
      }
      if (found) break;
    }
    expect(found, 'an option without reversal and with two effects of one sign').toBeDefined();
    const d = diffCondition(found!.records, found!.changed);
    const floor = d.surface!.reversals['1e12']!;
    expect(floor.changed).toBe(true);
    expect(floor.a).not.toContain(found!.option);
    expect(floor.b).toContain(found!.option);
  });

  it('the command line: table on stdout, --json and --html written, a missing side is one line with exit 2', async () => {
    const json = join(work, 'diff.json');
    const ok = await cliInProcess(['diff', REFS, REFS, '--condition', 'wine', '--json', json], ROOT);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/total: 0\/1 conditions changed; 0\/16 prediction hashes/);
    expect(JSON.parse(readFileSync(json, 'utf8')).totals.records).toBe(16);
    // a changed copy: the page holds the diff section and the two surfaces of the changed condition
    const copy = copyWithTable('for-html', 'co2', (records) => {
      records[2]!.utility = records[2]!.utility! / 2;
    });
    const html = join(work, 'diff.html');
    const page = await cliInProcess(['diff', REFS, copy, '--html', html], ROOT);
    expect(page.code).toBe(0);
    expect(page.stdout).toMatch(/^co2 +0\/16 +1 /m);
    const text = readFileSync(html, 'utf8');
    expect(text).toContain('<section id="diff">');
    expect(text.match(/<figure>/g)).toHaveLength(1);
    expect(text).toMatch(/<figcaption>co2: 0 hashes, 1 utilities changed/);
    expect(text.match(/class="mark"/g)).toHaveLength(1);
    const bad = await cliInProcess(['diff', REFS, join(work, 'nothing-here')], ROOT);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/does not exist/);
  });

  it('wwref report --diff-with puts the same diff section into the report page', async () => {
    const copy = copyWithTable('for-report', 'co2', (records) => {
      records[2]!.utility = records[2]!.utility! / 2;
    });
    const html = join(work, 'report.html');
    const run = await cliInProcess(
      ['report', '--references', REFS, '--condition', 'co2', '--condition', 'nile', '--out', html, '--diff-with', copy],
      ROOT,
    );
    expect(run.code, run.stderr).toBe(0);
    const text = readFileSync(html, 'utf8');
    expect(text.indexOf('<section id="diff">')).toBeGreaterThan(text.lastIndexOf('nile'));
    expect(text).toMatch(/<figcaption>co2: 0 hashes, 1 utilities changed/);
    const plain = await cliInProcess(['report', '--references', REFS, '--condition', 'co2', '--out', join(work, 'plain.html')], ROOT);
    expect(plain.code).toBe(0);
    expect(readFileSync(join(work, 'plain.html'), 'utf8')).not.toContain('<section id="diff">');
  });
});
