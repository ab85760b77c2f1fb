// What `wwref new-source` lets the raw-file inspection read of a file given by path: the inspection
// (workflows/prepare/inspect.py) describes a table from its first DESCRIBE_ROWS rows but reads the
// file whole, so a huge file, a gzip bomb or one endless line would take unbounded time and memory.
// It is given instead a sample written here: the file's first SAMPLE_LINES complete lines (those
// rows, so the description is the same), at most SAMPLE_BYTES, no line longer than LINE_BYTES, and
// gzip-compressed again when the file was. The sha256 and size are the whole file's, streamed here.
// A spreadsheet (read whole, not by lines) larger than SAMPLE_BYTES is not described; files inside
// the pinned packages are the runtime's own and are read as they are.
import { closeSync, createReadStream, mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { constants as zlib, createGunzip, gzipSync } from 'node:zlib';
import { hashDescriptor, isInside, openRegularFile } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';

/** The inspection describes a table from its first 5,000 rows (DESCRIBE_ROWS of inspect.py), a header row besides. */
export const SAMPLE_LINES = 5001;
/** The most text a sample holds. */
export const SAMPLE_BYTES = 8 << 20;
/** A longer line is no table row: the sample stops before it. */
export const LINE_BYTES = 64 << 10;

export interface RawSample {
  /** What the inspection reads: the sample, or the file itself. */
  path: string;
  /** The file as given (absolute). */
  file: string;
  sha256: string;
  bytes: number;
  /** Why the contents are not described, when the sample is empty (the inspection then describes nothing). */
  undescribed?: string;
  /** What the sample leaves out, when that may change the description. */
  note?: string;
}

/**
 * The file's first bytes, decompressed when it is gzip: read until SAMPLE_LINES lines, a line longer
 * than LINE_BYTES or more than SAMPLE_BYTES bytes are in, or the end; `ended` when the end was reached.
 */
async function leadingText(path: string, gzip: boolean): Promise<{ text: Buffer; ended: boolean }> {
  const stream = createReadStream(path, { highWaterMark: 1 << 16 });
  const source = gzip ? stream.pipe(createGunzip({ finishFlush: zlib.Z_SYNC_FLUSH })) : stream;
  const chunks: Buffer[] = [];
  let size = 0;
  let lines = 0;
  let line = 0; // bytes of the line not yet ended
  let ended = true;
  try {
    reading: for await (const chunk of source as AsyncIterable<Buffer>) {
      chunks.push(chunk);
      size += chunk.length;
      for (let at = 0; ; ) {
        const newline = chunk.indexOf(10, at);
        if (newline === -1) {
          line += chunk.length - at;
          break;
        }
        line += newline - at;
        if (line > LINE_BYTES || ++lines >= SAMPLE_LINES) {
          ended = false;
          break reading;
        }
        line = 0;
        at = newline + 1;
      }
      if (size > SAMPLE_BYTES || line > LINE_BYTES) {
        ended = false;
        break;
      }
    }
  } finally {
    stream.destroy();
    source.destroy();
  }
  return { text: Buffer.concat(chunks), ended };
}

/** Where the sample of `text` ends (after its last whole line), how many lines it holds, and whether a line too long stopped it. */
function cut(text: Buffer, ended: boolean): { end: number; lines: number; longLine: boolean } {
  let end = 0;
  let lines = 0;
  while (lines < SAMPLE_LINES && end < text.length) {
    const newline = text.indexOf(10, end);
    // the last line of a file read to its end counts without a newline
    const stop = newline !== -1 ? newline + 1 : ended ? text.length : -1;
    if (stop === -1) return { end, lines, longLine: text.length - end > LINE_BYTES };
    if (stop - end - (newline !== -1 ? 1 : 0) > LINE_BYTES) return { end, lines, longLine: true };
    if (stop > SAMPLE_BYTES) break;
    end = stop;
    lines++;
  }
  return { end, lines, longLine: false };
}

/**
 * The bounded sample of the raw file `given` for the inspection, written under `folder` (a private
 * temporary folder; one subfolder a file, `index`, so that the sample keeps the file's name).
 * Refused unopened when it is no regular file (a FIFO, a device, a folder).
 */
export async function sampleRawFile(given: string, folder: string, index: number, packages: string | undefined): Promise<RawSample> {
  const file = resolve(given);
  let real: string;
  try {
    real = realpathSync(file);
  } catch (error) {
    throw new UserError(`raw file ${given} cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const { fd } = openRegularFile(real, 'raw file');
  let magic = Buffer.alloc(0);
  let whole: { sha256: string; bytes: number };
  try {
    whole = hashDescriptor(fd, (block) => {
      if (magic.length < 2) magic = Buffer.concat([magic, block.subarray(0, 2)]).subarray(0, 2);
    });
  } finally {
    closeSync(fd);
  }
  const measured = { file, sha256: whole.sha256, bytes: whole.bytes };
  if (packages && isInside(real, packages)) return { path: file, ...measured };
  mkdirSync(join(folder, String(index)));
  const sample = join(folder, String(index), basename(file));
  if (/\.xlsx?$/i.test(file)) {
    if (whole.bytes <= SAMPLE_BYTES) return { path: file, ...measured };
    writeFileSync(sample, '');
    return { path: sample, ...measured, undescribed: `a spreadsheet of more than ${SAMPLE_BYTES} bytes: its contents are not described` };
  }
  const gzip = magic[0] === 0x1f && magic[1] === 0x8b;
  let leading: { text: Buffer; ended: boolean };
  try {
    leading = await leadingText(real, gzip);
  } catch (error) {
    writeFileSync(sample, '');
    return { path: sample, ...measured, undescribed: `it cannot be decompressed (${(error as Error).message})` };
  }
  const { end, lines, longLine } = cut(leading.text, leading.ended);
  const kept = leading.text.subarray(0, end);
  writeFileSync(sample, gzip ? gzipSync(kept, { level: 1 }) : kept);
  if (longLine && lines === 0)
    return { path: sample, ...measured, undescribed: `its first line is longer than ${LINE_BYTES} bytes: not read as a table` };
  if (longLine)
    return {
      path: sample,
      ...measured,
      note: `line ${lines + 1} is longer than ${LINE_BYTES} bytes: described from the ${lines} line(s) before it`,
    };
  return { path: sample, ...measured };
}
