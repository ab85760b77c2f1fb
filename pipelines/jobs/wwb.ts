// Interoperability with the published WhatWorkedBench pack layout:
//   <pack>/manifest.json            {files_sha256: {relative path: sha256}, replay_versions: {...},
//                                    numerics (ours only: the numerical profile of the records)}
//   <pack>/references/<cond>.json   one table per condition (three published layouts, see below)
//   <pack>/inputs/<source>/         arrays.npz + metadata.json.gz
// Reading turns a pack into replay targets; writing exports our tables in that layout.
// A pack is foreign input, so reading it trusts nothing in it: the manifest and tables are
// schema-checked (zod); every path it names must stay inside the pack after `..` and symbolic links
// are resolved; only regular files of bounded size are opened (never a FIFO or a device); every file
// the manifest lists is checked against its sha256, and a table or input that it does not list is
// refused. A table is read once: the bytes hashed are the bytes parsed.
import { closeSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import { UserError } from '../core/errors.ts';
import type { FamilyName } from '../catalog/families.ts';
import { FAMILY_NAMES } from '../catalog/families.ts';
import {
  checkOutputPath,
  generatedFolders,
  hashDescriptor,
  insideRoot,
  isInside,
  lstatOrNothing,
  openRegularFile,
  readRegularFile,
  realPath,
  relativePathProblem,
  SAFE_FILE_NAME,
  SOURCE_FOLDERS,
} from '../core/containment.ts';
import { writeFileAtomic } from '../core/fsutil.ts';
import { checkFileHashes, digest, sha256Hex } from '../core/hashing.ts';
import { REPLAY_PACKAGES } from '../execution/identity.ts';
import { readManifest, PREPARED_FILES } from '../sources/prepare.ts';
import type { Settings } from '../core/settings.ts';
import { CapturedWarning } from '../execution/protocol.ts';
import { ReferenceStore } from '../references/store.ts';
import { RecordedNumerics } from '../execution/numerics.ts';
import type { ReplayExpectation, ReplayTarget, StoredRecord } from './replay.ts';

/** What a folder must hold to be read as a pack; said by every refusal of a folder that is not one. */
const PACK_CONTENTS =
  'a pack holds manifest.json (files_sha256: the sha256 of every file of the pack; replay_versions), ' +
  'references/<condition>.json and inputs/<source>/{arrays.npz,metadata.json.gz}';
/** The manifest and each table are parsed whole; the published tables are well under 1 MiB. */
export const PACK_JSON_MAX_BYTES = 64 << 20;
/** Any other listed file is hashed streamed, up to this size; prepared inputs are a few MiB. */
export const PACK_FILE_MAX_BYTES = 1 << 30;

/** A string that `problem` accepts, else an issue quoting it (a key, a name). */
function checked(problem: (value: string) => string | undefined) {
  return z.string().superRefine((value, ctx) => {
    const found = problem(value);
    if (found) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(value)} ${found}` });
  });
}
const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'is not a sha256 (64 lowercase hex digits)');
const PackPath = checked(relativePathProblem);
/** A source name is the folder inputs/<source>/: one name, no separator. */
const SourceName = checked((name) => (SAFE_FILE_NAME.test(name) ? undefined : 'is not a single file name'));
const Mask = checked((mask) => (/^(?:[01]{4}|[01]{6})$/.test(mask) ? undefined : 'is not a mask (4 or 6 characters 0/1)'));

// Published manifests carry more keys (e.g. `about`): loose objects, only the keys read are checked.
const PackManifest = z.looseObject({
  files_sha256: z.record(PackPath, Sha256),
  replay_versions: z.record(z.string(), z.string()),
  numerics: RecordedNumerics.optional(),
});

/** The keys every published layout shares (4a four-option, 4b paired six-option, 4c beat/graph). */
const PackOutcome = z.looseObject({
  utility: z.number().nullable(),
  native_value: z.number().nullable(),
  prediction_sha256: Sha256.nullable(),
  warnings: z.array(CapturedWarning).optional(),
  wall_seconds: z.number().nullable().optional(),
  matching_tolerance_sensitivity: z.record(z.string(), z.looseObject({ true_positive: z.number(), f1: z.number() })).optional(),
});
const Outcomes = z.record(Mask, PackOutcome).superRefine((outcomes, ctx) => {
  const widths = [...new Set(Object.keys(outcomes).map((mask) => mask.length))];
  if (widths.length === 0) ctx.addIssue({ code: 'custom', message: 'no outcomes' });
  if (widths.length > 1) ctx.addIssue({ code: 'custom', message: `masks of different widths (${widths.join(' and ')})` });
});
/** Family and source are at the top (4b, 4c) or in manifest.source (4a; 4b and 4c repeat them there). */
const PackTable = z.looseObject({
  instance: SourceName.optional(),
  family: z.string().optional(),
  manifest: z
    .looseObject({ source: z.looseObject({ instance: SourceName.optional(), family: z.string().optional() }).optional() })
    .optional(),
  outcomes: Outcomes,
});

/** The first issue, one line: where, and what is wrong (a bad record key says which key). */
function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0]!;
  const inner = issue.code === 'invalid_key' ? issue.issues[0] : undefined;
  const where = (inner ? issue.path.slice(0, -1) : issue.path).map(String).join('.');
  return `${where || '(top level)'}: ${inner?.message ?? issue.message}`;
}

function parsePackJson<S extends z.ZodType>(schema: S, bytes: Buffer, what: string, path: string): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new UserError(`${what} ${path} is not JSON: ${(error as Error).message.replace(/\s+/g, ' ')}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new UserError(`${what} ${path} is malformed: ${firstIssue(parsed.error)}; refused`);
  return parsed.data;
}

/** Whether `dir` has the shape of a pack (a references/ entry): how diff tells a pack from a reference folder. */
export function isPackFolder(dir: string): boolean {
  return lstatOrNothing(join(dir, 'references')) !== undefined;
}

/** The pack's real root and references/ folder, or a UserError saying what a pack holds. */
function packFolders(dir: string): { root: string; references: string } {
  const root = realPath(dir);
  const stats = lstatOrNothing(root);
  if (!stats) throw new UserError(`pack ${dir} does not exist`);
  if (!stats.isDirectory()) throw new UserError(`${dir} is not a WhatWorkedBench pack: not a folder (${PACK_CONTENTS})`);
  if (!lstatOrNothing(join(root, 'manifest.json')))
    throw new UserError(`${dir} is not a WhatWorkedBench pack: no manifest.json (${PACK_CONTENTS})`);
  if (!lstatOrNothing(join(root, 'references')))
    throw new UserError(`${dir} is not a WhatWorkedBench pack: no references/ folder (${PACK_CONTENTS})`);
  const references = insideRoot(root, 'references', 'pack folder');
  if (!lstatOrNothing(references)?.isDirectory())
    throw new UserError(`${dir} is not a WhatWorkedBench pack: references is not a folder (${PACK_CONTENTS})`);
  return { root, references };
}

/** sha256 of a regular file, streamed and bounded (PACK_FILE_MAX_BYTES). */
function boundedSha256(path: string, what: string): string {
  const { fd, size } = openRegularFile(path, what);
  try {
    if (size > PACK_FILE_MAX_BYTES)
      throw new UserError(`${what} ${path} is ${size} bytes, more than the ${PACK_FILE_MAX_BYTES} allowed; refused`);
    const { sha256, bytes } = hashDescriptor(fd, undefined, PACK_FILE_MAX_BYTES);
    if (bytes > PACK_FILE_MAX_BYTES)
      throw new UserError(`${what} ${path} grew past the ${PACK_FILE_MAX_BYTES} bytes allowed while it was read; refused`);
    return sha256;
  } finally {
    closeSync(fd);
  }
}

/**
 * Checks every file the manifest lists: inside the pack (links resolved), a regular file of bounded
 * size, with the recorded sha256. The files in `keep` (the tables to parse) are read whole, once, and
 * returned: what is parsed is exactly what was hashed.
 */
function verifyPackFiles(root: string, listed: ReadonlyMap<string, string>, keep: ReadonlySet<string>): Map<string, Buffer> {
  // every path is resolved before anything is read: a key leaving the pack is refused at once
  const paths = [...listed.keys()].map((key) => [key, insideRoot(root, key, 'pack file')] as const);
  const kept = new Map<string, Buffer>();
  for (const [key, path] of paths) {
    if (!lstatOrNothing(path)) throw new UserError(`pack file missing: ${path}`);
    let actual: string;
    if (keep.has(key)) {
      const bytes = readRegularFile(path, 'pack file', PACK_JSON_MAX_BYTES);
      actual = sha256Hex(bytes);
      kept.set(key, bytes);
    } else {
      actual = boundedSha256(path, 'pack file');
    }
    if (actual !== listed.get(key)) throw new UserError(`pack file changed: ${path} (recorded ${listed.get(key)}, file ${actual})`);
  }
  return kept;
}

/** The conditions to read: those named, or every references/*.json of the pack. */
function tableIds(references: string, conditions: readonly string[]): string[] {
  if (conditions.length) return [...new Set(conditions)];
  return readdirSync(references)
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -5))
    .sort();
}

