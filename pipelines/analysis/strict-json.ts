// Strict JSON for what an agent or a researcher submits (prediction tables, records, episode state):
// RFC 8259 and nothing more. JSON.parse keeps the last of repeated keys and cannot say so; this parser
// refuses a key repeated in one object, compared after unescaping ("\u0030000" is "0000"), as well as
// NaN, Infinity, hexadecimal or other non-decimal numbers, numbers beyond float64, trailing content
// and nesting deeper than a bound. Every refusal is one line naming the line and column.
import { UserError } from '../core/errors.ts';
import { readRegularFile } from '../core/containment.ts';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const MAX_DEPTH = 64;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
/** Characters a string holds as they are: anything but the quote, the backslash and control characters. */
const PLAIN = /[^"\\\u0000-\u001f]*/y;
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

class Parser {
  private at = 0;

  constructor(
    private readonly text: string,
    private readonly what: string,
  ) {}

  fail(reason: string, at = this.at): never {
    const before = this.text.slice(0, at);
    const line = before.split('\n').length;
    const column = at - before.lastIndexOf('\n');
    throw new UserError(`${this.what} is not strict JSON: ${reason} (line ${line}, column ${column})`);
  }

  private space(): void {
    while (/[ \t\r\n]/.test(this.text[this.at] ?? '')) this.at++;
  }

  document(): Json {
    this.space();
    const value = this.value(0);
    this.space();
    if (this.at < this.text.length) this.fail('unexpected content after the value');
    return value;
  }

  private value(depth: number): Json {
    if (depth > MAX_DEPTH) this.fail(`nesting deeper than ${MAX_DEPTH} levels`);
    const ch = this.text[this.at];
    if (ch === '{') return this.object(depth);
    if (ch === '[') return this.array(depth);
    if (ch === '"') return this.string();
    for (const [word, value] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return value;
      }
    }
    const word = /^[+-]?[A-Za-z]+/.exec(this.text.slice(this.at, this.at + 16))?.[0];
    if (word && /^[+-]?(nan|infinity|inf)$/i.test(word)) this.fail(`${word} is not a JSON number (JSON has no NaN or Infinity)`);
    if (ch === '-' || (ch !== undefined && ch >= '0' && ch <= '9')) return this.number();
    if (ch === undefined) this.fail('unexpected end of input');
    this.fail(`unexpected character ${JSON.stringify(ch)}`);
  }

  private number(): number {
    const start = this.at;
    NUMBER.lastIndex = start;
    const match = NUMBER.exec(this.text);
    if (!match) this.fail('not a decimal number');
    this.at = start + match[0].length;
    if (/[0-9A-Za-z.+-]/.test(this.text[this.at] ?? ''))
      this.fail(`'${this.text.slice(start, this.at + 1)}…' is not a decimal number`, start);
    const value = Number(match[0]);
    if (!Number.isFinite(value)) this.fail(`${match[0]} is beyond the range of a float64`, start);
    return value;
  }

  private string(): string {
    this.at++; // the opening quote
    // fast path: the string up to its first unescaped quote, decoded by the native parser, whose string
    // rules are RFC 8259's as here (a string of many escapes, such as a calculation's NUL bytes, costs
    // ~10x less); a refusal falls through to the loop below, which says where
    let end = this.text.indexOf('"', this.at);
    for (;;) {
      let slashes = 0;
      while (end > 0 && this.text[end - 1 - slashes] === '\\') slashes++;
      if (end < 0 || slashes % 2 === 0) break;
      end = this.text.indexOf('"', end + 1);
    }
    if (end >= 0) {
      try {
        const value = JSON.parse(this.text.slice(this.at - 1, end + 1)) as string;
        this.at = end + 1;
        return value;
      } catch {
        // not a valid string: the loop below names the fault
      }
    }
    let out = '';
    for (;;) {
      // a run of plain characters at once (long strings, such as a calculation's code, stay fast)
      PLAIN.lastIndex = this.at;
      const run = PLAIN.exec(this.text)![0];
      out += run;
      this.at += run.length;
      const ch = this.text[this.at];
      if (ch === undefined) this.fail('unterminated string');
      if (ch === '"') {
        this.at++;
        return out;
      }
      if (ch < ' ') this.fail('unescaped control character in a string');
      const next = this.text[this.at + 1] ?? '';
      if (next === 'u') {
        const hex = this.text.slice(this.at + 2, this.at + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('bad \\u escape');
        out += String.fromCharCode(Number.parseInt(hex, 16));
        this.at += 6;
      } else if (next in ESCAPES) {
        out += ESCAPES[next];
        this.at += 2;
      } else {
        this.fail(`bad escape \\${next}`);
      }
    }
  }

  private array(depth: number): Json[] {
    this.at++;
    const items: Json[] = [];
    this.space();
    if (this.text[this.at] === ']') {
      this.at++;
      return items;
    }
    for (;;) {
      this.space();
      items.push(this.value(depth + 1));
      this.space();
      const ch = this.text[this.at++];
      if (ch === ']') return items;
      if (ch !== ',') this.fail("expected ',' or ']'", this.at - 1);
    }
  }

  private object(depth: number): { [key: string]: Json } {
    this.at++;
    const object: { [key: string]: Json } = {};
    const seen = new Set<string>();
    this.space();
    if (this.text[this.at] === '}') {
      this.at++;
      return object;
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') this.fail('expected a key in double quotes');
      const keyAt = this.at;
      const key = this.string();
      if (seen.has(key)) this.fail(`duplicate key ${JSON.stringify(key)} (written ${this.text.slice(keyAt, this.at)} here)`, keyAt);
      seen.add(key);
      this.space();
      if (this.text[this.at++] !== ':') this.fail("expected ':' after a key", this.at - 1);
      this.space();
      // defineProperty: a key such as "__proto__" is an ordinary key, never the prototype
      Object.defineProperty(object, key, { value: this.value(depth + 1), enumerable: true, writable: true, configurable: true });
      this.space();
      const ch = this.text[this.at++];
      if (ch === '}') return object;
      if (ch !== ',') this.fail("expected ',' or '}'", this.at - 1);
    }
  }
}

/** `text` as strict JSON; `what` names it in the one-line refusal. */
export function parseStrictJson(text: string, what: string): Json {
  return new Parser(text, what).document();
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A regular file of at most `maxBytes` as UTF-8 text (no byte-order mark). */
export function readBoundedText(path: string, what: string, maxBytes: number): string {
  const bytes = readRegularFile(path, what, maxBytes);
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    throw new UserError(`${what} ${path} is not UTF-8 text`);
  }
  return text.startsWith('\uFEFF') ? text.slice(1) : text;
}

/** A regular file of at most `maxBytes` parsed as strict JSON. */
export function readStrictJsonFile(path: string, what: string, maxBytes: number): Json {
  return parseStrictJson(readBoundedText(path, what, maxBytes), `${what} ${path}`);
}

/** A plain JSON object (not an array, not null). */
export function isObject(value: Json | undefined): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
