// `wwref diff A B`: what changes between two sets of references of the same catalog, typically the
// committed tables and a rebuild under another Python runtime (README "Upgrading the pinned stack").
// Per condition and in total: records whose prediction hash, utility or status changed (utility
// deltas also relative to A's response range), the best mask, the options reversing sign at each
// floor, the conditional effects (MAE and recovery R of B's effects against A's, with the effects
// that moved most) and the equivalence classes. The surface arithmetic is effects.ts's and grade.ts's;
// tables are read only through the verified readers (sha256 checked against the manifest or pack).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UserError } from '../core/errors.ts';
import { writeJsonAtomic } from '../core/fsutil.ts';
import { runtimeOfVersions } from '../execution/identity.ts';
import { describeNumerics, type RecordedNumerics } from '../execution/numerics.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { isPackFolder, readPack } from '../jobs/wwb.ts';
import { ReferenceStore, type GuardedPaths } from '../references/store.ts';
import { analyzeCondition, conditionalEffects, groupByCondition, REVERSAL_FLOORS, type ConditionAnalysis } from './effects.ts';
import { gradeSurface } from './grade.ts';

/** One side of a diff: the records of a reference folder or of a WhatWorkedBench pack. */
export interface DiffSide {
  path: string;
  layout: 'references' | 'pack';
  /** Records by condition, in mask order. */
  conditions: Map<string, ReferenceRecord[]>;
  /** Bit-deciding versions the side was built with ({} when a pack does not record them). */
  versions: Record<string, string>;
  /** The declared runtime whose pins are these versions (wwref.config.json), if any. */
  runtime: string | null;
  python: string | null;
  /** Profile and effective kernels, in one line, when recorded. */
  numerics: string | null;
}

/** A pack's stored outcome as a reference record (only the fields the analysis reads are known). */
function packRecord(
  condition: string,
  source: string,
  family: string,
  mask: string,
  utility: number | null,
  hash: string | null,
  nativeValue: number | null,
): ReferenceRecord {
  const ok = typeof utility === 'number' && Number.isFinite(utility) && typeof hash === 'string';
  return {
    condition,
    source,
    family,
    dimensions: mask.length,
    mask,
    status: ok ? 'ok' : 'failed',
    error: ok ? null : 'no utility or hash in the pack',
    utility: typeof utility === 'number' ? utility : null,
    native_metric: null,
    native_value: typeof nativeValue === 'number' ? nativeValue : null,
    independent_value: null,
    normalization_scale: null,
    prediction_sha256: typeof hash === 'string' ? hash : null,
    warnings: [],
    wall_seconds: null,
    prediction_wall_seconds: null,
    metric_wall_seconds: null,
    plan_sha256: '',
    extras: {},
  };
}

/** The profile and effective state a side's references were built under, as one line. */
function numericsLine(recorded: RecordedNumerics | undefined): string | null {
  return recorded ? `${recorded.profile}: ${describeNumerics(recorded.effective)}` : null;
}

/** Reads one side: a reference folder (manifest.json + tables) or a pack (references/ + inputs/). */
export function loadDiffSide(paths: GuardedPaths, path: string, conditions: readonly string[] = []): DiffSide {
  const dir = resolve(path);
  if (!existsSync(dir)) throw new UserError(`${path} does not exist (name a reference folder or a WhatWorkedBench pack)`);
  if (isPackFolder(dir)) {
    // the one hardened pack reader (of replay --format wwb too): contained, bounded, every file sha256-checked
    const { targets, expected } = readPack(dir, conditions);
    const grouped = new Map<string, ReferenceRecord[]>();
    for (const t of targets) {
      const records = t.records
        .map((r) => packRecord(t.condition, t.input.source, t.family, r.mask, r.utility, r.prediction_sha256, r.native_value))
        .sort((a, b) => a.mask.localeCompare(b.mask));
      grouped.set(t.condition, records);
    }
    return {
      path,
      layout: 'pack',
      conditions: grouped,
      versions: expected.versions,
      runtime: Object.keys(expected.versions).length ? (runtimeOfVersions(expected.versions) ?? null) : null,
      python: null,
      numerics: expected.numerics === 'unrecorded' ? null : numericsLine(expected.numerics),
    };
  }
  if (!existsSync(join(dir, 'manifest.json')))
    throw new UserError(`${path} is neither a reference folder (no manifest.json) nor a WhatWorkedBench pack (no references/)`);
  const store = new ReferenceStore(dir, paths);
  const manifest = store.requireManifest();
  return {
    path,
    layout: 'references',
    conditions: new Map(groupByCondition(store.records(conditions)).map((group) => [group[0]!.condition, group])),
    versions: manifest.versions,
    runtime: runtimeOfVersions(manifest.versions) ?? null,
    python: manifest.python,
    numerics: numericsLine(manifest.numerics),
  };
}

