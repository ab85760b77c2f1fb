// Checks pipelines/core/hashing.ts against the real Python (the pinned venv) — the workers' canonical_json
// and digest (workflows/hashing.py), repr(float) and hashlib — in one batched Python process for the
// whole file.
import { beforeAll, describe, expect, it } from 'vitest';
import { startPython } from '../../pipelines/execution/launcher.ts';
import { currentSettings } from '../support/workspace.ts';
import { seededRandom } from '../support/random.ts';
import { canonicalJson, compareCodePoints, digest, pyFloat, pythonFloatRepr, sha256Hex } from '../../pipelines/core/hashing.ts';

const SETTINGS = currentSettings();

const random = seededRandom(20260907);
const rand = random.next;
const randInt = random.int;
const pick = random.pick;

const dv = new DataView(new ArrayBuffer(8));
function bitsOf(x: number): string {
  dv.setFloat64(0, x); // big-endian
  return dv.getBigUint64(0).toString(16).padStart(16, '0');
}
function fromBits(hi: number, lo: number): number {
  dv.setUint32(0, hi);
  dv.setUint32(4, lo);
  return dv.getFloat64(0);
}
function randomDoubleAnyExponent(): number {
  for (;;) {
    const x = fromBits(Math.floor(rand() * 2 ** 32), Math.floor(rand() * 2 ** 32));
    if (Number.isFinite(x)) return x;
  }
}

// ---------------------------------------------------------------------------------------------
// Float corpus for repr.
const specialFloats: number[] = [
  0,
  -0,
  1,
  -1,
  0.1,
  0.2,
  0.30000000000000004,
  1 / 3,
  2 / 3,
  0.5,
  1e16,
  1e-5,
  1e-4,
  9.999999999999999e-5,
  0.0001,
  0.00011,
  1e15,
  1e16 - 2,
  9999999999999998,
  1e17,
  1.5e16,
  // biome-ignore lint/correctness/noPrecisionLoss: a literal Python and JavaScript must round alike
  1.2345678901234567e16,
  123456789012345.6,
  1e21,
  1e22,
  1e23,
  1e-7,
  5e-324,
  -5e-324,
  2.2250738585072014e-308,
  2.225073858507201e-308,
  1.7976931348623157e308,
  -1.7976931348623157e308,
  2 ** 53,
  2 ** 53 + 2,
  2 ** 63,
  2 ** 64,
  2 ** -1074,
  2 ** -1022,
  100,
  1234.5,
  1e100,
  1e-100,
  123e-20,
  4.35,
  0.07967757221330436,
  0.7319358955511462,
  7.8219679422271575,
  21.3575,
  Math.PI,
  Math.E,
  1e300 * 1.7,
];
for (let e = -330; e <= 310; e++) {
  specialFloats.push(Number(`1e${e}`), Number(`9.5e${e}`), Number(`1.2345e${e}`));
}
const finiteSpecials = specialFloats.filter(Number.isFinite);
const floats: number[] = [...finiteSpecials];
for (let i = 0; i < 20000; i++) floats.push(randomDoubleAnyExponent());
for (let i = 0; i < 3000; i++) floats.push(rand() * 10 ** randInt(-8, 20) * (rand() < 0.5 ? -1 : 1));
for (let i = 0; i < 2000; i++) floats.push(Number((rand() * 1000).toFixed(randInt(0, 6)))); // short decimals
for (let i = 0; i < 1000; i++) floats.push(randInt(-(2 ** 31), 2 ** 31) * 2 ** randInt(-40, 40)); // integral/dyadic

// ---------------------------------------------------------------------------------------------
// Random JSON values, described by a tagged tree both sides can rebuild exactly.
type Node =
  | { t: 'n' }
  | { t: 'b'; v: boolean }
  | { t: 'i'; v: string }
  | { t: 'f'; v: string }
  | { t: 's'; v: string }
  | { t: 'l'; v: Node[] }
  | { t: 'd'; v: [string, Node][] };

