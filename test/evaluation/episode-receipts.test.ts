// Receipts that cannot be moved or reordered (issue 40): a receipt placed before its reservation, a
// calculation of one episode copied into another's log, a log `status` refuses, and a whole events log
// copied into another episode's folder. `verify` never says "replayed" of a call in a log the rules
// could not produce; `status` and `score` refuse a log that names another episode. Real sandbox, real
// files, the command line in process.
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { calculate } from '../../pipelines/evaluation/calculations.ts';
import { sandboxAvailable } from '../../pipelines/evaluation/sandbox/isolation.ts';
import { cliInProcess } from '../support/cli.ts';
import { writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-receipts-'));
const refs = join(dir, 'references');
const settings = loadSettings({}, process.env);
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeSurfaceCatalog(refs, [{ condition: 'toy', dimensions: 4, utility: (_z, k) => 0.2 + 0.03 * k }]);

let count = 0;
const run = (args: string[]) => cliInProcess(['episode', ...args], ROOT);
async function start(extra: string[] = []): Promise<string> {
  const ep = join(dir, `ep${++count}`);
  const r = await run([
    'start',
    '--episode',
    ep,
    '--condition',
    'toy',
    '--budget',
    '2',
    '--references',
    refs,
    '--engine',
    'pyodide',
    ...extra,
  ]);
  expect([r.code, r.stderr]).toEqual([0, '']);
  return ep;
}
const lines = (ep: string) => readFileSync(join(ep, 'events.jsonl'), 'utf8').trim().split('\n');
/** Writes the log from its lines, the copy of the state removed (so that only the log speaks). */
function writeLog(ep: string, text: string[]): void {
  writeFileSync(join(ep, 'events.jsonl'), `${text.join('\n')}\n`);
  rmSync(join(ep, 'episode.json'), { force: true });
}
/** A refusal: exit 2, one line matching `pattern`. */
function refused(r: { code: number; stderr: string; stdout: string }, pattern: RegExp): void {
  expect([r.code, r.stdout]).toEqual([2, '']);
  expect(r.stderr).toMatch(pattern);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
}
const reservationAt = (text: string[]) => text.findIndex((l) => JSON.parse(l).action === 'calculate');
const receiptAt = (text: string[]) => text.findIndex((l) => JSON.parse(l).kind === 'calculation');

describe.skipIf(!sandboxAvailable().available)('receipts bound to their place and their episode', () => {
  it('a receipt placed before its reservation: status, score and verify refuse the log (never "replayed")', async () => {
    const ep = await start();
    expect((await calculate(settings, ep, 'print(6 * 7)')).stdout).toBe('42\n');
    const good = lines(ep);
    expect((await run(['verify', '--episode', ep])).code).toBe(0);
    const moved = [...good];
    const [receipt] = moved.splice(receiptAt(moved), 1);
    moved.splice(reservationAt(moved), 0, receipt!);
    writeLog(ep, moved);
    for (const action of ['status', 'score', 'verify'])
      refused(
        await run([action, '--episode', ep]),
        /line 2: a calculation receipt for call 1, which is not a call reserved before it without a receipt/,
      );
  });

  it("a calculation of episode A copied into B's log: status and verify of B refuse it, naming A", async () => {
    const a = await start();
    const b = await start();
    expect((await calculate(settings, a, 'print(1)')).status).toBe('ok');
    const fromA = lines(a).filter((l) => ['calculate', undefined].includes(JSON.parse(l).action));
    expect(fromA.map((l) => JSON.parse(l).kind)).toEqual(['action', 'calculation']);
    writeLog(b, [...lines(b), ...fromA]);
    const idOf = (ep: string) => JSON.parse(lines(ep)[0]!).episode.id as string;
    for (const action of ['status', 'verify'])
      refused(
        await run([action, '--episode', b]),
        new RegExp(`line 2: calculation call 1, reserved by the log of episode ${idOf(a)}, not of this one \\(${idOf(b)}\\)`),
      );
    // the reservation's id rewritten to B's: the evidence still names A (its hash binds it to the receipt)
    const forged = JSON.parse(fromA[0]!);
    forged.episode_id = idOf(b);
    const receipt = JSON.parse(fromA[1]!);
    receipt.episode_id = idOf(b);
    writeLog(b, [...lines(b).slice(0, 1), JSON.stringify(forged), JSON.stringify(receipt)]);
    expect((await run(['status', '--episode', b])).code).toBe(0);
    const verified = await run(['verify', '--episode', b]);
    expect([verified.code, verified.stderr.trim()]).toEqual([
      1,
      `calculation call 1 does not replay: the reserved evidence names episode ${idOf(a)}, not this one (${idOf(b)})`,
    ]);
    // a receipt of A alone answering a call B reserved (its own receipt lost to a kill)
    const own = await start();
    expect((await calculate(settings, own, 'print(1)')).status).toBe('ok');
    const ownLines = lines(own);
    const alien = JSON.parse(fromA[1]!);
    alien.episode_id = idOf(own);
    writeLog(own, [...ownLines.slice(0, receiptAt(ownLines)), JSON.stringify(alien)]);
    const alone = await run(['verify', '--episode', own]);
    expect(alone.code).toBe(1);
    expect(alone.stderr).toMatch(/^calculation call 1 does not replay: evidence sha256 [0-9a-f]{64} is not the receipt's/);
  });

  it('verify reads the log as status does: a log status refuses is refused by verify, not replayed', async () => {
    const ep = await start();
    expect((await calculate(settings, ep, 'print(2)')).status).toBe('ok');
    const text = lines(ep);
    const first = JSON.parse(text[0]!);
    first.budget = 14; // the credits of every line after it no longer follow
    writeLog(ep, [JSON.stringify(first), ...text.slice(1)]);
    for (const action of ['status', 'verify'])
      refused(await run([action, '--episode', ep]), /line 2: credits 2 -> 2, where the actions before it give 14 -> 14/);
    // an anchor's utility rewritten in the start and in the evidence, with its hashes: not the reference's
    const edited = JSON.parse(text[0]!);
    edited.utilities[0] = 0.9;
    const reservation = JSON.parse(text[reservationAt(text)]!);
    const evidence = JSON.parse(reservation.evidence);
    evidence.observations[0].utility = 0.9;
    reservation.evidence = JSON.stringify(evidence);
    reservation.evidence_sha256 = createHash('sha256').update(reservation.evidence).digest('hex');
    const receipt = JSON.parse(text[receiptAt(text)]!);
    receipt.receipt.evidenceSha256 = reservation.evidence_sha256;
    writeLog(ep, [JSON.stringify(edited), JSON.stringify(reservation), JSON.stringify(receipt)]);
    for (const action of ['status', 'verify'])
      refused(await run([action, '--episode', ep]), /the rules could not produce: the observed utility of 0000 is not the reference's/);
  });

  it('verify re-runs a call only with the limits the episode fixed: limits or an engine edited in a receipt are named, never run', async () => {
    const ep = await start(['--call-seconds', '3']);
    expect((await calculate(settings, ep, 'while True: pass')).status).toBe('timed_out');
    const good = lines(ep);
    const edit = (change: (reservation: any, receipt: any) => void) => {
      const reservation = JSON.parse(good[reservationAt(good)]!);
      const receipt = JSON.parse(good[receiptAt(good)]!);
      change(reservation, receipt);
      writeLog(ep, [good[0]!, JSON.stringify(reservation), JSON.stringify(receipt)]);
    };
    const cases: [(reservation: any, receipt: any) => void, RegExp][] = [
      [
        (_r, e) => (e.receipt.limits.cpuSeconds = 600),
        /the receipt's limits \(.*"cpuSeconds":600.*\) are not those its call was reserved with/,
      ],
      [
        (r, e) => {
          r.limits.wallSeconds = 900;
          e.receipt.limits.wallSeconds = 900;
        },
        /the reserved limits \(.*"wallSeconds":900.*\) are not the episode's \(30 CPU seconds, at most 3 wall seconds\)/,
      ],
      [(_r, e) => (e.receipt.engine = 'native'), /the receipt names the native engine, the episode's is pyodide/],
    ];
    for (const [change, pattern] of cases) {
      edit(change);
      const begun = Date.now();
      const verified = await run(['verify', '--episode', ep]);
      expect(Date.now() - begun).toBeLessThan(10_000); // named, not re-run for its edited limits (30 CPU seconds)
      expect(verified.code).toBe(1);
      expect(verified.stderr).toMatch(new RegExp(`^calculation call 1 does not replay: ${pattern.source}`));
    }
  });

  it("an events log copied into another episode's folder, or a folder renamed: status and score refuse it, naming both", async () => {
    const a = await start();
    const b = await start();
    expect((await run(['observe', '--episode', a, '--masks', '0110'])).code).toBe(0);
    expect((await run(['end', '--episode', a, '--reason', 'test'])).code).toBe(0);
    copyFileSync(join(a, 'events.jsonl'), join(b, 'events.jsonl'));
    copyFileSync(join(a, 'episode.json'), join(b, 'episode.json'));
    const fresh = join(dir, 'fresh');
    mkdirSync(fresh);
    copyFileSync(join(a, 'events.jsonl'), join(fresh, 'events.jsonl'));
    const nameA = a.split('/').at(-1);
    for (const [ep, name] of [
      [b, b.split('/').at(-1)],
      [fresh, 'fresh'],
    ] as const)
      for (const action of ['status', 'score'])
        refused(
          await run([action, '--episode', ep, ...(action === 'score' ? ['--no-shared'] : [])]),
          new RegExp(`line 1: the log of episode '${nameA}' \\(started in a folder of that name\\), not of this folder '${name}'`),
        );
    // the folder itself renamed: refused the same way; given back its name, it is read again
    const renamed = join(dir, 'renamed');
    renameSync(a, renamed);
    refused(await run(['status', '--episode', renamed]), /not of this folder 'renamed': .*give it back its name/);
    renameSync(renamed, a);
    expect((await run(['score', '--episode', a, '--no-shared'])).code).toBe(0);
  });

  it('an episode started before episodes had ids is read as it is (no checks to make), its copy of the state rewritten', async () => {
    const ep = await start();
    expect((await run(['observe', '--episode', ep, '--masks', '0110'])).code).toBe(0);
    const text = lines(ep).map((l) => JSON.parse(l));
    delete text[0].episode;
    writeLog(
      ep,
      text.map((e) => JSON.stringify(e)),
    );
    const state = JSON.parse(readFileSync(join(ep, 'events.jsonl'), 'utf8').split('\n')[0]!);
    expect(state.episode).toBeUndefined();
    const status = await run(['status', '--episode', ep]);
    expect([status.code, status.stderr]).toEqual([0, '']);
    expect(JSON.parse(status.stdout).credits_remaining).toBe(1);
    expect(JSON.parse(readFileSync(join(ep, 'episode.json'), 'utf8'))).toMatchObject({ episode_version: 4, episode: null });
  });
});
