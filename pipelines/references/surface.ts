// What a sha256 cannot vouch for: anyone who can edit a table can also write its new sha256 into the
// manifest. So the store checks, on every read, that a manifest and its tables describe one complete
// response surface: every legal mask exactly once and in order, every record ok, each record and the
// table's metadata naming the condition, source, family, dimensions, plan and inputs its manifest
// entry names, and the entry's counts following from its table.
import { FAMILIES, type FamilyName } from '../catalog/families.ts';
import { allMasks } from '../catalog/masks.ts';
import { ID_MAX_LENGTH, ID_PATTERN, ID_RULE } from '../catalog/plan.ts';
import { canonicalJson } from '../core/hashing.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { PREPARED_FILES } from '../sources/prepare.ts';
import type { ConditionEntry, ReferenceManifest } from './manifest.ts';
import type { LoadedTable } from './tables.ts';

const SHA256 = /^[0-9a-f]{64}$/;
/** The widest response surface a folder may hold (the catalog's have 4 or 6 options). */
const MAX_OPTIONS = 8;

/** The file of a condition's table: always `<condition>.arrow`, inside the folder. */
export function tableFile(condition: string): string {
  return `${condition}.arrow`;
}

/** The context a table carries in its schema metadata (key `wwref`), written and checked here only. */
export function tableMetadata(
  condition: string,
  entry: ConditionEntry,
  manifest: Pick<ReferenceManifest, 'versions' | 'numerics' | 'code'>,
): Record<string, string> {
  return {
    wwref: JSON.stringify({
      condition,
      source: entry.source,
      family: entry.family,
      dimensions: entry.dimensions,
      plan_sha256: entry.plan_sha256,
      prepared_files: entry.prepared_files,
      versions: manifest.versions,
      numerical_profile: manifest.numerics?.profile ?? null,
      workflows_sha256: manifest.code.workflows_sha256,
    }),
  };
}

/** Why a manifest is not a consistent description of a folder (empty when it is). */
export function manifestProblems(manifest: ReferenceManifest): string[] {
  const problems: string[] = [];
  const planOf = new Map<string, { sha: string; file: string; id: string }>();
  for (const [id, entry] of Object.entries(manifest.conditions)) {
    const where = `condition '${id}'`;
    if (!ID_PATTERN.test(id) || id.length > ID_MAX_LENGTH)
      problems.push(`condition ${JSON.stringify(id).slice(0, 80)}: not a condition id (${ID_RULE})`);
    if (entry.table !== tableFile(id))
      problems.push(`${where}: table '${entry.table}' is not ${tableFile(id)} (a table is named after its condition, inside the folder)`);
    // the plan decides which widths a condition has (replay checks the entry against it); here only the bounds
    if (!FAMILIES[entry.family as FamilyName]) problems.push(`${where}: unknown family '${entry.family}'`);
    if (!Number.isInteger(entry.dimensions) || entry.dimensions < 1 || entry.dimensions > MAX_OPTIONS)
      problems.push(`${where}: ${entry.dimensions} options (1 to ${MAX_OPTIONS})`);
    if (entry.records !== 2 ** entry.dimensions)
      problems.push(`${where}: ${entry.records} records, but ${entry.dimensions} options have ${2 ** entry.dimensions} masks`);
    if (entry.failed !== 0)
      problems.push(`${where}: ${entry.failed} failed record(s) recorded; a table is written only when every record passed`);
    if (!SHA256.test(entry.table_sha256) || !SHA256.test(entry.plan_sha256))
      problems.push(`${where}: table_sha256 and plan_sha256 must be sha256 hex digests`);
    const files = Object.keys(entry.prepared_files).sort();
    if (
      canonicalJson(files) !== canonicalJson([...PREPARED_FILES].sort()) ||
      !Object.values(entry.prepared_files).every((h) => SHA256.test(h))
    ) {
      problems.push(`${where}: prepared_files must give the sha256 of exactly ${PREPARED_FILES.join(' and ')}`);
    }
    const plan = planOf.get(entry.source);
    if (!plan) planOf.set(entry.source, { sha: entry.plan_sha256, file: entry.plan_file, id });
    else if (plan.sha !== entry.plan_sha256 || plan.file !== entry.plan_file) {
      problems.push(
        `${where} and '${plan.id}' name two plans of source '${entry.source}' ` +
          `(${entry.plan_sha256.slice(0, 12)} from ${entry.plan_file}, ${plan.sha.slice(0, 12)} from ${plan.file}); ` +
          `one manifest holds one plan per source`,
      );
    }
  }
  return problems;
}

