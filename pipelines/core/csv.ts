// CSV as wwref writes and reads it: comma-separated, double quotes around a field that needs them
// (a doubled quote inside), floats as Python's repr so that values round-trip exactly.
import { pythonFloatRepr } from './hashing.ts';

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
