// A synthetic reference catalog for tests: one record per mask of a utility surface, the Arrow
// tables written with writeReferenceTable and a reference manifest that names them.
import { writeReferenceManifest, writeReferenceTable } from './raw-references.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SOURCES_DIR } from '../../pipelines/core/paths.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import type { ReferenceRecord } from '../../pipelines/execution/records.ts';
import type { ConditionEntry, ReferenceManifest } from '../../pipelines/references/manifest.ts';
import { tableMetadata } from '../../pipelines/references/surface.ts';

export const sha = (s: string): string => sha256Hex(s);

/** A small image-restoration plan (the camera example at 32 px) named `source`, with conditions `source` and `source__d6`. */
export function tinyCameraPlan(source: string, mutate: (plan: any) => void = () => {}): any {
  const plan = JSON.parse(readFileSync(join(SOURCES_DIR, 'examples', 'camera.plan.json'), 'utf8'));
  delete plan.$schema;
  plan.source = source;
  plan.title = `tiny camera (${source.slice(0, 20)})`;
  plan.preparation.params.longer_side = 32;
  plan.conditions[0].id = source;
  plan.conditions[1].id = `${source}__d6`;
  plan.conditions[1].paired_with = source;
  mutate(plan);
  return plan;
}
/** The mask of index k over d options (index = mask read as a binary integer). */
export const maskOf = (k: number, d: number): string => k.toString(2).padStart(d, '0');
export const bits = (mask: string): number[] => [...mask].map(Number);

export interface SurfaceSpec {
  condition: string;
  dimensions: number;
  /** Utility of a mask from its option bits and its index k. */
  utility: (z: number[], k: number) => number;
  /** Prediction hash per mask (default: one distinct hash per mask). */
  hash?: (mask: string) => string;
  /** Default 'classification'. */
  family?: string;
  /** Default 'balanced_accuracy'. */
  metric?: string;
  /** Default `src_<condition>`; two conditions of one source share its plan. */
  source?: string;
}

export interface CatalogOptions {
  /** The manifest's code.git_commit (default null); a commit is written as a clean checkout. */
  gitCommit?: string;
}

/** One successful record per mask of the surface. */
export function surfaceRecords(spec: SurfaceSpec): ReferenceRecord[] {
  return [...Array(2 ** spec.dimensions).keys()].map((k) => {
    const mask = maskOf(k, spec.dimensions);
    const u = spec.utility(bits(mask), k);
    return {
      condition: spec.condition,
      source: spec.source ?? `src_${spec.condition}`,
      family: spec.family ?? 'classification',
      dimensions: spec.dimensions,
      mask,
      status: 'ok',
      error: null,
      utility: u,
      native_metric: spec.metric ?? 'balanced_accuracy',
      native_value: u,
      independent_value: u,
      normalization_scale: 1,
      prediction_sha256: spec.hash ? spec.hash(mask) : sha(`${spec.condition}/${mask}`),
      warnings: [],
      wall_seconds: 0.01,
      prediction_wall_seconds: 0.005,
      metric_wall_seconds: 0.001,
      plan_sha256: sha('plan'),
      extras: {},
    };
  });
}

/** Writes `<condition>.arrow` per surface into dir and the reference manifest naming them: a folder the store accepts. */
export function writeSurfaceCatalog(dir: string, specs: readonly SurfaceSpec[], options: CatalogOptions = {}): void {
  const commit = options.gitCommit ?? null;
  const top: Omit<ReferenceManifest, 'conditions'> = {
    manifest_version: 1,
    generator: 'test fixture',
    code: { git_commit: commit, git_dirty: commit === null ? null : false, workflows_sha256: sha('workflows') },
    python: '3.11',
    versions: {},
    threads: { environment: {}, threadpoolctl_limit: 1 },
  };
  const conditions: ReferenceManifest['conditions'] = {};
  for (const spec of specs) {
    const recs = surfaceRecords(spec);
    const entry: ConditionEntry = {
      source: spec.source ?? `src_${spec.condition}`,
      family: spec.family ?? 'classification',
      dimensions: spec.dimensions,
      records: recs.length,
      failed: 0,
      table: `${spec.condition}.arrow`,
      table_sha256: '',
      plan_file: `sources/${spec.source ?? `src_${spec.condition}`}.plan.json`,
      plan_sha256: sha('plan'),
      prepared_files: { 'arrays.npz': sha('arrays'), 'metadata.json.gz': sha('metadata') },
      published: { comparable: true, prepared_match: 'exact' },
      equivalence_violations: [],
      native_seconds: recs.reduce((sum, r) => sum + (r.wall_seconds ?? 0), 0),
    };
    const bytes = writeReferenceTable(join(dir, entry.table), recs, tableMetadata(spec.condition, entry, top));
    conditions[spec.condition] = { ...entry, table_sha256: sha256Hex(bytes) };
  }
  writeReferenceManifest({ ...top, conditions }, dir);
}