export interface UtilityChange {
  mask: string;
  a: number;
  b: number;
  /** b − a. */
  delta: number;
  /** |b − a| ÷ A's response range (null on a flat surface). */
  relative: number | null;
}

export interface EffectMove {
  option: string;
  background: string;
  a: number;
  b: number;
}

export interface ConditionDiff {
  condition: string;
  family: string;
  dimensions: number;
  /** Masks present on both sides. */
  masks: number;
  /** Masks only one side has. */
  only_in_a: string[];
  only_in_b: string[];
  hash_changed: string[];
  utility_changed: UtilityChange[];
  /** Over all masks with a utility on both sides (0 when none changed). */
  max_abs_delta: number;
  mean_abs_delta: number;
  max_rel_delta: number | null;
  mean_rel_delta: number | null;
  status_changed: { mask: string; a: string; b: string; error: string | null }[];
  /** Masks whose captured Python warnings differ, and the distinct warnings only B raised ("Category: message"). */
  warnings_changed: string[];
  new_warnings: string[];
  /** Null when a side's surface is incomplete (a failed or missing record): no surface analysis. */
  surface: null | {
    a_range: number;
    best_mask: { a: string; b: string; changed: boolean; a_utility: number; b_utility: number };
    /** Per floor key: the reversing options on each side. */
    reversals: Record<string, { floor: string; a: string[]; b: string[]; changed: boolean }>;
    /** Mean |Δ_B − Δ_A| over every conditional effect. */
    effect_mae: number;
    /** R = max(0, 1 − MAE/A_t) of B's effects against A's (grade.ts). */
    effect_recovery: number;
    max_effect_change: number;
    /** The conditional effects that moved most (up to five, |Δ_B − Δ_A| > 0). */
    effects_moved: EffectMove[];
    classes: { a: string[][]; b: string[][]; changed: boolean };
  };
  /** Why the surface analysis was skipped. */
  surface_skipped: string | null;
}

export interface DiffTotals {
  conditions: number;
  conditions_changed: number;
  records: number;
  hash_changed: number;
  utility_changed: number;
  status_changed: number;
  warnings_changed: number;
  max_abs_delta: number;
  mean_abs_delta: number;
  max_rel_delta: number | null;
  best_mask_changed: string[];
  /** Per floor key: conditions whose reversing options changed. */
  reversals_changed: Record<string, string[]>;
  classes_changed: string[];
  /** Mean over the compared conditions of the per-condition effect MAE and recovery R. */
  mean_effect_mae: number | null;
  mean_effect_recovery: number | null;
  min_effect_recovery: number | null;
}

export interface DiffReport {
  a: Omit<DiffSide, 'conditions'> & { conditions: number };
  b: Omit<DiffSide, 'conditions'> & { conditions: number };
  /** Conditions only one side has. */
  only_in_a: string[];
  only_in_b: string[];
  conditions: ConditionDiff[];
  totals: DiffTotals;
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : 0);
const sameClasses = (x: string[][], y: string[][]) => JSON.stringify(x) === JSON.stringify(y);

function tryAnalyze(records: readonly ReferenceRecord[]): ConditionAnalysis | string {
  try {
    return analyzeCondition(records);
  } catch (error) {
    if (error instanceof UserError) return error.message;
    throw error;
  }
}