const charPool = [
  'a',
  'b',
  'Z',
  '0',
  ' ',
  '"',
  '\\',
  '/',
  '\n',
  '\r',
  '\t',
  '\b',
  '\f',
  '\u0000',
  '\u0001',
  '\u001f',
  '\u007f',
  '\u0080',
  'é',
  'ß',
  'ø',
  '\u2028',
  '\u2029',
  '中',
  '文',
  '\ud7ff',
  '\ue000',
  '\uffff',
  '\ufeff',
  '😀',
  '𝄞',
  '\u{10000}',
  '\u{10ffff}',
  '\u{1f600}',
  'ａ',
  'Ω',
  '<',
  '>',
  '&',
  "'",
];
function randomString(maxLen: number): string {
  let s = '';
  const len = randInt(0, maxLen);
  for (let i = 0; i < len; i++) s += pick(charPool);
  return s;
}
function randomNode(depth: number): Node {
  const r = rand();
  if (depth <= 0 || r < 0.45) {
    const k = randInt(0, 6);
    if (k === 0) return { t: 'n' };
    if (k === 1) return { t: 'b', v: rand() < 0.5 };
    if (k === 2) return { t: 'i', v: String(randInt(-1e6, 1e6)) };
    if (k === 3) return { t: 'i', v: (BigInt(randInt(0, 2 ** 30)) * 10n ** BigInt(randInt(0, 25)) * (rand() < 0.5 ? -1n : 1n)).toString() };
    if (k === 4) return { t: 'f', v: bitsOf(rand() < 0.3 ? pick(finiteSpecials) : randomDoubleAnyExponent()) };
    return { t: 's', v: randomString(8) };
  }
  if (r < 0.72) return { t: 'l', v: Array.from({ length: randInt(0, 5) }, () => randomNode(depth - 1)) };
  const keys = new Set<string>();
  const n = randInt(0, 6);
  for (let i = 0; i < n; i++) keys.add(randomString(4));
  return { t: 'd', v: Array.from(keys, (k) => [k, randomNode(depth - 1)] as [string, Node]) };
}

function floatOf(node: { t: 'f'; v: string }): number {
  return fromBits(parseInt(node.v.slice(0, 8), 16), parseInt(node.v.slice(8), 16));
}

// Build the JS value, choosing one of the equivalent TypeScript encodings at random.
function toJs(node: Node): unknown {
  switch (node.t) {
    case 'n':
      return null;
    case 'b':
      return node.v;
    case 'i': {
      const b = BigInt(node.v);
      return Number.isSafeInteger(Number(b)) && rand() < 0.5 ? Number(b) : b;
    }
    case 'f': {
      const x = floatOf(node);
      // A plain non-integer number is a float; integral floats need the marker.
      return !Number.isInteger(x) && rand() < 0.5 ? x : pyFloat(x);
    }
    case 's':
      return node.v;
    case 'l': {
      const items = node.v;
      if (items.length > 0 && items.every((c) => c.t === 'f') && rand() < 0.5) {
        return Float64Array.from(items, (c) => floatOf(c as { t: 'f'; v: string }));
      }
      if (items.length > 0 && items.every((c) => c.t === 'i' && Math.abs(Number(c.v)) < 2 ** 31) && rand() < 0.5) {
        return Int32Array.from(items, (c) => Number((c as { v: string }).v));
      }
      if (items.length > 0 && items.every((c) => c.t === 'i' && BigInt.asIntN(64, BigInt(c.v)) === BigInt(c.v)) && rand() < 0.5) {
        return BigInt64Array.from(items, (c) => BigInt((c as { v: string }).v));
      }
      return items.map(toJs);
    }
    case 'd': {
      if (rand() < 0.3) return new Map(node.v.map(([k, c]) => [k, toJs(c)]));
      const o: Record<string, unknown> = {};
      for (const [k, c] of node.v) o[k] = toJs(c);
      return o;
    }
  }
}