/** Why a decoded table is not the one its manifest entry describes (empty when it is). */
export function tableProblems(condition: string, entry: ConditionEntry, manifest: ReferenceManifest, table: LoadedTable): string[] {
  const problems: string[] = [];
  const expected = JSON.parse(tableMetadata(condition, entry, manifest).wwref!) as Record<string, unknown>;
  let recorded: Record<string, unknown> = {};
  try {
    recorded = JSON.parse(table.metadata.wwref ?? '') as Record<string, unknown>;
  } catch {
    problems.push('its schema metadata lacks the wwref context (condition, plan, inputs, versions, code)');
  }
  if (typeof recorded === 'object' && recorded !== null && table.metadata.wwref) {
    for (const [key, value] of Object.entries(expected)) {
      if (canonicalJson(recorded[key] ?? null) !== canonicalJson(value)) {
        problems.push(`metadata ${key} is ${JSON.stringify(recorded[key] ?? null)}, the manifest says ${JSON.stringify(value)}`);
      }
    }
  }
  const masks = allMasks(entry.dimensions);
  if (table.records.length !== masks.length)
    problems.push(`${table.records.length} rows, but the manifest records ${entry.records} (one per mask of ${entry.dimensions} options)`);
  const seen = new Set<string>();
  let nativeSeconds = 0;
  table.records.forEach((record, i) => {
    const row = `row ${i} (mask ${JSON.stringify(record.mask)})`;
    if (seen.has(record.mask)) problems.push(`${row}: mask appears twice`);
    seen.add(record.mask);
    if (record.mask !== masks[i])
      problems.push(`${row}: expected mask ${masks[i] ?? '(none: too many rows)'} here (ascending binary order)`);
    problems.push(...recordProblems(condition, entry, record).map((p) => `${row}: ${p}`));
    nativeSeconds += record.wall_seconds ?? 0;
  });
  const missing = masks.filter((m) => !seen.has(m));
  if (missing.length) problems.push(`no record for mask(s) ${missing.slice(0, 8).join(', ')}${missing.length > 8 ? ', …' : ''}`);
  if (nativeSeconds !== entry.native_seconds)
    problems.push(`native_seconds ${entry.native_seconds} in the manifest, ${nativeSeconds} summed over the table`);
  return problems;
}

function recordProblems(condition: string, entry: ConditionEntry, record: ReferenceRecord): string[] {
  const problems: string[] = [];
  const same: [keyof ReferenceRecord, unknown][] = [
    ['condition', condition],
    ['source', entry.source],
    ['family', entry.family],
    ['dimensions', entry.dimensions],
    ['plan_sha256', entry.plan_sha256],
  ];
  for (const [field, value] of same)
    if (record[field] !== value) problems.push(`${field} is ${JSON.stringify(record[field])}, the manifest says ${JSON.stringify(value)}`);
  if (record.status !== 'ok' || record.error !== null)
    problems.push(`status ${record.status}${record.error ? ` (${record.error})` : ''}; a table holds only passed records`);
  if (record.prediction_sha256 === null || !SHA256.test(record.prediction_sha256)) problems.push('no prediction sha256');
  if (record.utility === null || !Number.isFinite(record.utility) || record.utility < 0 || record.utility > 1)
    problems.push(`utility ${record.utility} is not in [0, 1]`);
  if (record.native_value === null || record.independent_value === null) problems.push('no native or independent metric value');
  for (const field of ['wall_seconds', 'prediction_wall_seconds', 'metric_wall_seconds'] as const) {
    const seconds = record[field];
    if (seconds === null || !Number.isFinite(seconds) || seconds < 0) problems.push(`${field} ${seconds} is not a duration`);
  }
  return problems;
}
