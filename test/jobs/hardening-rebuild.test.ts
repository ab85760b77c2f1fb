// Hardening of the reference store under `wwref rebuild` (pipelines/references/commit.ts), through the
// real command line with real workers:
// - concurrent rebuilds of different conditions into one folder: every run succeeds and afterwards the
//   manifest names every condition with the sha256 of its table (no lost update), round after round;
// - a second writer waits for the folder's lock (and gives up with a clear message), a dead writer's
//   lock is replaced;
// - a full disk while the manifest is written: exit 2 with one line, the good table and manifest are
//   byte-identical, nothing half-written is left, and the next run resumes from the journal;
// - a worker killed in the middle of a record: exit 1, the failure is reported, the good table and
//   manifest are byte-identical, and the next run resumes the finished records.
// Every file is under a temporary root; the committed folders are checked unchanged.
import { readReferenceManifest, readReferenceTable, writeReferenceManifest, writeReferenceTable } from '../support/raw-references.ts';
import { execa, type Result, type ResultPromise } from 'execa';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { useGuardedWorkspace } from '../sources/hardening-support.ts';
import { exitOnMask, FAIL_WRITE_PRELOAD, failWrite } from '../support/doubles.ts';

const BIN = join(ROOT, 'bin', 'wwref.mjs');
/** Cheap 16-mask conditions of four different sources (wine and seeds are the reproduction). */
const CONCURRENT = ['wine', 'seeds', 'nile', 'yacht'];

const workspace = useGuardedWorkspace();

function wwref(args: string[], env: Record<string, string> = {}): ResultPromise<{ reject: false }> {
  // the preload is a test double that does nothing unless TEST_FAIL_WRITE names a file
  return execa('node', ['--import', FAIL_WRITE_PRELOAD, BIN, ...args], { cwd: workspace().root, env, reject: false });
}

const rebuildArgs = (refs: string, condition: string, ...extra: string[]) => [
  'rebuild',
  '--condition',
  condition,
  '--workers',
  '1',
  '--references',
  refs,
  ...extra,
];

/** The lines of stderr that are wwref's own messages (progress and preparation lines aside). */
const messages = (result: Result): string[] =>
  String(result.stderr)
    .split('\n')
    .filter((l) => l.startsWith('wwref:'));

function noStack(result: Result): void {
  expect(String(result.stderr)).not.toMatch(/\n\s+at /);
  expect(String(result.stderr)).not.toMatch(/internal error/);
}

/** Each manifest entry's table exists and has the recorded sha256; returns the hashes by condition. */
function manifestMatchesTables(refs: string): Record<string, string> {
  const manifest = readReferenceManifest(refs)!;
  const hashes: Record<string, string> = {};
  for (const [id, entry] of Object.entries(manifest.conditions)) {
    expect(sha256Hex(readFileSync(join(refs, entry.table))), `${id}: manifest hash of ${entry.table}`).toBe(entry.table_sha256);
    hashes[id] = entry.table_sha256;
  }
  return hashes;
}

/** The folder holds exactly these tables and the manifest: no lock, no .new/.old/.tmp leftovers. */
function onlyTables(refs: string, conditions: string[]): void {
  expect(readdirSync(refs).sort()).toEqual([...conditions.map((c) => `${c}.arrow`), 'manifest.json'].sort());
}

function snapshot(refs: string, condition: string): { table: Buffer; manifest: Buffer } {
  return { table: readFileSync(join(refs, `${condition}.arrow`)), manifest: readFileSync(join(refs, 'manifest.json')) };
}

/**
 * Makes the folder's tables look built by other workflow code (their metadata and the manifest name
 * another digest, re-sealed), so that the next rebuild writes them instead of keeping them.
 */
function asIfOtherCode(refs: string): void {
  const manifest = readReferenceManifest(refs)!;
  manifest.code.workflows_sha256 = 'e'.repeat(64);
  for (const [id, entry] of Object.entries(manifest.conditions)) {
    const file = join(refs, entry.table);
    const { records, metadata } = readReferenceTable(file);
    const context = { ...JSON.parse(metadata.wwref!), workflows_sha256: 'e'.repeat(64) };
    entry.table_sha256 = sha256Hex(writeReferenceTable(file, records, { wwref: JSON.stringify(context) }));
    manifest.conditions[id] = entry;
  }
  writeReferenceManifest(manifest, refs);
}

/** A references folder `folder` (under the workspace) holding one good nile build (as if of other code), and its bytes. */
async function builtNile(folder: string): Promise<{ refs: string; before: { table: Buffer; manifest: Buffer } }> {
  const refs = join(workspace().root, folder);
  const good = await wwref(rebuildArgs(refs, 'nile'));
  expect(good.exitCode, String(good.stderr)).toBe(0);
  asIfOtherCode(refs);
  return { refs, before: snapshot(refs, 'nile') };
}

function unchanged(refs: string, condition: string, before: { table: Buffer; manifest: Buffer }): void {
  const after = snapshot(refs, condition);
  expect(after.table.equals(before.table), `${condition}.arrow must be byte-identical`).toBe(true);
  expect(after.manifest.equals(before.manifest), 'manifest.json must be byte-identical').toBe(true);
}

