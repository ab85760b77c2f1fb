// Export of the reference tables: every record of every table listed in the manifest, as one CSV.
import { TABLE_COLUMNS } from './tables.ts';
import { writeFileAtomic } from '../core/fsutil.ts';
import { checkOutputPath } from '../core/containment.ts';
import { csvFloat, csvQuote } from '../core/tabular.ts';
import type { Settings } from '../core/settings.ts';
import type { ReferenceRecord } from '../execution/records.ts';
import { ReferenceStore } from './store.ts';

/** The CSV has the columns of the Arrow tables, in the same order. */
export const CSV_COLUMNS = TABLE_COLUMNS;

function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'number')
    return Number.isInteger(value) && Math.abs(value) < 1e15 && !Object.is(value, -0) ? String(value) : csvFloat(value);
  return csvQuote(typeof value === 'string' ? value : JSON.stringify(value));
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

export function exportCsv(settings: Settings, out: string, conditions: readonly string[] = []): number {
  checkOutputPath(settings.paths, out, 'CSV file');
  const records = new ReferenceStore(settings.paths.references, settings.paths).records(conditions);
  writeFileAtomic(out, recordsToCsv(records));
  return records.length;
}
