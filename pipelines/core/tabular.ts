// The table files wwref writes and reads: Arrow IPC (reference and effect tables: typed, nullable
// columns plus schema metadata) and CSV (comma-separated, double quotes around a field that needs them,
// a doubled quote inside, floats as Python's repr so that values round-trip exactly).
import { Field, RecordBatch, Schema, Table, tableToIPC, vectorFromArray, type DataType } from 'apache-arrow';
import { pythonFloatRepr } from './hashing.ts';

export interface ArrowColumn {
  name: string;
  type: DataType;
  nullable: boolean;
  values: unknown[];
}

export function arrowFileBytes(columns: readonly ArrowColumn[], metadata: Record<string, string> = {}): Uint8Array {
  const schema = new Schema(
    columns.map((c) => new Field(c.name, c.type, c.nullable)),
    new Map(Object.entries(metadata)),
  );
  // An empty table has no batches to re-type; build it from the schema alone.
  if (!columns[0]?.values.length) return tableToIPC(new Table(schema), 'file');
  const draft = new Table(Object.fromEntries(columns.map((c) => [c.name, vectorFromArray(c.values, c.type)])));
  return tableToIPC(
    new Table(
      schema,
      draft.batches.map((b) => new RecordBatch(schema, b.data)),
    ),
    'file',
  );
}

export function csvQuote(text: string): string {
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** A float as Python's repr (e.g. 1.0, 1e-05), quoted if needed. */
export function csvFloat(value: number): string {
  return pythonFloatRepr(value);
}

/** The fields of one CSV line, honouring double-quoted fields; cells are trimmed. */
export function splitCsvLine(line: string): string[] {
  const cells: string[] = [];
  let cell = '';
  let quoted = false;
  for (let k = 0; k < line.length; k++) {
    const ch = line[k]!;
    if (quoted && ch === '"' && line[k + 1] === '"') {
      cell += '"';
      k++;
    } else if (ch === '"') {
      quoted = !quoted;
    } else if (ch === ',' && !quoted) {
      cells.push(cell);
      cell = '';
    } else {
      cell += ch;
    }
  }
  cells.push(cell);
  return cells.map((c) => c.trim());
}
