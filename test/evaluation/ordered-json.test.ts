// The JSON writer of records and of `episode` output (pipelines/evaluation/ordered-json.ts): masks
// in order, and otherwise the text JSON.stringify would write, on one line or laid out.
import { describe, expect, it } from 'vitest';
import { Ordered, orderedJson, withMaskOrderedTables } from '../../pipelines/evaluation/ordered-json.ts';

const SAMPLE = {
  condition: 'wine',
  empty: {},
  none: [],
  skipped: undefined,
  nested: { list: [1, 'two', null, { deep: true }], holes: [undefined, 3] },
  text: 'a "quoted" line\nand é',
  number: -0.125,
};

describe('orderedJson', () => {
  it('writes what JSON.stringify writes, compact and with an indent of 2 or 4', () => {
    expect(orderedJson(SAMPLE)).toBe(JSON.stringify(SAMPLE));
    expect(orderedJson(SAMPLE, 2)).toBe(JSON.stringify(SAMPLE, null, 2));
    expect(orderedJson(SAMPLE, 4)).toBe(JSON.stringify(SAMPLE, null, 4));
  });

  it('keeps the order of an Ordered, integer-like keys included, at any depth', () => {
    const ordered = {
      table: new Ordered([
        ['0000', 1],
        ['1000', 2],
        ['0100', 3],
      ]),
    };
    expect(orderedJson(ordered)).toBe('{"table":{"0000":1,"1000":2,"0100":3}}');
    expect(orderedJson(ordered, 2)).toBe('{\n  "table": {\n    "0000": 1,\n    "1000": 2,\n    "0100": 3\n  }\n}');
  });

  it('puts every prediction_table in mask order, leaving everything else as it is', () => {
    const table = Object.fromEntries(['1000', '0000', '1111', '0001'].map((mask, i) => [mask, i]));
    expect(Object.keys(table)[0]).toBe('1000'); // what a plain object does to masks
    const result = { score: { prediction_table: table, effect_mae: 0.1 }, shared: [{ prediction_table: table }], note: 'x' };
    const text = orderedJson(withMaskOrderedTables(result));
    expect(text).toBe(
      '{"score":{"prediction_table":{"0000":1,"0001":3,"1000":0,"1111":2},"effect_mae":0.1},' +
        '"shared":[{"prediction_table":{"0000":1,"0001":3,"1000":0,"1111":2}}],"note":"x"}',
    );
    expect(JSON.parse(text)).toEqual(result);
  });
});
