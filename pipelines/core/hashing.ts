// The canonical digest (docs/records.md), reproduced in TypeScript so that the
// orchestrator can recompute every hash a Python worker reports. The Python side is
// workflows/hashing.py; both are tested against the vectors of contracts/vectors/digest.json:
//   digest(v) = sha256(v)                                      if v is bytes
//             = sha256(json.dumps(v, sort_keys=True, separators=(",", ":"),
//                                 ensure_ascii=False, allow_nan=False).encode("utf-8"))  otherwise
import { createHash } from 'node:crypto';
import { lstatSync } from 'node:fs';
import { insideRoot, regularFileSha256 } from './containment.ts';
import { UserError } from './errors.ts';

/** Lowercase hex SHA-256 of raw bytes, or of the UTF-8 encoding of a (well-formed) string. */
export function sha256Hex(data: Uint8Array | string): string {
  const bytes = typeof data === 'string' ? utf8Strict(data) : data;
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * UTF-8 bytes of a string; throws on a lone surrogate (Python's str.encode('utf-8') raises
 * UnicodeEncodeError there, whereas TextEncoder would silently write U+FFFD).
 */
function utf8Strict(s: string): Uint8Array {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (d >= 0xdc00 && d <= 0xdfff) {
        i++;
        continue;
      }
      throw new Error(`lone surrogate U+${c.toString(16).toUpperCase()} at index ${i} cannot be UTF-8 encoded`);
    }
    if (c >= 0xdc00 && c <= 0xdfff) {
      throw new Error(`lone surrogate U+${c.toString(16).toUpperCase()} at index ${i} cannot be UTF-8 encoded`);
    }
  }
  return new TextEncoder().encode(s);
}

/**
 * Exactly Python's repr(float): the shortest digit string that round-trips (the same digits
 * ECMAScript picks), laid out the Python way:
 *   - positional when the decimal exponent e satisfies -4 <= e < 16, always with a fractional part
 *     ("1.0", "0.0001", "1234567890123456.0");
 *   - otherwise d[.ddd]e±XX with at least two exponent digits ("1e-05", "1e+16", "5e-324");
 *   - "-0.0" for negative zero.
 * NaN and ±Infinity throw (they are not valid in the canonical JSON).
 */