const trees: Node[] = [];
for (let i = 0; i < 400; i++) trees.push(randomNode(4));
// Explicit cases: float arrays containing integral values, nested non-ASCII / astral keys.
trees.push({ t: 'l', v: [1, 2, 0, -0, 1e16, 1e-5, 0.1].map((x) => ({ t: 'f', v: bitsOf(x) }) as Node) });
trees.push({
  t: 'd',
  v: ['\uffff', '\u{10000}', '\ue000', '\ud7ff', 'a', 'A', 'é', '', '😀', '\u{1f600}x', 'ｚ', '中'].map(
    (k, i) =>
      [
        k,
        {
          t: 'd',
          v: [
            [`${k}${k}`, { t: 'i', v: String(i) }],
            ['\u0001\n', { t: 's', v: `v\u001f${k}` }],
          ],
        },
      ] as [string, Node],
  ),
});

const strings = ['', 'abc', 'héllo wörld', '😀 astral', '\u0000\u0001\n', 'x'.repeat(1000)];
const byteArrays = [new Uint8Array(0), new Uint8Array([0, 1, 2, 255]), Uint8Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)];

// ---------------------------------------------------------------------------------------------
// One Python process for the whole file.
const PY_SCRIPT = `
import hashlib, json, struct, sys
from workflows.hashing import canonical_json as dumps, digest
req = json.load(sys.stdin)
def f(h): return struct.unpack('>d', bytes.fromhex(h))[0]
def build(n):
    t = n['t']
    if t == 'n': return None
    if t == 'b': return n['v']
    if t == 'i': return int(n['v'])
    if t == 'f': return f(n['v'])
    if t == 's': return n['v']
    if t == 'l': return [build(c) for c in n['v']]
    if t == 'd': return {k: build(c) for k, c in n['v']}
out = {
  'reprs': [repr(f(h)) for h in req['floats']],
  'trees': [[dumps(build(n)), digest(build(n))] for n in req['trees']],
  'strings': [hashlib.sha256(s.encode('utf-8')).hexdigest() for s in req['strings']],
  'bytes': [digest(bytes.fromhex(h)) for h in req['bytes']],
  'halves': digest([0.5] * 102),
  'halves_json': dumps([0.5] * 102),
  'sorted_keys': sorted(req['keys']),
}
sys.stdout.write(json.dumps(out, ensure_ascii=True))
`;

interface PyOut {
  reprs: string[];
  trees: [string, string][];
  strings: string[];
  bytes: string[];
  halves: string;
  halves_json: string;
  sorted_keys: string[];
}

const sortKeys: string[] = [];
for (let i = 0; i < 300; i++) sortKeys.push(randomString(3));

let py: PyOut;
beforeAll(async () => {
  const input = JSON.stringify({
    floats: floats.map(bitsOf),
    trees,
    strings,
    bytes: byteArrays.map((b) => Buffer.from(b).toString('hex')),
    keys: sortKeys,
  });
  const { stdout } = await startPython(SETTINGS, ['-c', PY_SCRIPT], { input });
  py = JSON.parse(String(stdout)) as PyOut;
}, 60_000);

// ---------------------------------------------------------------------------------------------
describe('pythonFloatRepr', () => {
  it(`matches repr(float) on ${floats.length} doubles (all exponent ranges, subnormals)`, () => {
    const mismatches: string[] = [];
    floats.forEach((x, i) => {
      const got = pythonFloatRepr(x);
      if (got !== py.reprs[i]) mismatches.push(`${bitsOf(x)}: ts ${got} py ${py.reprs[i]}`);
    });
    expect(mismatches.slice(0, 10)).toEqual([]);
  });

  it('formats the documented corner cases', () => {
    expect(pythonFloatRepr(1)).toBe('1.0');
    expect(pythonFloatRepr(-0)).toBe('-0.0');
    expect(pythonFloatRepr(0)).toBe('0.0');
    expect(pythonFloatRepr(1e-5)).toBe('1e-05');
    expect(pythonFloatRepr(1e-4)).toBe('0.0001');
    expect(pythonFloatRepr(1e16)).toBe('1e+16');
    expect(pythonFloatRepr(1e15)).toBe('1000000000000000.0');
    expect(pythonFloatRepr(1.5e300)).toBe('1.5e+300');
    expect(pythonFloatRepr(5e-324)).toBe('5e-324');
    expect(pythonFloatRepr(0.1)).toBe('0.1');
    expect(pythonFloatRepr(123.456)).toBe('123.456');
  });

  it('rejects NaN and infinities', () => {
    expect(() => pythonFloatRepr(NaN)).toThrow();
    expect(() => pythonFloatRepr(Infinity)).toThrow();
    expect(() => pythonFloatRepr(-Infinity)).toThrow();
  });
});