/** A table's key in files_sha256; the condition must name one file, which must be there and listed. */
function tableKey(id: string, references: string, listed: ReadonlyMap<string, string>, manifestFile: string): string {
  if (!SAFE_FILE_NAME.test(id))
    throw new UserError(`condition ${JSON.stringify(id)} is not a single name (a pack's tables are references/<condition>.json); refused`);
  const file = join(references, `${id}.json`);
  if (!lstatOrNothing(file)) throw new UserError(`unknown instance '${id}': ${file} does not exist`);
  const key = `references/${id}.json`;
  if (!listed.has(key))
    throw new UserError(`pack table ${key} is not listed in ${manifestFile} files_sha256, so it cannot be checked; refused`);
  return key;
}

/** One of two places naming the same thing (family, source): the first found; refused when they differ. */
function agreed(top: string | undefined, nested: string | undefined, what: string, file: string): string | undefined {
  if (top !== undefined && nested !== undefined && top !== nested)
    throw new UserError(`pack table ${file}: ${what} '${top}' and manifest.source.${what} '${nested}' differ; refused`);
  return top ?? nested;
}

/** A table's replay target: family, records, and its input, each file of which is listed (and so checked). */
function packTarget(
  id: string,
  bytes: Buffer,
  file: string,
  inputRoot: string,
  listed: ReadonlyMap<string, string>,
  manifestFile: string,
): ReplayTarget {
  const table = parsePackJson(PackTable, bytes, 'pack table', file);
  const family = agreed(table.family, table.manifest?.source?.family, 'family', file);
  if (!family || !(FAMILY_NAMES as readonly string[]).includes(family))
    throw new UserError(`${file}: unknown or missing family '${family}'`);
  const source = agreed(table.instance, table.manifest?.source?.instance, 'instance', file) ?? id;
  // the worker reads <inputs>/<source>/<name>: a folder of inputs/ and files of that folder, no link out of either
  const folder = insideRoot(inputRoot, source, 'pack input folder');
  const files = Object.fromEntries(
    PREPARED_FILES.map((name) => {
      const key = `inputs/${source}/${name}`;
      const sha = listed.get(key);
      if (!sha)
        throw new UserError(`pack input ${key} (of ${id}) is not listed in ${manifestFile} files_sha256, so it cannot be checked; refused`);
      insideRoot(folder, name, 'pack input');
      return [name, sha];
    }),
  );
  const records = Object.entries(table.outcomes).map(
    ([mask, saved]): StoredRecord => ({
      mask,
      utility: saved.utility,
      native_value: saved.native_value,
      prediction_sha256: saved.prediction_sha256,
      warnings: saved.warnings ?? [],
      wall_seconds: saved.wall_seconds ?? null,
      ...(saved.matching_tolerance_sensitivity ? { tolerances: saved.matching_tolerance_sensitivity } : {}),
    }),
  );
  return { condition: id, family: family as FamilyName, input: { source, files }, inputRoot, records };
}

