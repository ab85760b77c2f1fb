// The strict parser's strings: the fast path (the native parser up to the first unescaped quote) gives
// the same values as the escape-by-escape loop, and its refusals still name where the fault is.
import { describe, expect, it } from 'vitest';
import { parseStrictJson } from '../../pipelines/analysis/strict-json.ts';

describe('strict JSON strings', () => {
  it('decodes escapes, escaped quotes and runs of backslashes as JSON.parse does', () => {
    for (const value of [
      '',
      'a"b',
      'a\\',
      '\\\\"',
      '\u0000\u0001\u001f',
      '\ud800 lone',
      'é ☃ 😀',
      '\\"\\"x',
      'x'.repeat(1000) + '\u0000'.repeat(1000),
    ]) {
      const text = JSON.stringify({ k: value, [value]: [value] });
      expect(parseStrictJson(text, 'the text')).toEqual(JSON.parse(text));
    }
    expect(parseStrictJson('"\\u0041\\/\\b\\f\\n\\r\\t"', 'the text')).toBe('A/\b\f\n\r\t');
  });

  it('refuses what RFC 8259 refuses, naming where', () => {
    const refused = (text: string, reason: RegExp) => expect(() => parseStrictJson(text, 'the text')).toThrow(reason);
    refused('{"a": "x\\qy"}', /bad escape \\q \(line 1, column 9\)/);
    refused('{"a": "x\u0001y"}', /unescaped control character in a string \(line 1, column 9\)/);
    refused('{"a": "\\u12g4"}', /bad \\u escape/);
    refused('{"a": "open', /unterminated string/);
    refused('{"\\u0030": 1, "0": 2}', /duplicate key "0"/);
  });
});