describe('canonicalJson / digest', () => {
  it(`matches json.dumps and the Python digest on ${trees.length} random nested values`, () => {
    const mismatches: string[] = [];
    trees.forEach((tree, i) => {
      const value = toJs(tree);
      const [pyText, pyDigest] = py.trees[i]!;
      const text = canonicalJson(value);
      if (text !== pyText) mismatches.push(`#${i} text: ts ${text}\n py ${pyText}`);
      else if (digest(value) !== pyDigest) mismatches.push(`#${i} digest`);
    });
    expect(mismatches.slice(0, 5)).toEqual([]);
  });

  it('sorts keys by code point like Python', () => {
    const sorted = [...sortKeys].sort(compareCodePoints);
    expect(sorted).toEqual(py.sorted_keys);
    // UTF-16 order would put the astral key first.
    expect(canonicalJson({ '\u{10000}': 1, '\uffff': 2 })).toBe('{"\uffff":2,"\u{10000}":1}');
  });

  it('escapes like Python json with ensure_ascii=False', () => {
    expect(canonicalJson('"\\\n\r\t\b\f\u0000\u001f\u007fé😀\u2028')).toBe('"\\"\\\\\\n\\r\\t\\b\\f\\u0000\\u001f\u007fé😀\u2028"');
  });

  it('writes the int/float rule', () => {
    expect(canonicalJson([1, 1.5, -0, pyFloat(1), pyFloat(-0), 10n ** 20n, 1e21])).toBe(
      '[1,1.5,0,1.0,-0.0,100000000000000000000,1000000000000000000000]',
    );
    expect(canonicalJson(new Float64Array([1, 0.5, 1e16]))).toBe('[1.0,0.5,1e+16]');
    expect(canonicalJson(new Int32Array([1, -2]))).toBe('[1,-2]');
    expect(canonicalJson(new BigInt64Array([-(2n ** 63n), 2n ** 63n - 1n]))).toBe('[-9223372036854775808,9223372036854775807]');
    expect(canonicalJson({ b: [true, null], a: new Map([['y', 'z']]) })).toBe('{"a":{"y":"z"},"b":[true,null]}');
  });

  it('rejects values Python could not serialise', () => {
    expect(() => canonicalJson(NaN)).toThrow();
    expect(() => canonicalJson([pyFloat(Infinity)])).toThrow();
    expect(() => canonicalJson(new Float64Array([1, NaN]))).toThrow();
    expect(() => canonicalJson({ a: undefined })).toThrow();
    expect(() => canonicalJson(new Date())).toThrow();
    expect(() => canonicalJson(() => 1)).toThrow();
    const cyc: unknown[] = [];
    cyc.push(cyc);
    expect(() => canonicalJson(cyc)).toThrow(/Circular/);
    expect(() => digest('\ud800')).toThrow(/surrogate/);
    expect(() => sha256Hex('a\udc00')).toThrow(/surrogate/);
  });

  it('digest of 102 Python floats 0.5 equals hashlib over json.dumps([0.5]*102)', () => {
    expect(canonicalJson(new Float64Array(102).fill(0.5))).toBe(py.halves_json);
    expect(digest(new Float64Array(102).fill(0.5))).toBe(py.halves);
    expect(digest(Array.from({ length: 102 }, () => pyFloat(0.5)))).toBe(py.halves);
    expect(digest(Array.from({ length: 102 }, () => 0.5))).toBe(py.halves);
  });

  it('hashes bytes and strings like hashlib', () => {
    byteArrays.forEach((b, i) => {
      expect(digest(b)).toBe(py.bytes[i]);
      expect(digest(Buffer.from(b))).toBe(py.bytes[i]);
      expect(sha256Hex(b)).toBe(py.bytes[i]);
    });
    strings.forEach((s, i) => {
      expect(sha256Hex(s)).toBe(py.strings[i]);
    });
    expect(sha256Hex('')).toMatch(/^[0-9a-f]{64}$/);
  });
});