/**
 * Verifies a pack (see the head of this file) and returns its replay targets with what they were
 * computed with: pinned versions, and the numerical profile where the pack records one (packs we
 * export do; published packs do not). The one reader of packs: replay --format wwb and diff.
 */
export function readPack(dir: string, conditions: readonly string[] = []): { targets: ReplayTarget[]; expected: ReplayExpectation } {
  const { root, references } = packFolders(dir);
  const manifestFile = insideRoot(root, 'manifest.json', 'pack manifest');
  const manifest = parsePackJson(
    PackManifest,
    readRegularFile(manifestFile, 'pack manifest', PACK_JSON_MAX_BYTES),
    'pack manifest',
    manifestFile,
  );
  const listed = new Map(Object.entries(manifest.files_sha256));
  const keys = new Map(tableIds(references, conditions).map((id) => [id, tableKey(id, references, listed, manifestFile)]));
  const tables = verifyPackFiles(root, listed, new Set(keys.values()));
  const inputRoot = insideRoot(root, 'inputs', 'pack folder');
  const targets = [...keys].map(([id, key]) => packTarget(id, tables.get(key)!, join(root, key), inputRoot, listed, manifestFile));
  return { targets, expected: { versions: manifest.replay_versions, numerics: manifest.numerics ?? 'unrecorded' } };
}

/** One name (a condition, a source) that becomes one file or folder name of the pack. */
function singleName(name: string, what: string): string {
  if (!SAFE_FILE_NAME.test(name)) throw new UserError(`${what} ${JSON.stringify(name)} is not a single file name; refused`);
  return name;
}

/** Where a pack file is written: inside `out` (links resolved) and in none of the folders only wwref writes. */
function writeTarget(out: string, relative: string, guarded: readonly string[]): string {
  const target = insideRoot(out, relative, 'pack file');
  for (const folder of guarded) {
    if (isInside(target, folder))
      throw new UserError(`pack file ${target} would be inside ${folder}, where no export writes; choose another folder`);
  }
  return target;
}

