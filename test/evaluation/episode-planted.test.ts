// Files an agent plants in its own episode's folder (issue 40): a FIFO or a symbolic link at the copy of
// the state (`episode.json`), at the folder's lock, or at the events log. Nothing may block on them or
// follow them: every action answers at once with one line (CLI: exit 2; served: a tool error), nothing
// is written through a link, and `episodeClosed` (what a cohort polls while its agent runs) never waits.
// A link in place of an episode's folder (the next one of a cohort, or a finished one) is never followed.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { episodeClosed, readEpisode, startEpisode } from '../../pipelines/evaluation/episode.ts';
import { BIN, cliInProcess } from '../support/cli.ts';
import { writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-planted-'));
const refs = join(dir, 'references');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeSurfaceCatalog(refs, [{ condition: 'toy', dimensions: 4, utility: (_z, k) => 0.2 + 0.03 * k }]);

let count = 0;
const run = (args: string[]) => cliInProcess(['episode', ...args], ROOT);
async function start(): Promise<string> {
  const ep = join(dir, `ep${++count}`);
  const r = await run(['start', '--episode', ep, '--condition', 'toy', '--budget', '2', '--references', refs]);
  expect([r.code, r.stderr]).toEqual([0, '']);
  return ep;
}
const mkfifo = (path: string) => execFileSync('mkfifo', [path]);
/** Runs `body`, failing if it takes longer than `seconds` (a blocked open never returns: the test's own timeout then says so). */
async function quickly<T>(seconds: number, body: () => Promise<T>): Promise<T> {
  const begun = Date.now();
  const result = await body();
  expect((Date.now() - begun) / 1000).toBeLessThan(seconds);
  return result;
}
function oneLine(r: { code: number; stderr: string }, pattern: RegExp): void {
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(pattern);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
}

describe('files planted in an episode folder', () => {
  it('a FIFO at episode.json: status, observe, end and score answer at once in one line; the cohort poll says not closed', async () => {
    const ep = await start();
    rmSync(join(ep, 'episode.json'));
    mkfifo(join(ep, 'episode.json'));
    for (const args of [['status'], ['observe', '--masks', '0110'], ['end', '--reason', 'gone'], ['score', '--no-shared']])
      oneLine(
        await quickly(10, () => run([args[0]!, '--episode', ep, ...args.slice(1)])),
        /episode state .*episode\.json is a FIFO, not a regular file; refused/,
      );
    expect(await quickly(2, async () => episodeClosed(ep))).toBe(false);
    // removed, the copy is written again from the log, which holds no purchase
    rmSync(join(ep, 'episode.json'));
    const status = await run(['status', '--episode', ep]);
    expect([status.code, JSON.parse(status.stdout).credits_remaining]).toEqual([0, 2]);
  });

  it('a symbolic link at episode.json, to a copy that says closed: not followed (refused), the file it names left alone', async () => {
    const ep = await start();
    const elsewhere = join(dir, 'elsewhere.json');
    const copy = JSON.parse(readFileSync(join(ep, 'episode.json'), 'utf8'));
    writeFileSync(elsewhere, JSON.stringify({ ...copy, closed: true }));
    rmSync(join(ep, 'episode.json'));
    symlinkSync(elsewhere, join(ep, 'episode.json'));
    oneLine(
      await quickly(10, () => run(['status', '--episode', ep])),
      /episode state .*episode\.json is a symbolic link, not a regular file; refused/,
    );
    expect(episodeClosed(ep)).toBe(false);
    expect(JSON.parse(readFileSync(elsewhere, 'utf8')).closed).toBe(true);
  });

  it("a link planted where the next episode's folder goes, or in place of a finished one: never written or read through", async () => {
    const target = join(dir, 'target');
    mkdirSync(target);
    const next = join(dir, `ep${++count}`);
    symlinkSync(target, next);
    oneLine(
      await run(['start', '--episode', next, '--condition', 'toy', '--budget', '2', '--references', refs]),
      /episode folder .* is a symbolic link; an episode is read and written only in a folder of its own/,
    );
    await expect(startEpisode(loadSettings({}, process.env), { dir: next, condition: 'toy', budget: 2, references: refs })).rejects.toThrow(
      /is a symbolic link/,
    );
    expect(readdirSync(target)).toEqual([]);
    // a finished episode's folder replaced by a link to a copy of it: every read refuses it
    const ep = await start();
    expect((await run(['end', '--episode', ep, '--reason', 'done'])).code).toBe(0);
    const copy = join(dir, 'copy');
    cpSync(ep, copy, { recursive: true });
    rmSync(ep, { recursive: true });
    symlinkSync(copy, ep);
    for (const action of ['status', 'score', 'verify']) oneLine(await run([action, '--episode', ep]), /is a symbolic link/);
    expect(() => readEpisode(ep)).toThrow(/is a symbolic link/);
  });

  it('a FIFO at the lock or at the events log: refused at once in one line, served or not', async () => {
    const ep = await start();
    mkfifo(join(ep, '.wwref.lock'));
    oneLine(await quickly(10, () => run(['status', '--episode', ep])), /the lock .*\.wwref\.lock is not a regular file/);
    rmSync(join(ep, '.wwref.lock'));
    const other = await start();
    rmSync(join(other, 'events.jsonl'));
    mkfifo(join(other, 'events.jsonl'));
    oneLine(await quickly(10, () => run(['score', '--episode', other])), /events log .* is not a regular file/);
    expect(episodeClosed(other)).toBe(false);
    // served over stdio: the FIFO at the copy of the state makes each tool a one-line error, and the server goes on
    mkfifo(join(ep, 'episode.json.planted'));
    rmSync(join(ep, 'episode.json'));
    mkfifo(join(ep, 'episode.json'));
    const client = new Client({ name: 'planted', version: '1.0.0' });
    await client.connect(new StdioClientTransport({ command: 'node', args: [BIN, 'serve', '--episode', ep], cwd: ROOT, stderr: 'pipe' }));
    try {
      for (const name of ['status', 'observe']) {
        const answer = (await quickly(10, () => client.callTool({ name, arguments: name === 'observe' ? { masks: ['0110'] } : {} }))) as {
          isError?: boolean;
          content: { text: string }[];
        };
        expect(answer.isError).toBe(true);
        expect(answer.content[0]!.text).toMatch(/^episode state <host folder>\/episode\.json is a FIFO, not a regular file; refused$/);
      }
    } finally {
      await client.close();
    }
    expect(existsSync(join(ep, 'episode.json.planted'))).toBe(true);
  });
});
