// The one-writer lock under faults: a takeover guard dated in the future goes stale after a bounded
// wait (no spinning), a stale lock is taken over (one of a zombie writer, one too large to be wwref's without reading it whole), a full disk leaves no private lock file behind,
// and a live holder makes the waiter give up at its deadline with one line.
import { execa } from 'execa';
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { LOCK_FILE, lockFolder } from '../../pipelines/references/lock.ts';
import { BIN, cliInProcess } from '../support/cli.ts';
import { FAIL_WRITE_PRELOAD, failWrite } from '../support/doubles.ts';
import { writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const refs = join(dir, 'references');
writeSurfaceCatalog(refs, [{ condition: 'toy', dimensions: 4, utility: (_z, k) => 0.1 + 0.01 * k }]);
let count = 0;
const episode = async () => {
  const ep = join(dir, `ep${++count}`);
  const r = await cliInProcess(['episode', 'start', '--episode', ep, '--condition', 'toy', '--budget', '2', '--references', refs], ROOT);
  expect(r.code, r.stderr).toBe(0);
  return ep;
};
/** A process id that is not running (the largest possible, far above any live one here). */
const DEAD_PID = 4_194_303;

describe('the folder lock', () => {
  it('a stale lock under a takeover guard dated in the future: taken over after a bounded wait', async () => {
    const ep = await episode();
    writeFileSync(join(ep, LOCK_FILE), JSON.stringify({ pid: DEAD_PID }));
    const guard = join(ep, `${LOCK_FILE}.takeover`);
    writeFileSync(guard, '');
    const tomorrow = new Date(Date.now() + 86_400_000);
    utimesSync(guard, tomorrow, tomorrow);
    const r = await execa('node', [BIN, 'episode', 'status', '--episode', ep], { cwd: ROOT, reject: false, timeout: 90_000 });
    expect([r.exitCode, r.stderr]).toEqual([0, '']);
    expect(JSON.parse(r.stdout).credits_remaining).toBe(2);
    expect(readdirSync(ep).filter((n) => n.startsWith(LOCK_FILE))).toEqual([]);
  }, 120_000);

  it("a lock file of 768 MiB (none of wwref's) is not read whole: stale, taken over, memory unchanged", async () => {
    const ep = await episode();
    writeFileSync(join(ep, LOCK_FILE), '');
    truncateSync(join(ep, LOCK_FILE), 768 << 20); // sparse: no disk used, but 768 MiB to read
    const peak = process.resourceUsage().maxRSS;
    const release = await lockFolder(ep, 5);
    release();
    expect(process.resourceUsage().maxRSS - peak).toBeLessThan(256 << 10); // KiB
    expect(readdirSync(ep).filter((n) => n.startsWith(LOCK_FILE))).toEqual([]);
  });

  it('a lock whose writer is a zombie (killed, not yet reaped by its parent) is stale: taken over at once', async () => {
    const ep = await episode();
    // `sleep 0` ends while its parent, now `sleep 30`, never reaps it: a zombie for 30 s
    const parent = execa('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30']);
    try {
      const zombie = await new Promise<number>((done) =>
        parent.stdout!.once('data', (chunk: Buffer) => done(Number(String(chunk).trim()))),
      );
      const state = async () => readFileSync(`/proc/${zombie}/stat`, 'utf8').split(') ')[1]![0];
      for (let waited = 0; (await state()) !== 'Z' && waited < 50; waited++) await sleep(100);
      expect(await state()).toBe('Z');
      writeFileSync(join(ep, LOCK_FILE), JSON.stringify({ pid: zombie }));
      const release = await lockFolder(ep, 3); // a live holder would make it give up after 3 s
      release();
      expect(readdirSync(ep).filter((n) => n.startsWith(LOCK_FILE))).toEqual([]);
    } finally {
      parent.kill('SIGKILL');
      await parent.catch(() => undefined);
    }
  });

  it('a full disk while the private lock file is written: one line, exit 2, no lock file left', async () => {
    const ep = await episode();
    const r = await execa('node', ['--import', FAIL_WRITE_PRELOAD, BIN, 'episode', 'observe', '--episode', ep, '--masks', '0001'], {
      cwd: ROOT,
      env: failWrite(LOCK_FILE),
      reject: false,
    });
    expect([r.exitCode, r.stderr]).toEqual([2, expect.stringMatching(/^wwref: cannot lock .*: the disk is full \(ENOSPC\)$/)]);
    expect(readdirSync(ep).filter((n) => n.startsWith(LOCK_FILE))).toEqual([]);
    expect(JSON.parse((await cliInProcess(['episode', 'status', '--episode', ep], ROOT)).stdout).credits_remaining).toBe(2);
  });

  it("a live holder: the waiter gives up at its deadline with one line; a killed writer's private file is removed", async () => {
    const folder = join(dir, 'held');
    const release = await lockFolder(folder);
    try {
      writeFileSync(join(folder, `${LOCK_FILE}.${DEAD_PID}.7.tmp`), '{}'); // left by a writer killed before linking
      let error: unknown;
      try {
        await lockFolder(folder, 1);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(UserError);
      expect((error as Error).message).toMatch(/is being written by another wwref process \(pid \d+, lock .*\)/);
    } finally {
      release();
    }
    const again = await lockFolder(folder, 1);
    again();
    expect(readdirSync(folder)).toEqual([]);
  });
});
