// Export of the reference tables: every record of every table listed in the manifest, as one CSV.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readReferenceTable } from './tables.ts';
import { UserError } from '../core/errors.ts';
import { writeFileAtomic } from '../core/fsutil.ts';
import { pythonFloatRepr } from '../core/hashing.ts';
import { referencesDir } from '../core/paths.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { readReferenceManifest } from './manifest.ts';

export const CSV_COLUMNS = [
  'condition',
  'source',
  'family',
  'dimensions',
  'mask',
  'utility',
  'native_metric',
  'native_value',
  'independent_value',
  'normalization_scale',
  'prediction_sha256',
  'status',
  'error',
  'wall_seconds',
  'prediction_wall_seconds',
  'metric_wall_seconds',
  'plan_sha256',
  'warnings',
  'extras',
] as const satisfies readonly (keyof ReferenceRecord)[];

function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  // Floats are written as Python's repr, like the published tables, so they round-trip exactly.
  const text =
    typeof value === 'number' ? (Number.isInteger(value) && Math.abs(value) < 1e15 && !Object.is(value, -0) ? String(value) : pythonFloatRepr(value))
    : typeof value === 'string' ? value
    : JSON.stringify(value);
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** Every record of the selected conditions (all in the manifest when none named), in manifest order. */
export function loadAllRecords(conditions: readonly string[] = [], dir = referencesDir()): ReferenceRecord[] {
  const manifest = readReferenceManifest(dir);
  if (!manifest) throw new UserError(`no reference manifest in ${dir}; run 'wwref rebuild' first`);
  const ids = conditions.length ? [...conditions] : Object.keys(manifest.conditions);
  return ids.flatMap((id) => {
    const entry = manifest.conditions[id];
    if (!entry) throw new UserError(`condition '${id}' is not in the reference manifest ${dir}/manifest.json`);
    const path = join(dir, entry.table);
    if (!existsSync(path)) throw new UserError(`reference table missing: ${path}`);
    return readReferenceTable(path).records;
  });
}

export function recordsToCsv(records: ReferenceRecord[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const record of records) {
    // utility and native_value are floats even when integral (e.g. 1.0): keep Python's float text.
    lines.push(
      CSV_COLUMNS.map((c) =>
        (c === 'utility' || c === 'native_value' || c === 'independent_value') && typeof record[c] === 'number'
          ? pythonFloatRepr(record[c] as number)
          : csvField(record[c]),
      ).join(','),
    );
  }
  return `${lines.join('\n')}\n`;
}

export function exportCsv(out: string, conditions: readonly string[] = [], dir = referencesDir()): number {
  const records = loadAllRecords(conditions, dir);
  writeFileAtomic(out, recordsToCsv(records));
  return records.length;
}