/** The difference of one condition's records, A then B. */
export function diffCondition(aRecords: readonly ReferenceRecord[], bRecords: readonly ReferenceRecord[]): ConditionDiff {
  const first = aRecords[0] ?? bRecords[0];
  if (!first) throw new UserError('diff of a condition without records');
  const aBy = new Map(aRecords.map((r) => [r.mask, r]));
  const bBy = new Map(bRecords.map((r) => [r.mask, r]));
  const both = [...aBy.keys()].filter((m) => bBy.has(m)).sort();
  const dims = new Set([...aRecords, ...bRecords].map((r) => r.dimensions));
  if (dims.size > 1)
    throw new UserError(`condition ${first.condition}: the two sides have different mask widths (${[...dims].join(' vs ')})`);

  const aAnalysis = tryAnalyze(aRecords);
  const bAnalysis = tryAnalyze(bRecords);
  const aRange = typeof aAnalysis === 'string' ? null : aAnalysis.response_range;

  const hash_changed: string[] = [];
  const utility_changed: UtilityChange[] = [];
  const status_changed: ConditionDiff['status_changed'] = [];
  const deltas: number[] = [];
  const warnings_changed: string[] = [];
  const newWarnings = new Set<string>();
  for (const mask of both) {
    const a = aBy.get(mask)!;
    const b = bBy.get(mask)!;
    if (a.prediction_sha256 !== b.prediction_sha256) hash_changed.push(mask);
    if (JSON.stringify(a.warnings) !== JSON.stringify(b.warnings)) {
      warnings_changed.push(mask);
      const seen = new Set(a.warnings.map((w) => `${w.category}: ${w.message}`));
      for (const w of b.warnings)
        if (!seen.has(`${w.category}: ${w.message}`)) newWarnings.add(`${w.category}: ${w.message.replace(/\s+/g, ' ').trim()}`);
    }
    if (a.status !== b.status) status_changed.push({ mask, a: a.status, b: b.status, error: b.error ?? a.error });
    if (a.utility !== null && b.utility !== null) {
      const delta = b.utility - a.utility;
      deltas.push(Math.abs(delta));
      if (delta !== 0 || Object.is(a.utility, -0) !== Object.is(b.utility, -0)) {
        utility_changed.push({ mask, a: a.utility, b: b.utility, delta, relative: aRange ? Math.abs(delta) / aRange : null });
      }
    } else if (a.utility !== b.utility) {
      // one side has no utility: counted as a status change when the status differs, listed here too
      utility_changed.push({ mask, a: a.utility ?? Number.NaN, b: b.utility ?? Number.NaN, delta: Number.NaN, relative: null });
    }
  }
  const finiteDeltas = deltas.filter(Number.isFinite);
  const maxAbs = finiteDeltas.length ? Math.max(...finiteDeltas) : 0;
  const meanAbs = mean(finiteDeltas);

  let surface: ConditionDiff['surface'] = null;
  let skipped: string | null = null;
  if (typeof aAnalysis === 'string' || typeof bAnalysis === 'string') {
    skipped = [typeof aAnalysis === 'string' ? `A: ${aAnalysis}` : '', typeof bAnalysis === 'string' ? `B: ${bAnalysis}` : '']
      .filter(Boolean)
      .join('; ');
  } else {
    const graded = gradeSurface(aAnalysis.surface, bAnalysis.surface.utilities);
    const bEffects = conditionalEffects(bAnalysis.surface);
    const moved = aAnalysis.effects
      .map((e, k) => ({ option: e.option, background: e.background, a: e.effect, b: bEffects[k]!.effect }))
      .filter((m) => m.a !== m.b)
      .sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a))
      .slice(0, 5);
    const aClasses = aAnalysis.classes.map((c) => c.masks);
    const bClasses = bAnalysis.classes.map((c) => c.masks);
    surface = {
      a_range: aAnalysis.response_range,
      best_mask: {
        a: aAnalysis.best_mask,
        b: bAnalysis.best_mask,
        changed: aAnalysis.best_mask !== bAnalysis.best_mask,
        a_utility: aAnalysis.best_utility,
        b_utility: bAnalysis.best_utility,
      },
      reversals: Object.fromEntries(
        REVERSAL_FLOORS.map((f) => {
          const a = aAnalysis.reversals[f.key]!.options;
          const b = bAnalysis.reversals[f.key]!.options;
          return [f.key, { floor: f.label, a, b, changed: a.join() !== b.join() }];
        }),
      ),
      effect_mae: graded.effect_mae,
      effect_recovery: graded.effect_recovery,
      max_effect_change: graded.max_effect_error,
      effects_moved: moved,
      classes: { a: aClasses, b: bClasses, changed: !sameClasses(aClasses, bClasses) },
    };
  }
  return {
    condition: first.condition,
    family: first.family,
    dimensions: first.dimensions,
    masks: both.length,
    only_in_a: [...aBy.keys()].filter((m) => !bBy.has(m)).sort(),
    only_in_b: [...bBy.keys()].filter((m) => !aBy.has(m)).sort(),
    hash_changed,
    utility_changed,
    max_abs_delta: maxAbs,
    mean_abs_delta: meanAbs,
    max_rel_delta: aRange ? maxAbs / aRange : null,
    mean_rel_delta: aRange ? meanAbs / aRange : null,
    status_changed,
    warnings_changed,
    new_warnings: [...newWarnings].sort(),
    surface,
    surface_skipped: skipped,
  };
}

