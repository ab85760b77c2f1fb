// Reference tables: one Arrow IPC file per condition, one row per mask in ascending binary order.
// Lists and objects (warnings, extras) are stored as JSON text so any Arrow reader (pandas, polars,
// DuckDB) loads the table without nested types; the table's schema metadata holds its context.
import { join } from 'node:path';
import { Float64, Int32, type Table, tableFromIPC, Utf8, type DataType } from 'apache-arrow';
import { arrowFileBytes } from '../core/tabular.ts';
import { UserError } from '../core/errors.ts';
import { ReferenceRecord } from '../execution/records.ts';

type Column = { name: keyof ReferenceRecord; type: DataType; json?: true };

const COLUMNS: Column[] = [
  { name: 'condition', type: new Utf8() },
  { name: 'source', type: new Utf8() },
  { name: 'family', type: new Utf8() },
  { name: 'dimensions', type: new Int32() },
  { name: 'mask', type: new Utf8() },
  { name: 'status', type: new Utf8() },
  { name: 'error', type: new Utf8() },
  { name: 'utility', type: new Float64() },
  { name: 'native_metric', type: new Utf8() },
  { name: 'native_value', type: new Float64() },
  { name: 'independent_value', type: new Float64() },
  { name: 'normalization_scale', type: new Float64() },
  { name: 'prediction_sha256', type: new Utf8() },
  { name: 'warnings', type: new Utf8(), json: true },
  { name: 'wall_seconds', type: new Float64() },
  { name: 'prediction_wall_seconds', type: new Float64() },
  { name: 'metric_wall_seconds', type: new Float64() },
  { name: 'plan_sha256', type: new Utf8() },
  { name: 'extras', type: new Utf8(), json: true },
];

export const TABLE_COLUMNS = COLUMNS.map((c) => c.name);

/** <references>/<condition>.arrow */
export function tablePath(condition: string, dir: string): string {
  return join(dir, `${condition}.arrow`);
}

export function tableBytes(records: ReferenceRecord[], metadata: Record<string, string>): Uint8Array {
  const columns = COLUMNS.map((c) => ({
    name: c.name,
    type: c.type,
    nullable: true,
    values: records.map((r) => (c.json ? JSON.stringify(r[c.name]) : r[c.name])),
  }));
  return arrowFileBytes(columns, metadata);
}

export interface LoadedTable {
  records: ReferenceRecord[];
  metadata: Record<string, string>;
}

/**
 * The records and schema metadata of a table's bytes (`path` names it in errors). Reading files is the
 * store's. With `rows`, a table of another length is refused before any row is decoded (a few bytes
 * of Arrow can declare millions of rows).
 */
export function decodeTable(bytes: Uint8Array, path: string, rows?: number): LoadedTable {
  let table: Table;
  try {
    table = tableFromIPC(bytes);
  } catch (error) {
    throw new UserError(`cannot read reference table ${path}: ${(error as Error).message}`);
  }
  const missing = TABLE_COLUMNS.filter((name) => !table.schema.fields.some((f) => f.name === name));
  if (missing.length) throw new UserError(`reference table ${path} lacks columns: ${missing.join(', ')}`);
  const mistyped = COLUMNS.filter((c) => String(table.schema.fields.find((f) => f.name === c.name)!.type) !== String(c.type));
  if (mistyped.length)
    throw new UserError(
      `reference table ${path}: column(s) ${mistyped.map((c) => `${c.name} (expected ${String(c.type)})`).join(', ')} have another type`,
    );
  if (rows !== undefined && table.numRows !== rows)
    throw new UserError(`reference table ${path} has ${table.numRows} rows, but the manifest records ${rows} (one per mask)`);
  const records = table.toArray().map((row, i) => {
    const raw = row.toJSON() as Record<string, unknown>;
    for (const c of COLUMNS) {
      if (!c.json) continue;
      try {
        raw[c.name] = JSON.parse(raw[c.name] as string);
      } catch {
        throw new UserError(`reference table ${path}, row ${i}, column ${c.name}: not valid JSON; rebuild the condition`);
      }
    }
    const parsed = ReferenceRecord.safeParse(raw);
    if (!parsed.success) throw new UserError(`reference table ${path}, row ${i}: ${parsed.error.issues[0]?.message}`);
    return parsed.data;
  });
  return { records, metadata: Object.fromEntries(table.schema.metadata) };
}
