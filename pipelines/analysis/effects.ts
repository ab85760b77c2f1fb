// Effects of the reference surfaces: for every condition, the conditional effect of each
// option on each background, the mean pair interactions, sign reversals at several floors and the
// equivalence classes of masks with identical predictions. `wwref effects` writes them as Arrow and
// CSV tables plus summary.json; grade.ts and report.ts reuse the same surface arithmetic.
//
// Masks are strings with option A leftmost. Internally a mask is an integer whose most significant of
// d bits is option A, so ascending integers are ascending masks (the order of the reference tables).
import { join } from 'node:path';
import { Bool, Float64, Int32, Utf8, type DataType } from 'apache-arrow';
import { equivalenceClasses } from '../references/equivalences.ts';
import { arrowFileBytes } from '../core/tabular.ts';
import { csvFloat, csvQuote } from '../core/tabular.ts';
import { UserError } from '../core/errors.ts';
import { ReferenceStore, type GuardedPaths } from '../references/store.ts';
import { enabledCount, maskIndex, maskString, optionBit, optionLetter } from '../catalog/masks.ts';
import { checkOutputPath } from '../core/containment.ts';
import type { Paths } from '../core/settings.ts';
import { writeFileAtomic, writeJsonAtomic } from '../core/fsutil.ts';
import { fsum } from '../execution/verification/metrics.ts';
import type { ReferenceRecord } from '../execution/records.ts';

// ---------------------------------------------------------------------------------------------
// Surfaces

/** A complete response surface: utilities[k] is the utility of mask maskString(k, dimensions). */
export interface Surface {
  condition: string;
  dimensions: number;
  utilities: number[];
}

/** The surface of one condition's reference records; every mask must be present, ok and finite. */
export function surfaceFromRecords(records: readonly ReferenceRecord[]): Surface {
  const first = records[0];
  if (!first) throw new UserError('no reference records');
  const { condition, dimensions } = first;
  const size = 2 ** dimensions;
  const utilities = new Array<number>(size).fill(Number.NaN);
  const problems: string[] = [];
  for (const r of records) {
    const index = maskIndex(r.mask, dimensions);
    if (r.condition !== condition || r.dimensions !== dimensions || index < 0) problems.push(`unexpected record ${r.condition}/${r.mask}`);
    else if (!Number.isNaN(utilities[index]!)) problems.push(`duplicate mask ${r.mask}`);
    else if (r.status !== 'ok' || r.utility === null || !Number.isFinite(r.utility))
      problems.push(`mask ${r.mask} has no utility (${r.status})`);
    else utilities[index] = r.utility;
  }
  const missing = utilities.flatMap((u, k) => (Number.isNaN(u) ? [maskString(k, dimensions)] : []));
  if (missing.length && !problems.length) problems.push(`missing mask(s) ${missing.join(', ')}`);
  if (problems.length) {
    throw new UserError(
      `condition ${condition}: the reference surface is incomplete: ${problems.slice(0, 5).join('; ')}${problems.length > 5 ? '; …' : ''}`,
    );
  }
  return { condition, dimensions, utilities };
}

/**
 * The argmax under the catalog's tie rule: highest value, then fewer enabled options, then the
 * lexically smaller mask (= smaller integer, since all masks have the same width).
 */
