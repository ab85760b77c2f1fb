// Export of the reference tables: every record of every table listed in the manifest, as one CSV.
import { join } from 'node:path';
import { readReferenceTable, TABLE_COLUMNS } from './tables.ts';
import { checkFileHashes } from '../core/hashing.ts';
import { writeFileAtomic } from '../core/fsutil.ts';
import { csvFloat, csvQuote } from '../core/csv.ts';
import { referencesDir } from '../core/paths.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { requireReferenceManifest, selectEntries } from './manifest.ts';

/** The CSV has the columns of the Arrow tables, in the same order. */
export const CSV_COLUMNS = TABLE_COLUMNS;

function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number') return Number.isInteger(value) && Math.abs(value) < 1e15 && !Object.is(value, -0) ? String(value) : csvFloat(value);
  return csvQuote(typeof value === 'string' ? value : JSON.stringify(value));
}

/**
 * Every record of the selected conditions (all in the manifest when none named), in manifest order.
 * Each table is checked against its sha256 in the manifest before it is read.
 */
export function loadAllRecords(conditions: readonly string[] = [], dir = referencesDir()): ReferenceRecord[] {
  return selectEntries(requireReferenceManifest(dir), dir, conditions).flatMap(([, entry]) => {
    checkFileHashes(dir, { [entry.table]: entry.table_sha256 }, 'reference table', 'its sha256 no longer matches the manifest');
    return readReferenceTable(join(dir, entry.table)).records;
  });
}

export function recordsToCsv(records: ReferenceRecord[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const record of records) {
    // utility and native_value are floats even when integral (e.g. 1.0): keep Python's float text.
    lines.push(
      CSV_COLUMNS.map((c) =>
        (c === 'utility' || c === 'native_value' || c === 'independent_value') && typeof record[c] === 'number'
          ? csvFloat(record[c] as number)
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
