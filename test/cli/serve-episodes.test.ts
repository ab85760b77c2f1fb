// `wwref serve --episodes DIR` as a real process, on real episode folders (wine, the committed references):
// - a folder holding an episode whose name is no episode id (non-ASCII, a space, a leading dot) or that is
//   a symbolic link is not served, and said, one line each, naming it and why; the others are served;
// - a FIFO or a symbolic link planted at the name the endpoints file's temporary copy had
//   (`<endpoints>.<pid>.tmp`, predictable: EEXIST was an internal error with a stack trace) changes
//   nothing: the temporary name is unpredictable, the planted files are left as they were.
import { execFileSync, spawn } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { BIN, cliInProcess } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-serve-episodes-'));
const root = join(dir, 'many');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NAMES = ['a', 'b.2', 'épisode', 'with space', '.hidden', '-dash'];
beforeAll(async () => {
  mkdirSync(root);
  for (const name of NAMES) {
    const r = await cliInProcess(['episode', 'start', '--episode', join(root, name), '--condition', 'wine', '--budget', '2'], ROOT);
    expect(r.code, r.stderr).toBe(0);
  }
  symlinkSync(join(root, 'a'), join(root, 'linked'));
  mkdirSync(join(root, 'not-an-episode')); // no events file: not an episode, nothing to say
});

/** Starts `serve --episodes`, calls `planted(pid)` at once, and returns its stderr once it serves (or exits), then stops it. */
async function serve(endpoints: string, planted: (pid: number) => void = () => {}): Promise<{ stderr: string; code: number | null }> {
  const child = spawn('node', [BIN, 'serve', '--episodes', root, '--endpoints', endpoints], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  planted(child.pid!);
  let stderr = '';
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  await new Promise<void>((done) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (/serving \d+ episode/.test(stderr)) done();
    });
    void exited.then(() => done());
  });
  if (child.exitCode === null) child.kill('SIGTERM');
  return { stderr, code: await exited };
}

describe('serve --episodes', () => {
  it('serves the folders whose name is an episode id and names each one it skips, and why, one line each', async () => {
    const endpoints = join(dir, 'endpoints.json');
    const { stderr } = await serve(endpoints);
    expect(stderr).not.toMatch(/internal error|\n\s+at /);
    const skipped = stderr.split('\n').filter((line) => line.startsWith('wwref: skipped '));
    const why = (name: string) => skipped.find((line) => line.startsWith(`wwref: skipped ${JSON.stringify(name)}: `));
    for (const name of ['.hidden', '-dash', 'with space', 'épisode'])
      expect(why(name), name).toMatch(/: not an episode id, .*; rename the folder/);
    expect(why('linked')).toMatch(/: a symbolic link to a folder/);
    expect(skipped).toHaveLength(5);
    expect(stderr).toMatch(/serving 2 episode\(s\)/);
    expect(Object.keys(JSON.parse(readFileSync(endpoints, 'utf8')).episodes)).toEqual(['a', 'b.2']);
    expect(statSync(endpoints).mode & 0o777).toBe(0o600);
  });

  it('a FIFO or a link planted at the temporary name the endpoints file once had changes nothing', async () => {
    const victim = join(dir, 'victim.txt');
    writeFileSync(victim, 'untouched\n');
    for (const kind of ['fifo', 'link'] as const) {
      const endpoints = join(dir, `endpoints-${kind}.json`);
      let planted = '';
      const { stderr, code } = await serve(endpoints, (pid) => {
        planted = `${endpoints}.${pid}.tmp`;
        if (kind === 'fifo') execFileSync('mkfifo', [planted]);
        else symlinkSync(victim, planted);
      });
      expect(stderr, kind).not.toMatch(/internal error|\n\s+at |EEXIST/);
      expect(stderr, kind).toMatch(/serving 2 episode\(s\)/);
      expect(code, kind).not.toBe(1);
      expect(Object.keys(JSON.parse(readFileSync(endpoints, 'utf8')).episodes)).toEqual(['a', 'b.2']);
      const left = lstatSync(planted);
      expect(kind === 'fifo' ? left.isFIFO() : left.isSymbolicLink(), kind).toBe(true);
    }
    expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
  });
});
