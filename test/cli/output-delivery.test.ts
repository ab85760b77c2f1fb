// Output delivered whole through a pipe (bin/wwref.mjs, pipelines/cli/main.ts cliProcess): a command
// that prints more than a pipe holds (64 kB) must not exit before its reader has it all. Node writes to
// a full pipe asynchronously and process.exit dropped what was still queued: `grade --records --shared`
// delivered 170 kB of 666 kB to a reader that read late, exit 0. Here, as real processes:
// - a slow reader (it starts late and sleeps between reads) gets valid, complete JSON 20 times out of 20;
// - a reader that closes stdout at once (EPIPE) or stderr at once: no stack trace, no line about it,
//   exit 141 (128 + SIGPIPE, as a program a SIGPIPE ends), and the other stream still complete;
// - stdout onto a full disk: one line saying the output is incomplete, exit 2.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { BIN, cliProcess } from '../support/cli.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-delivery-'));
const refs = join(dir, 'references');
const records = join(dir, 'records.jsonl');
const RECORDS = 12;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const u6 = (k: number) => 0.1 + 0.01 * ((k * 7) % 11);
const table = Object.fromEntries(Array.from({ length: 64 }, (_, k) => [maskOf(k, 6), 0.3 + 0.001 * k]));
/** Three observations per record: the shared estimators need at least two. */
const observations = (i: number) => [0, 1, 2].map((j) => ({ mask: maskOf((i + 5 * j) % 64, 6), utility: u6((i + 5 * j) % 64) }));
const args = ['grade', '--references', refs, '--records', records, '--shared'];

/** What a file receives (a file is written synchronously: never cut short). */
let whole = '';
beforeAll(async () => {
  writeSurfaceCatalog(refs, [{ condition: 'lone', dimensions: 6, utility: (_z, k) => u6(k) }]);
  const lines = Array.from({ length: RECORDS }, (_, i) =>
    JSON.stringify({ condition: 'lone', observations: observations(i), prediction_table: table }),
  );
  writeFileSync(records, `${lines.join('\n')}\n`);
  const first = await cliProcess(args, ROOT); // also builds dist/ when the sources changed
  expect(first.code, first.stderr).toBe(0);
  const out = join(dir, 'out.json');
  const fd = openSync(out, 'w');
  await new Promise<void>((done, fail) => {
    const child = spawn('node', [BIN, ...args], { cwd: ROOT, stdio: ['ignore', fd, 'ignore'] });
    child.on('error', fail);
    child.on('exit', () => done());
  });
  closeSync(fd);
  whole = readFileSync(out, 'utf8');
  expect(whole.length, 'more than a pipe holds').toBeGreaterThan(2 * 65536);
});

/**
 * A consumer of a pipe that reads slowly: it waits `pause` ms before its first read and between
 * reads (of 16 kB at most), and copies what it read to the file it names.
 */
const READER = `
const fs = require('node:fs');
const [out, pause] = [process.argv[1], Number(process.argv[2])];
const block = Buffer.alloc(16384);
const nap = () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, pause);
const fd = fs.openSync(out, 'w');
nap();
for (let n; (n = fs.readSync(0, block, 0, block.length, null)) > 0; nap()) fs.writeSync(fd, block, 0, n);
`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

const quote = (word: string) => `'${word.replaceAll("'", "'\\''")}'`;
const command = (words: string[]) => ['node', BIN, ...words].map(quote).join(' ');
let runs = 0;

/**
 * \`wwref …args\` in a shell, its stdout (or with \`stream: 'stderr'\`, its stderr) an OS pipe into
 * \`consumer\` (the slow reader, or \`true\`, which closes the pipe at once), the other stream into a file.
 * A shell's pipe, as a user's: Node's own child pipes are socket pairs, which a full one does not show.
 */
function run(consumer: 'slow' | 'closed', stream: 'stdout' | 'stderr' = 'stdout', words = args): Run {
  const k = ++runs;
  const [piped, other, status] = ['piped', 'other', 'status'].map((name) => join(dir, `${name}-${k}`)) as [string, string, string];
  const reader = consumer === 'slow' ? `node -e ${quote(READER)} ${quote(piped)} 20` : 'true';
  const wwref = stream === 'stdout' ? `${command(words)} 2>${quote(other)}` : `(${command(words)} 2>&1 >${quote(other)})`;
  execFileSync('bash', ['-c', `${wwref} | ${reader}; echo \${PIPESTATUS[0]} >${quote(status)}`], { cwd: ROOT, stdio: 'ignore' });
  const read = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8') : '');
  const [out, err] = stream === 'stdout' ? [read(piped), read(other)] : [read(other), read(piped)];
  return { code: Number(read(status)), stdout: out, stderr: err };
}

const noStack = (stderr: string) => {
  expect(stderr).not.toMatch(/\n\s+at |internal error|EPIPE|Unhandled/);
};

describe('output through a pipe', () => {
  it('grade --records --shared into a slow reader: valid, complete JSON 20 times out of 20', () => {
    const outcomes = Array.from({ length: 20 }, () => run('slow'));
    for (const r of outcomes) {
      expect(r.code, r.stderr).toBe(0);
      noStack(r.stderr);
      expect(JSON.parse(r.stdout).scores).toHaveLength(RECORDS);
    }
    expect(outcomes.filter((r) => r.stdout === whole)).toHaveLength(20);
  }, 900_000);

  it('stdout into a reader that is gone (EPIPE): no stack trace, exit 141, stderr complete', () => {
    const r = run('closed');
    expect(r.code, r.stderr).toBe(141);
    noStack(r.stderr);
    expect(r.stderr).toMatch(new RegExp(`^${RECORDS} record\\(s\\) scored, 0 stored score\\(s\\) compared: 0 difference\\(s\\)$`, 'm'));
  });

  it('stderr into a reader that is gone: exit 141, stdout complete', () => {
    const r = run('closed', 'stderr');
    expect(r.code).toBe(141);
    expect(r.stdout).toBe(whole);
  });

  it.skipIf(!existsSync('/dev/full'))('stdout onto a full disk (/dev/full): one line saying so, exit 2', () => {
    const r = spawnSync('bash', ['-c', `${command(['families', '--family', 'regression'])} >/dev/full`], { cwd: ROOT, encoding: 'utf8' });
    const lines = r.stderr
      .trimEnd()
      .split('\n')
      .filter((line) => !line.startsWith('wwref: the build in dist/'));
    expect([r.status, lines]).toEqual([2, ['wwref: cannot write stdout: the disk is full (ENOSPC); the output is incomplete']]);
  });

  it('a command that fails keeps its own status (2) when the reader of its stdout is gone', () => {
    const r = run('closed', 'stdout', ['grade', '--records', join(dir, 'missing.jsonl')]);
    expect(r.code).toBe(2);
    // (the notice of a build that could not be made, while another change is half done, is not the command's)
    const lines = r.stderr
      .trimEnd()
      .split('\n')
      .filter((line) => !line.startsWith('wwref: the build in dist/'));
    expect(lines, r.stderr).toEqual([expect.stringMatching(/^wwref: .*missing\.jsonl/)]);
    noStack(r.stderr);
  });
});
