// Interoperability with the published WhatWorkedBench pack layout:
//   <pack>/manifest.json            {files_sha256: {relative path: sha256}, replay_versions: {...},
//                                    numerics (ours only: the numerical profile of the records)}
//   <pack>/references/<cond>.json   one table per condition (three published layouts, see below)
//   <pack>/inputs/<source>/         arrays.npz + metadata.json.gz
// Reading turns a pack into replay targets; writing exports our tables in that layout.
import { copyFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { UserError } from '../core/errors.ts';
import type { FamilyName } from '../catalog/families.ts';
import { FAMILY_NAMES } from '../catalog/families.ts';
import { fsError, makeDirs, writeJsonAtomic } from '../core/fsutil.ts';
import { checkFileHashes, digest, fileSha256, sha256Hex } from '../core/hashing.ts';
import { REPLAY_PACKAGES } from '../execution/identity.ts';
import { loadAllRecords } from '../references/export.ts';
import { readManifest, PREPARED_FILES } from '../sources/prepare.ts';
import { sourcePreparedDir } from '../core/paths.ts';
import type { CapturedWarning } from '../execution/protocol.ts';
import { referencesDir } from '../core/paths.ts';
import { requireReferenceManifest, selectEntries } from '../references/manifest.ts';
import { RecordedNumerics } from '../execution/numerics.ts';
import type { ReplayExpectation, ReplayTarget, StoredRecord } from './replay.ts';

interface PackTable {
  instance?: string;
  family?: string;
  manifest?: { source?: { family?: string; instance?: string } };
  outcomes: Record<string, Record<string, unknown>>;
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new UserError(`cannot read ${path}: ${(error as Error).message}`);
  }
}

/**
 * Verifies a pack's manifest (files_sha256) and returns its replay targets with what they were
 * computed with: pinned versions, and the numerical profile where the pack records one (packs we
 * export do; published packs do not).
 */
export function readPack(dir: string, conditions: readonly string[] = []): { targets: ReplayTarget[]; expected: ReplayExpectation } {
  const refs = join(dir, 'references');
  if (!existsSync(refs)) throw new UserError(`${dir} is not a WhatWorkedBench pack: no references/ folder`);
  let versions: Record<string, string> = {};
  let numerics: ReplayExpectation['numerics'] = 'unrecorded';
  const manifestFile = join(dir, 'manifest.json');
  if (existsSync(manifestFile)) {
    const manifest = readJson(manifestFile) as { files_sha256?: Record<string, string>; replay_versions?: Record<string, string>; numerics?: unknown };
    checkFileHashes(dir, manifest.files_sha256 ?? {}, 'pack file');
    versions = manifest.replay_versions ?? {};
    if (manifest.numerics !== undefined) {
      const recorded = RecordedNumerics.safeParse(manifest.numerics);
      if (!recorded.success) throw new UserError(`${manifestFile}: malformed 'numerics' at ${recorded.error.issues[0]!.path.join('.')}`);
      numerics = recorded.data;
    }
  }
  const ids = conditions.length
    ? [...conditions]
    : readdirSync(refs).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)).sort();
  const targets = ids.map((id): ReplayTarget => {
    const file = join(refs, `${id}.json`);
    if (!existsSync(file)) throw new UserError(`unknown instance '${id}': ${file} does not exist`);
    const table = readJson(file) as PackTable;
    const family = table.family ?? table.manifest?.source?.family;
    if (!family || !(FAMILY_NAMES as readonly string[]).includes(family)) throw new UserError(`${file}: unknown or missing family '${family}'`);
    const source = table.instance ?? table.manifest?.source?.instance ?? id;
    const records = Object.entries(table.outcomes ?? {}).map(([mask, saved]): StoredRecord => {
      const tolerances = saved.matching_tolerance_sensitivity as StoredRecord['tolerances'] | undefined;
      return {
        mask,
        utility: saved.utility as number,
        native_value: saved.native_value as number,
        prediction_sha256: saved.prediction_sha256 as string,
        warnings: (saved.warnings as CapturedWarning[] | undefined) ?? [],
        wall_seconds: typeof saved.wall_seconds === 'number' ? saved.wall_seconds : null,
        ...(tolerances ? { tolerances } : {}),
      };
    });
    const inputRoot = join(dir, 'inputs');
    const files = Object.fromEntries(
      PREPARED_FILES.map((name) => {
        const path = join(inputRoot, source, name);
        if (!existsSync(path)) throw new UserError(`pack input missing: ${path}`);
        return [name, fileSha256(path)];
      }),
    );
    return { condition: id, family: family as FamilyName, input: { source, files }, inputRoot, records };
  });
  return { targets, expected: { versions, numerics } };
}