/** Whether anything of a condition differs. */
export function conditionChanged(d: ConditionDiff): boolean {
  const s = d.surface;
  return (
    d.only_in_a.length > 0 ||
    d.only_in_b.length > 0 ||
    d.hash_changed.length > 0 ||
    d.utility_changed.length > 0 ||
    d.status_changed.length > 0 ||
    d.warnings_changed.length > 0 ||
    (s !== null && (s.best_mask.changed || s.classes.changed || Object.values(s.reversals).some((r) => r.changed)))
  );
}

/** The diff of two loaded sides, over the conditions both have (the others are listed). */
export function diffSides(a: DiffSide, b: DiffSide): DiffReport {
  const shared = [...a.conditions.keys()].filter((c) => b.conditions.has(c)).sort();
  const conditions = shared.map((c) => diffCondition(a.conditions.get(c)!, b.conditions.get(c)!));
  const surfaces = conditions.flatMap((d) => (d.surface ? [d.surface] : []));
  const relDeltas = conditions.flatMap((d) => (d.max_rel_delta === null ? [] : [d.max_rel_delta]));
  const allDeltas = conditions.flatMap((d) => d.utility_changed.map((u) => Math.abs(u.delta)).filter(Number.isFinite));
  const records = conditions.reduce((n, d) => n + d.masks, 0);
  const totals: DiffTotals = {
    conditions: conditions.length,
    conditions_changed: conditions.filter(conditionChanged).length,
    records,
    hash_changed: conditions.reduce((n, d) => n + d.hash_changed.length, 0),
    utility_changed: conditions.reduce((n, d) => n + d.utility_changed.length, 0),
    status_changed: conditions.reduce((n, d) => n + d.status_changed.length, 0),
    warnings_changed: conditions.reduce((n, d) => n + d.warnings_changed.length, 0),
    max_abs_delta: allDeltas.length ? Math.max(...allDeltas) : 0,
    // unchanged records count as 0 in the mean over every compared record
    mean_abs_delta: records ? allDeltas.reduce((s, x) => s + x, 0) / records : 0,
    max_rel_delta: relDeltas.length ? Math.max(...relDeltas) : null,
    best_mask_changed: conditions.filter((d) => d.surface?.best_mask.changed).map((d) => d.condition),
    reversals_changed: Object.fromEntries(
      REVERSAL_FLOORS.map((f) => [f.key, conditions.filter((d) => d.surface?.reversals[f.key]?.changed).map((d) => d.condition)]),
    ),
    classes_changed: conditions.filter((d) => d.surface?.classes.changed).map((d) => d.condition),
    mean_effect_mae: surfaces.length ? mean(surfaces.map((s) => s.effect_mae)) : null,
    mean_effect_recovery: surfaces.length ? mean(surfaces.map((s) => s.effect_recovery)) : null,
    min_effect_recovery: surfaces.length ? Math.min(...surfaces.map((s) => s.effect_recovery)) : null,
  };
  const strip = (s: DiffSide) => ({ ...s, conditions: s.conditions.size });
  return {
    a: strip(a),
    b: strip(b),
    only_in_a: [...a.conditions.keys()].filter((c) => !b.conditions.has(c)).sort(),
    only_in_b: [...b.conditions.keys()].filter((c) => !a.conditions.has(c)).sort(),
    conditions,
    totals,
  };
}

/** `wwref diff A B [--condition C…]`: both sides read and verified, then compared. */
export function diffReferences(paths: GuardedPaths, a: string, b: string, conditions: readonly string[] = []): DiffReport {
  return diffSides(loadDiffSide(paths, a, conditions), loadDiffSide(paths, b, conditions));
}

/** The same, keeping the loaded sides (for the HTML page's surfaces). */
export function diffReferencesWithSides(
  paths: GuardedPaths,
  a: string,
  b: string,
  conditions: readonly string[] = [],
): { report: DiffReport; a: DiffSide; b: DiffSide } {
  const sideA = loadDiffSide(paths, a, conditions);
  const sideB = loadDiffSide(paths, b, conditions);
  return { report: diffSides(sideA, sideB), a: sideA, b: sideB };
}

export function writeDiffJson(path: string, report: DiffReport): void {
  // NaN (a side without utility) is not JSON: written as null
  writeJsonAtomic(path, JSON.parse(JSON.stringify(report, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v))));
}

