// Numbers without a JSON form (NaN, ±Infinity, and 1e999, which JSON.parse reads as Infinity) are refused
// where JSON from users and agents enters, in one line, and never reach canonicalJson as a stack trace:
// - the strict parser (analysis/strict-json.ts) refuses every spelling, naming line and column;
// - readJsonFile (core/fsutil.ts) and refuseNonFinite (core/hashing.ts) refuse them naming where they sit;
// - grade's doors (--table JSON and CSV, --observed, --records) say so in one line, exit 2;
// - canonicalJson, reached by one anyway (a door left open), names where it sits in its internal error.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseStrictJson } from '../../pipelines/analysis/strict-json.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { readJsonFile } from '../../pipelines/core/fsutil.ts';
import { canonicalJson, digest, nonFinitePath, pyFloat, refuseNonFinite } from '../../pipelines/core/hashing.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { cliInProcess } from '../support/cli.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-non-finite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

/** The error `action` throws (it must throw). */
function thrown(action: () => unknown): Error {
  try {
    action();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a refusal');
}

const SPELLINGS = ['NaN', 'nan', 'Infinity', '-Infinity', 'inf', '1e999', '-1e999', '1E400', '123456789e301'];

describe('the strict parser', () => {
  it.each(SPELLINGS)('refuses %s anywhere in a document, in one line naming line and column', (spelling) => {
    for (const text of [spelling, `{"a": ${spelling}}`, `{"a": [1, {"b": ${spelling}}]}`, `[0.5,\n ${spelling}]`]) {
      const error = thrown(() => parseStrictJson(text, 'the table'));
      expect(error, text).toBeInstanceOf(UserError);
      expect(error.message, text).toMatch(
        /^the table is not strict JSON: .*(not a JSON number|beyond the range of a float64|not a decimal number).* \(line \d+, column \d+\)$/,
      );
    }
  });

  it('keeps what is finite: the largest float64, the smallest subnormal, an underflow to zero', () => {
    expect(parseStrictJson('[1.7976931348623157e308, 5e-324, 1e-400, -0.0]', 'the table')).toEqual([1.7976931348623157e308, 5e-324, 0, -0]);
  });
});

describe('readJsonFile and refuseNonFinite', () => {
  it('a JSON file holding 1e999 is refused in one line naming the file and where the number sits', () => {
    const path = file('manifest.json', '{"files": {"a.npz": {"bytes": 1e999}}}');
    const error = thrown(() => readJsonFile(path, 'source manifest'));
    expect(error).toBeInstanceOf(UserError);
    expect(error.message).toBe(
      `source manifest ${path} holds a number without a JSON form (NaN, Infinity or beyond float64) at $.files["a.npz"].bytes; refused`,
    );
    expect(readJsonFile(file('fine.json', '{"a": [1, 2.5]}'), 'source manifest')).toEqual({ a: [1, 2.5] });
  });

  it('names the place in arrays, objects, maps and float arrays', () => {
    expect(nonFinitePath({ a: [1, 2, { b: Number.NaN }] })).toBe('$.a[2].b');
    expect(nonFinitePath([new Float64Array([1, Number.POSITIVE_INFINITY])])).toBe('$[0][1]');
    expect(nonFinitePath(new Map([['x y', pyFloat(Number.NEGATIVE_INFINITY)]]))).toBe('$["x y"]');
    expect(nonFinitePath({ a: [1, 2.5, 'NaN', null] })).toBeUndefined();
    expect(() => refuseNonFinite({ u: Number.NaN }, 'the record')).toThrow(
      /^the record holds a number without a JSON form .* at \$\.u; refused$/,
    );
  });
});

describe('canonicalJson reached by a number without a JSON form', () => {
  it('says where it sits (an internal error: a door was left open), for plain numbers, pyFloat and float arrays', () => {
    expect(thrown(() => canonicalJson({ a: { b: [0, Number.NaN] } })).message).toMatch(
      /Out of range float value NaN .* \(at \$\.a\.b\[1\]\)$/,
    );
    expect(thrown(() => digest({ t: new Float64Array([0.5, Number.NEGATIVE_INFINITY]) })).message).toMatch(
      /non-finite float -Infinity has no canonical JSON form \(at \$\.t\[1\]\)$/,
    );
    expect(thrown(() => canonicalJson({ f: pyFloat(Number.POSITIVE_INFINITY) })).message).toMatch(/\(at \$\.f\)$/);
    expect(canonicalJson({ a: 0.25, b: -0 })).toBe('{"a":0.25,"b":0}');
  });
});

describe("grade's doors", () => {
  const refs = join(dir, 'references');
  writeSurfaceCatalog(refs, [{ condition: 'lone', dimensions: 4, utility: (_z, k) => 0.2 + 0.01 * k }]);
  const table = Object.fromEntries(Array.from({ length: 16 }, (_, k) => [maskOf(k, 4), 0.3]));
  const json = JSON.stringify(table);

  it.each([
    ['--table JSON, 1e999', ['--table', file('t1.json', json.replace('0.3', '1e999'))], /beyond the range of a float64/],
    ['--table JSON, NaN', ['--table', file('t2.json', json.replace('0.3', 'NaN'))], /NaN is not a JSON number/],
    [
      '--table CSV, 1e999',
      [
        '--table',
        file(
          't.csv',
          `mask,utility\n${Object.keys(table)
            .map((m, k) => `${m},${k ? 0.3 : '1e999'}`)
            .join('\n')}\n`,
        ),
      ],
      /non-finite value Infinity/,
    ],
    [
      '--observed, 1e999',
      ['--table', file('t3.json', json), '--observed', file('o.json', '{"0000": 1e999}')],
      /beyond the range of a float64/,
    ],
  ])('%s: one line, exit 2', async (_label, args, expected) => {
    const r = await cliInProcess(['grade', '--references', refs, '--condition', 'lone', ...args], ROOT);
    expect(r.code, r.stderr).toBe(2);
    expect(
      r.stderr
        .trimEnd()
        .split('\n')
        .filter((l) => !l.startsWith('  - ')),
      r.stderr,
    ).toHaveLength(1);
    expect(r.stderr).toMatch(expected);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
  });

  it('--records with 1e999 or NaN in a record: one line, exit 2', async () => {
    const record = JSON.stringify({ condition: 'lone', observations: [{ mask: '0000', utility: 0.2 }], prediction_table: table });
    for (const spelling of ['1e999', 'NaN', '-Infinity']) {
      const path = file(`r-${spelling}.jsonl`, `${record.replace('"utility":0.2', `"utility":${spelling}`)}\n`);
      const r = await cliInProcess(['grade', '--references', refs, '--records', path], ROOT);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).toMatch(/record 1 \(line 1\) is not strict JSON/);
    }
  });
});
