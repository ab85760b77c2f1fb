// The orchestrator's side of the wire format (workflows/protocol.py): responses cut into arbitrary
// chunks come out whole and in order, each attachment in an ArrayBuffer of its own, and the arrays
// decoded from it are views where aligned and copies where not, equal to what the worker encoded.
import { describe, expect, it } from 'vitest';
import { ResponseFramer } from '../../pipelines/execution/python-worker.ts';
import { decodeArray } from '../../pipelines/execution/verification/verify.ts';

/** A deterministic byte source (a linear congruential generator). */
function bytesOf(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

function response(id: number, attachment: Uint8Array): Buffer {
  const line = `${JSON.stringify({ id, ok: true, attachment: attachment.length, result: {} })}\n`;
  return Buffer.concat([Buffer.from(line), attachment]);
}

describe('response framing', () => {
  const attachments = [0, 1, 7, 65_536, 300_001, 524_288].map((n, i) => bytesOf(n, i + 1));
  const stream = Buffer.concat(attachments.map((a, i) => response(i, a)));

  for (const [name, cut] of [
    ['whole', () => stream.length],
    ['one byte at a time (first 5,000 bytes), then whole', (at: number) => (at < 5_000 ? 1 : stream.length)],
    ['64 KiB reads', () => 65_536],
    ['irregular reads', (at: number) => 1 + ((at * 7919) % 90_001)],
  ] as const)
    it(`gives every response whole and in order: ${name}`, () => {
      const got: { id: number; attachment: Uint8Array }[] = [];
      const framer = new ResponseFramer((json, attachment) => got.push({ id: (json as { id: number }).id, attachment }));
      for (let at = 0; at < stream.length; ) {
        const size = Math.min(cut(at), stream.length - at);
        framer.push(stream.subarray(at, at + size));
        at += size;
      }
      expect(got.map((r) => r.id)).toEqual(attachments.map((_, i) => i));
      for (const [i, r] of got.entries()) {
        expect(Buffer.from(r.attachment).equals(Buffer.from(attachments[i]!))).toBe(true);
        expect(r.attachment.byteOffset).toBe(0); // its own buffer: arrays at aligned offsets decode as views
        expect(r.attachment.buffer.byteLength).toBe(r.attachment.length);
      }
    });

  it('decodes arrays as views where aligned and as copies where not, with the same values', () => {
    const doubles = new Float64Array([1.5, -2.25, Math.PI, 1e-300]);
    const attachment = new Uint8Array(3 + doubles.byteLength * 2);
    attachment.set(new Uint8Array(doubles.buffer), 0);
    attachment.set(new Uint8Array(doubles.buffer), 3 + doubles.byteLength);
    const at = (offset: number) => ({
      ndarray: { dtype: '<f8', shape: [4], bytes: attachment.subarray(offset, offset + doubles.byteLength) },
    });
    const aligned = decodeArray(at(0));
    const misaligned = decodeArray(at(3 + doubles.byteLength));
    expect([...aligned.values]).toEqual([...doubles]);
    expect([...misaligned.values]).toEqual([...doubles]);
    expect(aligned.values.buffer).toBe(attachment.buffer);
    expect(misaligned.values.buffer).not.toBe(attachment.buffer);
    expect(() => decodeArray({ ndarray: { dtype: '<f8', shape: [1], bytes: attachment.subarray(0, 5) } })).toThrow(/whole number/);
  });
});