/** A table already in out/references/ that this export does not write would make the pack unreadable (unlisted). */
function refuseStaleTables(out: string, written: ReadonlySet<string>): void {
  let names: string[];
  try {
    names = readdirSync(join(realPath(out), 'references'));
  } catch {
    return;
  }
  const stale = names.find((name) => name.endsWith('.json') && !written.has(`references/${name}`));
  if (stale)
    throw new UserError(
      `${out} already holds references/${stale}, which this export does not write (a pack lists every table it holds); export into an empty folder`,
    );
}

/** A prepared file's bytes, read once and checked against the sha256 the references were built from. */
function checkedPrepared(settings: Settings, source: string, name: string, recorded: string | undefined): Buffer {
  const path = insideRoot(join(settings.paths.prepared, source), name, 'prepared input');
  if (!recorded) throw new UserError(`the reference manifest records no sha256 for prepared input ${path}; refused`);
  const bytes = readRegularFile(path, 'prepared input', PACK_FILE_MAX_BYTES);
  const actual = sha256Hex(bytes);
  if (actual !== recorded)
    throw new UserError(`prepared input changed: ${path} (recorded ${recorded}, file ${actual}); run 'wwref prepare --source ${source}'`);
  return bytes;
}

/**
 * Writes our tables as a pack: references/<cond>.json, inputs/<source>/ and, last, manifest.json
 * (a pack killed mid-way has no new manifest, and is refused). Only under `out` (checked first:
 * core/containment.ts checkOutputPath), and no file into a protected folder that `out` holds.
 */
export function exportPack(settings: Settings, out: string, conditions: readonly string[] = [], dir = settings.paths.references): number {
  checkOutputPath(settings.paths, out, 'pack folder', { kind: 'folder', generated: [dir] });
  // each file again, links resolved: `out` may hold a protected folder (outputs/ holds outputs/references)
  const guarded = [dir, ...generatedFolders(settings.paths), ...SOURCE_FOLDERS];
  const store = new ReferenceStore(dir, settings.paths);
  const manifest = store.requireManifest();
  const files: Record<string, string> = {};
  let count = 0;
  const selected = store.select(manifest, conditions);
  // Every table, source manifest and prepared file is read and checked before anything is written:
  // a corrupt one is refused, never sealed into a pack, and no partial pack is left behind.
  const inputs = selected.map(([id, entry]) => {
    singleName(id, 'condition');
    singleName(entry.source, 'source');
    const source = readManifest(settings.paths, entry.source);
    const records = store.table(id, manifest).records;
    checkFileHashes(
      join(settings.paths.prepared, entry.source),
      entry.prepared_files,
      'prepared input',
      `run 'wwref prepare --source ${entry.source}'`,
    );
    return { id, entry, source, records };
  });
  refuseStaleTables(out, new Set(inputs.map(({ id }) => `references/${id}.json`)));
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
          ? {
              ...common,
              ...r.extras,
              prediction_sha256: r.prediction_sha256,
              wall_seconds: r.wall_seconds,
              prediction_wall_seconds: r.prediction_wall_seconds,
              metric_wall_seconds: r.metric_wall_seconds,
              warnings: r.warnings,
            }
          : {
              ...common,
              valid_prediction: true,
              status: r.status,
              prediction_sha256: r.prediction_sha256,
              warnings: r.warnings,
              mask: r.mask,
              plan_sha256: r.plan_sha256,
              wall_seconds: r.wall_seconds,
            };
      count++;
    }
    const table =
      entry.dimensions === 4
        ? { manifest: { source: sourceBlock }, identity_sha256: digest({ source: sourceBlock }), outcomes }
        : {
            instance: entry.source,
            family: entry.family,
            dimensions: entry.dimensions,
            plan_sha256: entry.plan_sha256,
            outcomes,
            manifest: { source: sourceBlock },
          };
    const tableKey = `references/${id}.json`;
    const tableBytes = Buffer.from(`${JSON.stringify(table, null, 2)}\n`);
    writeFileAtomic(writeTarget(out, tableKey, guarded), tableBytes);
    files[tableKey] = sha256Hex(tableBytes);
    // The prepared files must still be the ones the tables were built from: the bytes checked are the bytes copied.
    for (const name of PREPARED_FILES) {
      const bytes = checkedPrepared(settings, entry.source, name, entry.prepared_files[name]);
      const key = `inputs/${entry.source}/${name}`;
      writeFileAtomic(writeTarget(out, key, guarded), bytes);
      files[key] = sha256Hex(bytes);
    }
  }
  const replayVersions = Object.fromEntries(REPLAY_PACKAGES.map((p) => [p, manifest.versions[p] ?? '']));
  const sealed = { files_sha256: files, replay_versions: replayVersions, ...(manifest.numerics ? { numerics: manifest.numerics } : {}) };
  writeFileAtomic(writeTarget(out, 'manifest.json', guarded), `${JSON.stringify(sealed, null, 2)}\n`);
  return count;
}