const g = (x: number | null, digits = 3) =>
  x === null ? '-' : x === 0 ? '0' : Math.abs(x) < 10 ** -digits ? x.toExponential(1) : x.toFixed(digits);

/** The terminal table: one row per condition, then the totals and the context of each side. */
export function diffLines(report: DiffReport, options: { all?: boolean } = {}): string[] {
  const side = (label: string, s: DiffReport['a']) =>
    `${label} ${s.path} (${s.layout}, ${s.conditions} conditions; runtime ${s.runtime ?? 'unrecognised'}: ${
      Object.entries(s.versions)
        .map(([p, v]) => `${p} ${v}`)
        .join(', ') || 'versions not recorded'
    }${s.python ? `; Python ${s.python}` : ''}${s.numerics ? `; ${s.numerics}` : ''})`;
  const lines = [side('A', report.a), side('B', report.b)];
  const floors = REVERSAL_FLOORS.map((f) => f.key);
  lines.push(
    [
      'condition'.padEnd(22),
      'hash',
      'util',
      'status',
      'max|Δu|',
      'max rel',
      'mean rel',
      'best A→B'.padEnd(16),
      `reversals ${floors.join('/')}`.padEnd(24),
      'effect MAE',
      'R',
      'classes',
    ].join('  '),
  );
  for (const d of report.conditions) {
    if (!options.all && !conditionChanged(d)) continue;
    const s = d.surface;
    const best = s ? (s.best_mask.changed ? `${s.best_mask.a}→${s.best_mask.b}` : `${s.best_mask.a} =`) : '-';
    const rev = s
      ? floors
          .map((k) => (s.reversals[k]!.changed ? `${s.reversals[k]!.a.join('') || '∅'}→${s.reversals[k]!.b.join('') || '∅'}` : '='))
          .join('/')
      : '-';
    lines.push(
      [
        d.condition.padEnd(22),
        `${d.hash_changed.length}/${d.masks}`.padStart(4),
        String(d.utility_changed.length).padStart(4),
        String(d.status_changed.length).padStart(6),
        g(d.max_abs_delta).padStart(7),
        g(d.max_rel_delta).padStart(7),
        g(d.mean_rel_delta).padStart(8),
        best.padEnd(16),
        rev.padEnd(24),
        (s ? g(s.effect_mae) : '-').padStart(10),
        (s ? g(s.effect_recovery) : '-').padStart(5),
        s ? (s.classes.changed ? `${s.classes.a.length}→${s.classes.b.length}` : '=') : '-',
      ].join('  '),
    );
    for (const st of d.status_changed.slice(0, 3))
      lines.push(`    status ${st.mask}: ${st.a} → ${st.b}${st.error ? ` (${st.error})` : ''}`);
    if (d.warnings_changed.length)
      lines.push(
        `    warnings differ on ${d.warnings_changed.length} mask(s)${
          d.new_warnings.length
            ? `; new: ${d.new_warnings
                .slice(0, 2)
                .map((w) => (w.length > 160 ? `${w.slice(0, 157)}…` : w))
                .join(' | ')}`
            : ''
        }`,
      );
    if (d.surface_skipped) lines.push(`    surfaces not compared: ${d.surface_skipped}`);
  }
  const t = report.totals;
  lines.push(
    `total: ${t.conditions_changed}/${t.conditions} conditions changed; ` +
      `${t.hash_changed}/${t.records} prediction hashes, ${t.utility_changed} utilities, ` +
      `${t.status_changed} statuses, ${t.warnings_changed} warning lists changed; ` +
      `max |Δu| ${g(t.max_abs_delta)} (max ${g(t.max_rel_delta)} of a range); ` +
      `mean effect MAE ${g(t.mean_effect_mae)}, mean R ${g(t.mean_effect_recovery)} (min ${g(t.min_effect_recovery)})`,
  );
  lines.push(`best mask changed: ${t.best_mask_changed.join(', ') || 'none'}`);
  for (const f of REVERSAL_FLOORS) lines.push(`reversals changed at ${f.label}: ${t.reversals_changed[f.key]!.join(', ') || 'none'}`);
  lines.push(`equivalence classes changed: ${t.classes_changed.join(', ') || 'none'}`);
  if (report.only_in_a.length) lines.push(`only in A: ${report.only_in_a.join(', ')}`);
  if (report.only_in_b.length) lines.push(`only in B: ${report.only_in_b.join(', ')}`);
  return lines;
}