export function pythonFloatRepr(x: number): string {
  if (!Number.isFinite(x)) throw new RangeError(`non-finite float ${x} has no canonical JSON form`);
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  // toExponential() without an argument yields the shortest round-trip digits: "d.ddde±N".
  const m = /^(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(Math.abs(x).toExponential());
  if (m === null) throw new Error(`unexpected toExponential output for ${x}`);
  const digits = m[1]! + (m[2] ?? '');
  const exp = Number(m[3]);
  if (exp < -4 || exp >= 16) {
    const mantissa = digits.length === 1 ? digits : `${digits[0]}.${digits.slice(1)}`;
    const absExp = Math.abs(exp);
    return `${sign}${mantissa}e${exp < 0 ? '-' : '+'}${absExp < 10 ? '0' : ''}${absExp}`;
  }
  if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  const intLen = exp + 1;
  if (digits.length <= intLen) return `${sign}${digits}${'0'.repeat(intLen - digits.length)}.0`;
  return `${sign}${digits.slice(0, intLen)}.${digits.slice(intLen)}`;
}

/** Marks a JS number as a Python float, so canonicalJson writes 1 as "1.0" and -0 as "-0.0". */
export class PyFloat {
  readonly value: number;
  constructor(value: number) {
    this.value = value;
  }
}

/** Shorthand for `new PyFloat(x)`. */
export function pyFloat(x: number): PyFloat {
  return new PyFloat(x);
}

/** Values canonicalJson accepts. */
export type JsonValue =
  | null
  | boolean
  | string
  | number
  | bigint
  | PyFloat
  | Float64Array
  | Float32Array
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint8ClampedArray
  | Uint16Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array
  | readonly JsonValue[]
  | ReadonlyMap<string, JsonValue>
  | { readonly [key: string]: JsonValue };

// Python's json escapes (ensure_ascii=False): the two-character escapes below, every other
// code unit < 0x20 as \u00xx (lowercase hex); everything else, including DEL and non-ASCII,
// is written literally.
const SHORT_ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

function pyJsonString(s: string): string {
  return `"${s.replace(/[\u0000-\u001f"\\]/g, (ch) => SHORT_ESCAPES[ch] ?? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`;
}

/** Compare two strings by Unicode code point (Python str ordering), not by UTF-16 code unit. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(i);
    if (ca === cb) continue;
    // Code-unit order differs from code-point order only when one side is a surrogate
    // (astral code point, >= 0x10000) and the other a BMP unit in 0xE000..0xFFFF.
    const sa = ca >= 0xd800 && ca <= 0xdfff;
    const sb = cb >= 0xd800 && cb <= 0xdfff;
    if (sa && !sb && cb >= 0xe000) return 1;
    if (sb && !sa && ca >= 0xe000) return -1;
    return ca < cb ? -1 : 1;
  }
  return a.length - b.length;
}

function intText(x: number): string {
  // Plain integral numbers are Python ints; BigInt gives the full digits (1e21 -> "1000...0").
  return BigInt(x).toString();
}

/**
 * The JSON text Python writes with json.dumps(v, sort_keys=True, separators=(",", ":"),
 * ensure_ascii=False, allow_nan=False).
 *
 * Number rule (Python keeps int and float apart; JS does not):
 *   - float: a PyFloat (see pyFloat), an element of a Float64Array/Float32Array, or a plain JS
 *     number that is not an integer -> pythonFloatRepr ("1.0", "1e-05", "-0.0");
 *   - int: a bigint, an element of any integer typed array (incl. BigInt64Array), or a plain JS
 *     number that is an integer (so 1 -> "1", -0 -> "0") -> decimal digits.
 *   So an integral float (e.g. 0.0 or 2.0 from numpy tolist()) must be marked with pyFloat or come
 *   from a Float64Array. NaN/±Infinity throw (allow_nan=False).
 * Typed arrays are written as JSON lists (like ndarray.tolist()); note digest() treats a top-level
 * Uint8Array as raw bytes instead. Plain objects and Maps with string keys are dicts, sorted by key
 * in code-point order. undefined, functions, symbols, other class instances and cycles throw.
 */
export function canonicalJson(value: unknown): string {
  const parts: string[] = [];
  const stack = new Set<object>();
  try {
    write(value, parts, stack);
  } catch (error) {
    // a NaN or an Infinity here is a door left open (input is refused where it enters: refuseNonFinite);
    // the internal error at least says where the number sits
    const at = error instanceof RangeError ? nonFinitePath(value) : undefined;
    if (at !== undefined) throw new RangeError(`${(error as RangeError).message} (at ${at})`);
    throw error;
  }
  return parts.join('');
}

/**
 * Where the first number without a JSON form (NaN, ±Infinity) sits in `value`, as `$.key[2].other`
 * (typed float arrays and pyFloat values included), or undefined when there is none.
 */
export function nonFinitePath(value: unknown, at = '$'): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : at;
  if (value instanceof PyFloat) return Number.isFinite(value.value) ? undefined : at;
  if (value instanceof Float64Array || value instanceof Float32Array) {
    const k = value.findIndex((x) => !Number.isFinite(x));
    return k < 0 ? undefined : `${at}[${k}]`;
  }
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return undefined;
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((item, k) => [`[${k}]`, item])
    : (value instanceof Map ? [...value] : Object.entries(value)).map(([key, item]) => [keyPath(String(key)), item]);
  for (const [step, item] of entries) {
    const found = nonFinitePath(item, `${at}${step}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

const keyPath = (key: string): string => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`);

/**
 * The door for JSON that users and agents give: a value holding a number without a JSON form (NaN,
 * ±Infinity, or 1e999 read by JSON.parse as Infinity) is refused in one line naming `what` and where,
 * before it reaches canonicalJson or a digest.
 */
export function refuseNonFinite<T>(value: T, what: string): T {
  const at = nonFinitePath(value);
  if (at !== undefined)
    throw new UserError(`${what} holds a number without a JSON form (NaN, Infinity or beyond float64) at ${at}; refused`);
  return value;
}

function write(v: unknown, out: string[], stack: Set<object>): void {
  switch (typeof v) {
    case 'string':
      out.push(pyJsonString(v));
      return;
    case 'boolean':
      out.push(v ? 'true' : 'false');
      return;
    case 'bigint':
      out.push(v.toString());
      return;
    case 'number':
      if (!Number.isFinite(v)) throw new RangeError(`Out of range float value ${v} is not JSON compliant`);
      out.push(Number.isInteger(v) ? intText(v) : pythonFloatRepr(v));
      return;
    case 'object':
      break;
    default:
      throw new TypeError(`cannot serialise a value of type ${typeof v} to canonical JSON`);
  }
  if (v === null) {
    out.push('null');
    return;
  }
  if (v instanceof PyFloat) {
    out.push(pythonFloatRepr(v.value));
    return;
  }
  if (ArrayBuffer.isView(v)) {
    if (v instanceof Float64Array || v instanceof Float32Array) {
      out.push('[', Array.from(v, pythonFloatRepr).join(','), ']');
    } else if (v instanceof BigInt64Array || v instanceof BigUint64Array) {
      out.push('[', Array.from(v, (x) => x.toString()).join(','), ']');
    } else if (
      v instanceof Int8Array ||
      v instanceof Int16Array ||
      v instanceof Int32Array ||
      v instanceof Uint8Array ||
      v instanceof Uint8ClampedArray ||
      v instanceof Uint16Array ||
      v instanceof Uint32Array
    ) {
      out.push('[', Array.from(v, (x: number) => String(x)).join(','), ']');
    } else {
      throw new TypeError(`cannot serialise ${v.constructor.name} to canonical JSON`);
    }
    return;
  }
  if (stack.has(v)) throw new Error('Circular reference detected');
  stack.add(v);
  if (Array.isArray(v)) {
    out.push('[');
    for (let i = 0; i < v.length; i++) {
      if (i > 0) out.push(',');
      if (!(i in v)) throw new TypeError(`sparse array hole at index ${i}`);
      write(v[i], out, stack);
    }
    out.push(']');
  } else {
    let entries: [string, unknown][];
    if (v instanceof Map) {
      entries = [];
      for (const [k, x] of v as Map<unknown, unknown>) {
        if (typeof k !== 'string') throw new TypeError(`dict keys must be strings, got ${typeof k}`);
        entries.push([k, x]);
      }
    } else {
      const proto: unknown = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) {
        throw new TypeError(`cannot serialise a ${(v as object).constructor?.name ?? 'non-plain'} object to canonical JSON`);
      }
      if (Object.getOwnPropertySymbols(v).length > 0) throw new TypeError('symbol keys are not allowed');
      entries = Object.entries(v);
    }
    entries.sort((a, b) => compareCodePoints(a[0], b[0]));
    out.push('{');
    entries.forEach(([k, x], i) => {
      if (i > 0) out.push(',');
      if (x === undefined) throw new TypeError(`undefined value for key ${JSON.stringify(k)}`);
      out.push(pyJsonString(k), ':');
      write(x, out, stack);
    });
    out.push('}');
  }
  stack.delete(v);
}

/**
 * The canonical digest: sha256 of the bytes if value is a Uint8Array (Python bytes), else sha256 of
 * the UTF-8 of canonicalJson(value). Lowercase hex.
 */
export function digest(value: unknown): string {
  if (value instanceof Uint8Array) return sha256Hex(value);
  return sha256Hex(canonicalJson(value));
}

/** sha256 of a regular file's bytes, streamed; a FIFO, device, folder or link is refused unopened. */
export function fileSha256(path: string, what = 'file'): string {
  return regularFileSha256(path, what);
}

/**
 * Refuses (UserError naming the file, both hashes and `hint`) when a file under `dir` is missing or
 * differs from its expected sha256. The one check behind every "is this the file we recorded?".
 */
export function checkFileHashes(dir: string, expected: Readonly<Record<string, string>>, what: string, hint = ''): void {
  for (const [name, want] of Object.entries(expected)) {
    // the names come from manifests: each must stay inside `dir` and be a regular file
    const path = insideRoot(dir, name, what);
    if (!lstatSync(path, { throwIfNoEntry: false })) throw new UserError(`${what} missing: ${path}${hint ? `; ${hint}` : ''}`);
    const actual = fileSha256(path, what);
    if (actual !== want) throw new UserError(`${what} changed: ${path} (recorded ${want}, file ${actual})${hint ? `; ${hint}` : ''}`);
  }
}