export function argmaxMask(values: readonly number[]): number {
  let best = 0;
  for (let k = 1; k < values.length; k++) {
    const v = values[k]!;
    const b = values[best]!;
    if (v > b || (v === b && enabledCount(k) < enabledCount(best))) best = k;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Effects and interactions

export interface ConditionalEffect {
  condition: string;
  dimensions: number;
  option: string;
  /** z: the mask with the option off. */
  background: string;
  /** z + e_i: the same mask with the option on. */
  mask: string;
  u_background: number;
  u_mask: number;
  /** Δ_i(z) = u(z + e_i) − u(z). */
  effect: number;
}

/** Every Δ_i(z), option by option, backgrounds in ascending mask order: d·2^(d−1) of them. */
export function conditionalEffects(surface: Surface): ConditionalEffect[] {
  const { condition, dimensions, utilities } = surface;
  const effects: ConditionalEffect[] = [];
  for (let i = 0; i < dimensions; i++) {
    const bit = optionBit(i, dimensions);
    for (let z = 0; z < utilities.length; z++) {
      if (z & bit) continue;
      const u0 = utilities[z]!;
      const u1 = utilities[z | bit]!;
      effects.push({
        condition,
        dimensions,
        option: optionLetter(i),
        background: maskString(z, dimensions),
        mask: maskString(z | bit, dimensions),
        u_background: u0,
        u_mask: u1,
        effect: u1 - u0,
      });
    }
  }
  return effects;
}

export interface PairInteraction {
  condition: string;
  dimensions: number;
  pair: string;
  option_i: string;
  option_j: string;
  /** Number of backgrounds of the other options averaged over: 2^(d−2). */
  backgrounds: number;
  /** J_ij = mean over z (z_i = z_j = 0) of u(z+e_i+e_j) − u(z+e_i) − u(z+e_j) + u(z). */
  interaction: number;
}

/** Every J_ij with i < j, in (A,B), (A,C), … order: d(d−1)/2 of them. */
export function pairInteractions(surface: Surface): PairInteraction[] {
  const { condition, dimensions, utilities: u } = surface;
  const pairs: PairInteraction[] = [];
  for (let i = 0; i < dimensions; i++) {
    for (let j = i + 1; j < dimensions; j++) {
      const bi = optionBit(i, dimensions);
      const bj = optionBit(j, dimensions);
      const terms: number[] = [];
      for (let z = 0; z < u.length; z++) {
        if (z & (bi | bj)) continue;
        terms.push(u[z | bi | bj]! - u[z | bi]! - u[z | bj]! + u[z]!);
      }
      const option_i = optionLetter(i);
      const option_j = optionLetter(j);
      pairs.push({
        condition,
        dimensions,
        pair: option_i + option_j,
        option_i,
        option_j,
        backgrounds: terms.length,
        interaction: fsum(terms) / terms.length,
      });
    }
  }
  return pairs;
}

/** Mean of |values| (exactly summed); 0 for no values. */
export function meanAbs(values: readonly number[]): number {
  return values.length ? fsum(values.map(Math.abs)) / values.length : 0;
}

// ---------------------------------------------------------------------------------------------
// Sign reversals

export interface ReversalFloor {
  /** Column suffix, e.g. reversal_floor_5pct. */
  key: string;
  label: string;
  /** Fraction of the response range, or undefined for the absolute floor. */
  fraction?: number;
}

export const ABSOLUTE_FLOOR = 1e-12;

export const REVERSAL_FLOORS: readonly ReversalFloor[] = [
  { key: '1e12', label: '1e-12' },
  { key: '1pct', label: '1% of range', fraction: 0.01 },
  { key: '5pct', label: '5% of range', fraction: 0.05 },
  { key: '10pct', label: '10% of range', fraction: 0.1 },
];

/** The floor value for a condition; relative floors never drop below the absolute one (flat surfaces). */
export function floorValue(floor: ReversalFloor, responseRange: number): number {
  return floor.fraction === undefined ? ABSOLUTE_FLOOR : Math.max(ABSOLUTE_FLOOR, floor.fraction * responseRange);
}

/** Options with an effect > floor on one background and < −floor on another, in option order. */
export function reversingOptions(effects: readonly ConditionalEffect[], floor: number): string[] {
  const seen = new Map<string, { pos: boolean; neg: boolean }>();
  for (const e of effects) {
    const s = seen.get(e.option) ?? { pos: false, neg: false };
    if (e.effect > floor) s.pos = true;
    if (e.effect < -floor) s.neg = true;
    seen.set(e.option, s);
  }
  return [...seen].filter(([, s]) => s.pos && s.neg).map(([option]) => option);
}

// ---------------------------------------------------------------------------------------------
// Per-condition and catalog analysis

export interface ConditionAnalysis {
  condition: string;
  source: string;
  family: string;
  dimensions: number;
  masks: number;
  min_utility: number;
  max_utility: number;
  response_range: number;
  /** A_t: mean |Δ_i(z)| over all conditional effects. */
  mean_abs_effect: number;
  best_mask: string;
  best_utility: number;
  effect_count: number;
  pair_count: number;
  equivalence_class_count: number;
  masks_in_equivalence_classes: number;
  /** Per floor key: the floor value and the options that reverse sign above it. */
  reversals: Record<string, { floor: number; options: string[] }>;
  surface: Surface;
  effects: ConditionalEffect[];
  pairs: PairInteraction[];
  classes: { masks: string[]; prediction_sha256: string }[];
}

export function analyzeCondition(records: readonly ReferenceRecord[]): ConditionAnalysis {
  const surface = surfaceFromRecords(records);
  const effects = conditionalEffects(surface);
  const pairs = pairInteractions(surface);
  const hashOf = new Map(records.map((r) => [r.mask, r.prediction_sha256 ?? '']));
  const classes = equivalenceClasses([...records]).map((masks) => ({ masks, prediction_sha256: hashOf.get(masks[0]!)! }));
  const u = surface.utilities;
  const min = Math.min(...u);
  const max = Math.max(...u);
  const best = argmaxMask(u);
  const range = max - min;
  const reversals = Object.fromEntries(
    REVERSAL_FLOORS.map((f) => {
      const floor = floorValue(f, range);
      return [f.key, { floor, options: reversingOptions(effects, floor) }];
    }),
  );
  const first = records[0]!;
  return {
    condition: surface.condition,
    source: first.source,
    family: first.family,
    dimensions: surface.dimensions,
    masks: u.length,
    min_utility: min,
    max_utility: max,
    response_range: range,
    mean_abs_effect: meanAbs(effects.map((e) => e.effect)),
    best_mask: maskString(best, surface.dimensions),
    best_utility: u[best]!,
    effect_count: effects.length,
    pair_count: pairs.length,
    equivalence_class_count: classes.length,
    masks_in_equivalence_classes: classes.reduce((n, c) => n + c.masks.length, 0),
    reversals,
    surface,
    effects,
    pairs,
    classes,
  };
}

export interface ReversalSummary {
  floor: string;
  conditions: number;
  four_option: number;
  six_option: number;
  condition_ids: string[];
}

export interface CatalogSummary {
  conditions: number;
  four_option_conditions: number;
  six_option_conditions: number;
  other_conditions: number;
  masks: number;
  conditional_effects: number;
  pair_interactions: number;
  equivalence_classes: number;
  masks_in_equivalence_classes: number;
  reversals: Record<string, ReversalSummary>;
}

export function summarize(analyses: readonly ConditionAnalysis[]): CatalogSummary {
  const count = (pred: (a: ConditionAnalysis) => boolean) => analyses.filter(pred).length;
  const sum = (f: (a: ConditionAnalysis) => number) => analyses.reduce((n, a) => n + f(a), 0);
  const reversals = Object.fromEntries(
    REVERSAL_FLOORS.map((f) => {
      const hit = analyses.filter((a) => a.reversals[f.key]!.options.length > 0);
      return [
        f.key,
        {
          floor: f.label,
          conditions: hit.length,
          four_option: hit.filter((a) => a.dimensions === 4).length,
          six_option: hit.filter((a) => a.dimensions === 6).length,
          condition_ids: hit.map((a) => a.condition),
        },
      ];
    }),
  );
  return {
    conditions: analyses.length,
    four_option_conditions: count((a) => a.dimensions === 4),
    six_option_conditions: count((a) => a.dimensions === 6),
    other_conditions: count((a) => a.dimensions !== 4 && a.dimensions !== 6),
    masks: sum((a) => a.masks),
    conditional_effects: sum((a) => a.effect_count),
    pair_interactions: sum((a) => a.pair_count),
    equivalence_classes: sum((a) => a.equivalence_class_count),
    masks_in_equivalence_classes: sum((a) => a.masks_in_equivalence_classes),
    reversals,
  };
}

/** Records grouped by condition, in first-seen (manifest) order. */
export function groupByCondition(records: readonly ReferenceRecord[]): ReferenceRecord[][] {
  const groups = new Map<string, ReferenceRecord[]>();
  for (const r of records) {
    const g = groups.get(r.condition) ?? [];
    g.push(r);
    groups.set(r.condition, g);
  }
  return [...groups.values()];
}

export function analyzeReferences(
  paths: GuardedPaths & { references: string },
  conditions: readonly string[] = [],
  dir = paths.references,
): ConditionAnalysis[] {
  return groupByCondition(new ReferenceStore(dir, paths).records(conditions)).map(analyzeCondition);
}

// ---------------------------------------------------------------------------------------------
// Flat tables: Arrow IPC and CSV

type Cell = string | number | boolean;
type ColumnKind = 'utf8' | 'float64' | 'int32' | 'bool';
export interface FlatTable {
  columns: [string, ColumnKind][];
  rows: Cell[][];
}

const ARROW_TYPES: Record<ColumnKind, () => DataType> = {
  utf8: () => new Utf8(),
  float64: () => new Float64(),
  int32: () => new Int32(),
  bool: () => new Bool(),
};

export function flatTableBytes(table: FlatTable, metadata: Record<string, string> = {}): Uint8Array {
  const columns = table.columns.map(([name, kind], c) => ({
    name,
    type: ARROW_TYPES[kind](),
    nullable: false,
    values: table.rows.map((r) => r[c]),
  }));
  return arrowFileBytes(columns, metadata);
}

function csvCell(value: Cell, kind: ColumnKind): string {
  return kind === 'float64' ? csvFloat(value as number) : csvQuote(String(value));
}

export function flatTableCsv(table: FlatTable): string {
  const lines = [table.columns.map(([name]) => name).join(',')];
  for (const row of table.rows) lines.push(row.map((v, c) => csvCell(v, table.columns[c]![1])).join(','));
  return `${lines.join('\n')}\n`;
}

export function effectsTable(analyses: readonly ConditionAnalysis[]): FlatTable {
  return {
    columns: [
      ['condition', 'utf8'],
      ['dimensions', 'int32'],
      ['option', 'utf8'],
      ['background', 'utf8'],
      ['mask', 'utf8'],
      ['u_background', 'float64'],
      ['u_mask', 'float64'],
      ['effect', 'float64'],
    ],
    rows: analyses.flatMap((a) =>
      a.effects.map((e) => [e.condition, e.dimensions, e.option, e.background, e.mask, e.u_background, e.u_mask, e.effect]),
    ),
  };
}

export function pairsTable(analyses: readonly ConditionAnalysis[]): FlatTable {
  return {
    columns: [
      ['condition', 'utf8'],
      ['dimensions', 'int32'],
      ['pair', 'utf8'],
      ['option_i', 'utf8'],
      ['option_j', 'utf8'],
      ['backgrounds', 'int32'],
      ['interaction', 'float64'],
    ],
    rows: analyses.flatMap((a) =>
      a.pairs.map((p) => [p.condition, p.dimensions, p.pair, p.option_i, p.option_j, p.backgrounds, p.interaction]),
    ),
  };
}

export function conditionsTable(analyses: readonly ConditionAnalysis[]): FlatTable {
  const reversalColumns = REVERSAL_FLOORS.flatMap((f): [string, ColumnKind][] => [
    [`reversal_floor_${f.key}`, 'bool'],
    [`floor_${f.key}`, 'float64'],
    [`reversing_options_${f.key}`, 'utf8'],
  ]);
  return {
    columns: [
      ['condition', 'utf8'],
      ['source', 'utf8'],
      ['family', 'utf8'],
      ['dimensions', 'int32'],
      ['masks', 'int32'],
      ['min_utility', 'float64'],
      ['max_utility', 'float64'],
      ['response_range', 'float64'],
      ['mean_abs_effect', 'float64'],
      ['best_mask', 'utf8'],
      ['best_utility', 'float64'],
      ['effects', 'int32'],
      ['pair_interactions', 'int32'],
      ['equivalence_classes', 'int32'],
      ['masks_in_equivalence_classes', 'int32'],
      ...reversalColumns,
    ],
    rows: analyses.map((a) => [
      a.condition,
      a.source,
      a.family,
      a.dimensions,
      a.masks,
      a.min_utility,
      a.max_utility,
      a.response_range,
      a.mean_abs_effect,
      a.best_mask,
      a.best_utility,
      a.effect_count,
      a.pair_count,
      a.equivalence_class_count,
      a.masks_in_equivalence_classes,
      ...REVERSAL_FLOORS.flatMap((f) => {
        const r = a.reversals[f.key]!;
        return [r.options.length > 0, r.floor, r.options.join('')];
      }),
    ]),
  };
}

export function classesTable(analyses: readonly ConditionAnalysis[]): FlatTable {
  return {
    columns: [
      ['condition', 'utf8'],
      ['class', 'int32'],
      ['size', 'int32'],
      ['masks', 'utf8'],
      ['prediction_sha256', 'utf8'],
    ],
    rows: analyses.flatMap((a) => a.classes.map((c, k) => [a.condition, k + 1, c.masks.length, c.masks.join(' '), c.prediction_sha256])),
  };
}

/** Writes <out>/{conditional_effects,pair_interactions,conditions,equivalence_classes}.{arrow,csv} and summary.json. */
export function writeEffects(
  paths: Pick<Paths, 'references' | 'prepared' | 'manifests'>,
  analyses: readonly ConditionAnalysis[],
  out: string,
): { files: string[]; summary: CatalogSummary } {
  checkOutputPath(paths, out, 'effects folder', { kind: 'folder' });
  const tables: Record<string, FlatTable> = {
    conditional_effects: effectsTable(analyses),
    pair_interactions: pairsTable(analyses),
    conditions: conditionsTable(analyses),
    equivalence_classes: classesTable(analyses),
  };
  const files: string[] = [];
  for (const [name, table] of Object.entries(tables)) {
    writeFileAtomic(join(out, `${name}.arrow`), flatTableBytes(table, { generator: 'wwref effects', table: name }));
    writeFileAtomic(join(out, `${name}.csv`), flatTableCsv(table));
    files.push(`${name}.arrow`, `${name}.csv`);
  }
  const summary = summarize(analyses);
  writeJsonAtomic(join(out, 'summary.json'), {
    generator: 'wwref effects',
    definitions: {
      conditional_effect: 'Δ_i(z) = u(z + e_i) − u(z) for every option i and mask z with z_i = 0',
      pair_interaction: 'J_ij = mean over z with z_i = z_j = 0 of u(z+e_i+e_j) − u(z+e_i) − u(z+e_j) + u(z)',
      mean_abs_effect: 'A_t = mean |Δ_i(z)| over all conditional effects of the condition',
      sign_reversal:
        `some option has Δ > floor on one background and Δ < −floor on another; ` +
        `relative floors are max(${ABSOLUTE_FLOOR}, fraction × response range)`,
    },
    ...summary,
    files: [...files, 'summary.json'],
  });
  files.push('summary.json');
  return { files, summary };
}

/** The lines `wwref effects` prints: counts, then one line per reversal floor. */
export function summaryLines(summary: CatalogSummary): string[] {
  const lines = [
    `${summary.conditions} conditions (${summary.four_option_conditions} four-option, ` +
      `${summary.six_option_conditions} six-option${summary.other_conditions ? `, ${summary.other_conditions} other` : ''}), ` +
      `${summary.masks} masks, ${summary.conditional_effects} conditional effects, ${summary.pair_interactions} pair interactions, ` +
      `${summary.equivalence_classes} equivalence classes (${summary.masks_in_equivalence_classes} masks)`,
  ];
  for (const r of Object.values(summary.reversals)) {
    lines.push(
      `sign reversal at floor ${r.floor.padEnd(13)}${String(r.conditions).padStart(3)}/${summary.conditions} conditions ` +
        `(${r.four_option}/${summary.four_option_conditions} four-option, ${r.six_option}/${summary.six_option_conditions} six-option)`,
    );
  }
  return lines;
}
