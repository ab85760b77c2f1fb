// One Arrow IPC file writer for every table wwref writes (reference tables, effect tables): columns
// with their types and nullability, plus schema metadata.
import { Field, RecordBatch, Schema, Table, tableToIPC, vectorFromArray, type DataType } from 'apache-arrow';

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
  return tableToIPC(new Table(schema, draft.batches.map((b) => new RecordBatch(schema, b.data))), 'file');
}
