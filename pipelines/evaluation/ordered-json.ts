// JSON written with its keys in a given order: the records of controls and cohorts and the output of
// `wwref episode`. A plain object puts integer-like keys such as "1000" before "0000", which would
// scramble a prediction table's masks and the order of acquisition.
/** An object whose keys are written in the order given (masks of a table, observations in order). */
export class Ordered {
  constructor(readonly entries: readonly (readonly [string, unknown])[]) {}
}

/** A prediction table (mask -> utility) written in mask order. */
export function maskOrdered(table: Record<string, number>): Ordered {
  return new Ordered(
    Object.keys(table)
      .sort()
      .map((mask) => [mask, table[mask]]),
  );
}

/** `value` with every `prediction_table` object in it (a mask -> utility table) in mask order, for orderedJson. */
export function withMaskOrderedTables(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withMaskOrderedTables);
  if (value === null || typeof value !== 'object' || value instanceof Ordered) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, v]) => [
      key,
      key === 'prediction_table' && v !== null && typeof v === 'object' && !Array.isArray(v)
        ? maskOrdered(v as Record<string, number>)
        : withMaskOrderedTables(v),
    ]),
  );
}

/**
 * JSON text in which every Ordered keeps its order; anything else as JSON.stringify writes it, with
 * `indent` spaces a level as JSON.stringify(value, null, indent) lays it out (none: one line).
 */
export function orderedJson(value: unknown, indent = 0, depth = 0): string {
  const entries =
    value instanceof Ordered
      ? value.entries
      : value !== null && typeof value === 'object' && !Array.isArray(value)
        ? Object.entries(value).filter(([, v]) => v !== undefined)
        : undefined;
  const inner = indent ? `\n${' '.repeat(indent * (depth + 1))}` : '';
  const outer = indent ? `\n${' '.repeat(indent * depth)}` : '';
  if (entries !== undefined) {
    if (!entries.length) return '{}';
    const separator = indent ? ': ' : ':';
    return `{${inner}${entries.map(([k, v]) => `${JSON.stringify(k)}${separator}${orderedJson(v, indent, depth + 1)}`).join(`,${inner}`)}${outer}}`;
  }
  if (Array.isArray(value)) {
    if (!value.length) return '[]';
    return `[${inner}${value.map((v) => orderedJson(v === undefined ? null : v, indent, depth + 1)).join(`,${inner}`)}${outer}]`;
  }
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError(`cannot write ${typeof value} as JSON`);
  return text;
}