describe('concurrent rebuilds into one reference folder', () => {
  it(`${CONCURRENT.length} parallel rebuilds of different conditions, 3 rounds: all exit 0 and the manifest matches every table`, async () => {
    const refs = join(workspace().root, 'concurrent');
    let previous: Record<string, string> = {};
    for (let round = 1; round <= 3; round++) {
      if (round > 1) asIfOtherCode(refs); // else the rebuilds reproduce the tables in place and keep them
      const results = await Promise.all(CONCURRENT.map((c) => wwref(rebuildArgs(refs, c))));
      results.forEach((result, i) => {
        expect(result.exitCode, `round ${round}, ${CONCURRENT[i]}: ${result.stderr}`).toBe(0);
        expect(result.stdout).toMatch(new RegExp(`^${CONCURRENT[i]}\\s+16/16 ok`, 'm'));
        noStack(result);
      });
      const manifest = readReferenceManifest(refs)!;
      expect(Object.keys(manifest.conditions).sort(), `round ${round}`).toEqual([...CONCURRENT].sort());
      const hashes = manifestMatchesTables(refs);
      onlyTables(refs, CONCURRENT);
      // every entry is this round's (the metadata names this checkout's code again)
      for (const c of CONCURRENT) if (previous[c]) expect(hashes[c], `round ${round}, ${c} was not updated`).not.toBe(previous[c]);
      previous = hashes;
    }
  });
});

describe("the reference folder's lock", () => {
  it('a rebuild from the command line waits for the lock and commits once it is released', async () => {
    const { refs, before } = await builtNile('waiting');
    const lock = join(refs, '.wwref.lock');
    writeFileSync(lock, JSON.stringify({ pid: process.pid, since: new Date().toISOString(), argv: ['rebuild'] }));
    const child = wwref(rebuildArgs(refs, 'nile', '--fresh'));
    // every record is done (journal complete) well before the lock is released
    const journal = join(workspace().cache, 'journal', 'nile.jsonl');
    const lines = () => (existsSync(journal) ? readFileSync(journal, 'utf8').trim().split('\n').filter(Boolean).length : 0);
    const deadline = Date.now() + 60_000;
    while (lines() < 16 && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(lines(), `journal of the waiting rebuild (exit ${child.exitCode})`).toBe(16);
    await new Promise((r) => setTimeout(r, 1500));
    expect(child.exitCode, 'the rebuild must wait while the lock is held').toBeNull();
    unchanged(refs, 'nile', before);
    rmSync(lock); // the holder is done
    const result = await child;
    expect(result.exitCode, String(result.stderr)).toBe(0);
    expect(readFileSync(join(refs, 'nile.arrow')).equals(before.table)).toBe(false);
    manifestMatchesTables(refs);
    onlyTables(refs, ['nile']);
  });
});

describe('a failed rebuild leaves the good table and manifest byte-identical', () => {
  it('a full disk while the manifest is written: exit 2 with one line; table and manifest as before; the next run resumes', async () => {
    const { refs, before } = await builtNile('disk-full');

    const full = await wwref(rebuildArgs(refs, 'nile', '--fresh'), failWrite('manifest.json'));
    expect(full.exitCode).toBe(2);
    noStack(full);
    expect(messages(full)).toHaveLength(1);
    expect(messages(full)[0]).toMatch(/^wwref: cannot write .*disk-full\/manifest\.json: the disk is full \(ENOSPC\)$/);
    unchanged(refs, 'nile', before);
    onlyTables(refs, ['nile']); // the new table was put back aside and removed, no temporary file left

    const again = await wwref(rebuildArgs(refs, 'nile'));
    expect(again.exitCode, String(again.stderr)).toBe(0);
    expect(again.stdout).toMatch(/16 records in 1 tables \(0 failed, 16 resumed from the journal\)/);
    manifestMatchesTables(refs);
    expect(readFileSync(join(refs, 'nile.arrow')).equals(before.table)).toBe(false); // the fresh records replaced the old table only now
  });

  it('a worker killed in the middle of a record: exit 1, the failure reported, table and manifest as before; the next run resumes', async () => {
    const { refs, before } = await builtNile('killed');

    const killed = await wwref(rebuildArgs(refs, 'nile', '--fresh'), exitOnMask('0011'));
    expect(killed.exitCode, String(killed.stderr)).toBe(1);
    noStack(killed);
    expect(killed.stdout).toMatch(/^nile\s+15\/16 ok/m);
    expect(killed.stdout).toMatch(/FAILED 0011: WorkerCrash/);
    expect(killed.stdout).toMatch(/table and manifest entry left as they were/);
    expect(killed.stdout).toMatch(/16 records in 1 tables \(1 failed/);
    unchanged(refs, 'nile', before);
    onlyTables(refs, ['nile']);

    const again = await wwref(rebuildArgs(refs, 'nile'));
    expect(again.exitCode, String(again.stderr)).toBe(0);
    expect(again.stdout).toMatch(/\(0 failed, 15 resumed from the journal\)/);
    manifestMatchesTables(refs);
  });
});