/** Writes our tables as a pack: references/<cond>.json, inputs/<source>/ and manifest.json. */
export function exportPack(out: string, conditions: readonly string[] = [], dir = referencesDir()): number {
  const manifest = requireReferenceManifest(dir);
  const files: Record<string, string> = {};
  let count = 0;
  const selected = selectEntries(manifest, dir, conditions);
  // Every table, source manifest and prepared file is read and checked before anything is written:
  // a corrupt one is refused, never sealed into a pack, and no partial pack is left behind.
  const inputs = selected.map(([id, entry]) => {
    const source = readManifest(entry.source);
    const records = loadAllRecords([id], dir);
    checkFileHashes(sourcePreparedDir(entry.source), entry.prepared_files, 'prepared input', `run 'wwref prepare --source ${entry.source}'`);
    return { id, entry, source, records };
  });
  for (const { id, entry, source, records } of inputs) {
    const sourceBlock = { instance: entry.source, family: entry.family, plan_sha256: entry.plan_sha256, ...source.facts };
    const outcomes: Record<string, Record<string, unknown>> = {};
    for (const r of records) {
      // The record keys of the published layouts: four-option, paired six-option, beat/graph.
      const common = {
        utility: r.utility,
        native_metric: r.native_metric,
        native_value: r.native_value,
        ...(r.normalization_scale !== null ? { normalization_scale: r.normalization_scale } : {}),
      };
      outcomes[r.mask] =
        entry.family === 'beat_detection' || entry.family === 'graph_link_prediction'
          ? { ...common, ...r.extras, prediction_sha256: r.prediction_sha256, wall_seconds: r.wall_seconds, prediction_wall_seconds: r.prediction_wall_seconds, metric_wall_seconds: r.metric_wall_seconds, warnings: r.warnings }
          : { ...common, valid_prediction: true, status: r.status, prediction_sha256: r.prediction_sha256, warnings: r.warnings, mask: r.mask, plan_sha256: r.plan_sha256, wall_seconds: r.wall_seconds };
      count++;
    }
    const table =
      entry.dimensions === 4
        ? { manifest: { source: sourceBlock }, identity_sha256: digest({ source: sourceBlock }), outcomes }
        : { instance: entry.source, family: entry.family, dimensions: entry.dimensions, plan_sha256: entry.plan_sha256, outcomes, manifest: { source: sourceBlock } };
    const tablePath = join(out, 'references', `${id}.json`);
    writeJsonAtomic(tablePath, table);
    files[`references/${id}.json`] = sha256Hex(readFileSync(tablePath));
    // The prepared files must still be the ones the tables were built from when they are sealed.
    checkFileHashes(sourcePreparedDir(entry.source), entry.prepared_files, 'prepared input', `run 'wwref prepare --source ${entry.source}'`);
    for (const name of PREPARED_FILES) {
      const target = join(out, 'inputs', entry.source, name);
      try {
        makeDirs(dirname(target));
        copyFileSync(join(sourcePreparedDir(entry.source), name), target);
      } catch (error) {
        throw fsError(error, 'write', target);
      }
      files[`inputs/${entry.source}/${name}`] = sha256Hex(readFileSync(target));
    }
  }
  const replayVersions = Object.fromEntries(REPLAY_PACKAGES.map((p) => [p, manifest.versions[p] ?? '']));
  writeJsonAtomic(join(out, 'manifest.json'), { files_sha256: files, replay_versions: replayVersions, ...(manifest.numerics ? { numerics: manifest.numerics } : {}) });
  return count;
}
