// The reference store through the real command line, with real workers:
// - a table edited and re-sealed (its new sha256 written into the manifest) makes replay fail before
//   any record runs, exit 2, with one line naming what is wrong;
// - every reader (replay, export, grade, diff, effects, report, audit) refuses a table that is a link
//   to /dev/zero or a FIFO within seconds;
// - `--references` inside prepared/ is refused with exit 2 and nothing is deleted;
// - two add-sources, and an add-source beside a rebuild, on one folder: every condition ends in the
//   manifest and replay passes;
// - a rebuild that reproduces the table in place leaves it and the manifest byte for byte.
// Every file is under a temporary root; the committed folders are checked unchanged.
import { execa, type Result } from 'execa';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { useGuardedWorkspace } from '../sources/hardening-support.ts';
import { tinyCameraPlan } from '../support/fixtures.ts';
import { readReferenceManifest, readReferenceTable, writeReferenceManifest, writeReferenceTable } from '../support/raw-references.ts';

const BIN = join(ROOT, 'bin', 'wwref.mjs');
const workspace = useGuardedWorkspace();

function wwref(args: string[], env: Record<string, string> = {}) {
  return execa('node', [BIN, ...args], { cwd: workspace().root, env, reject: false });
}

/** A user error: exit 2, one wwref line, no stack. */
function userError(result: Result, message: RegExp): void {
  expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(2);
  const lines = String(result.stderr)
    .split('\n')
    .filter((l) => l.startsWith('wwref:'));
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(message);
  expect(String(result.stderr)).not.toMatch(/\n\s+at |internal error/);
}

let nile: string | undefined;
/** A folder holding a fresh nile build (built once), copied to `name`. */
async function nileCopy(name: string): Promise<string> {
  if (!nile) {
    nile = join(workspace().root, 'nile-built');
    const built = await wwref(['rebuild', '--condition', 'nile', '--workers', '1', '--references', nile]);
    expect(built.exitCode, String(built.stderr)).toBe(0);
  }
  const dir = join(workspace().root, name);
  cpSync(nile, dir, { recursive: true });
  return dir;
}

function reseal(dir: string, edit: (t: ReturnType<typeof readReferenceTable>) => void): void {
  const file = join(dir, 'nile.arrow');
  const table = readReferenceTable(file);
  edit(table);
  const manifest = readReferenceManifest(dir)!;
  manifest.conditions.nile!.table_sha256 = sha256Hex(writeReferenceTable(file, table.records, table.metadata));
  writeReferenceManifest(manifest, dir);
}

describe('replay of re-sealed references', () => {
  it('the untouched build replays', async () => {
    const dir = await nileCopy('untouched');
    const result = await wwref(['replay', '--references', dir, '--report', join(workspace().root, 'untouched.json')]);
    expect(result.exitCode, String(result.stderr)).toBe(0);
    expect(result.stdout).toMatch(/16\/16 records/);
  });

  const cases: [string, (t: ReturnType<typeof readReferenceTable>) => void, RegExp][] = [
    ['a dropped row', (t) => t.records.pop(), /15 rows, but the manifest records 16/],
    ['0101 replaced by a second 0100', (t) => (t.records[5] = { ...t.records[4]! }), /mask appears twice.*no record for mask\(s\) 0101/],
    ['a failed record', (t) => (t.records[0] = { ...t.records[0]!, status: 'failed', error: 'x' }), /status failed/],
    [
      'a zeroed plan_sha256 column',
      (t) => {
        for (const r of t.records) r.plan_sha256 = '0'.repeat(64);
      },
      /plan_sha256 is "0+"/,
    ],
    ['cleared schema metadata', (t) => (t.metadata = {}), /lacks the wwref context/],
  ];
  for (const [what, edit, message] of cases) {
    it(`${what}: exit 2 before any record runs`, async () => {
      const dir = await nileCopy(what.replace(/\W+/g, '-'));
      reseal(dir, edit);
      const started = Date.now();
      const result = await wwref(['replay', '--references', dir, '--report', join(workspace().root, 'r.json')]);
      userError(result, message);
      expect(Date.now() - started).toBeLessThan(15_000);
    });
  }

  it('a re-sealed scale, metric name, extras, independent value or native value (even by 5e-11) fails the replay of that record, named', async () => {
    const edits: [string, (r: ReturnType<typeof readReferenceTable>['records'][number]) => void][] = [
      ['normalization_scale', (r) => (r.normalization_scale = 1)],
      ['native_metric', (r) => (r.native_metric = 'accuracy')],
      ['extras', (r) => (r.extras = { evil: 1 })],
      ['independent_metric', (r) => (r.independent_value = 5)],
      ['native_value', (r) => (r.native_value = r.native_value! + 5e-11)],
    ];
    for (const [check, edit] of edits) {
      const dir = await nileCopy(`field-${check}`);
      reseal(dir, (t) => edit(t.records[0]!));
      const report = join(workspace().root, `field-${check}.json`);
      const result = await wwref(['replay', '--references', dir, '--report', report]);
      expect(result.exitCode, `${check}: ${result.stderr}`).toBe(1);
      expect(result.stdout).toMatch(/15\/16 records/);
      const failed = JSON.parse(readFileSync(report, 'utf8')).records.filter((r: { passed: boolean }) => !r.passed);
      expect(failed.map((r: { mask: string }) => r.mask)).toEqual(['0000']);
      expect(failed[0].failures.map((f: { check: string }) => f.check)).toContain(check);
    }
  });

  it('a manifest naming a plan file that does not exist is refused', async () => {
    const dir = await nileCopy('no-plan');
    const manifest = readReferenceManifest(dir)!;
    manifest.conditions.nile!.plan_file = 'sources/does_not_exist.plan.json';
    writeReferenceManifest(manifest, dir);
    userError(
      await wwref(['replay', '--references', dir, '--report', join(workspace().root, 'r.json')]),
      /its plan sources\/does_not_exist\.plan\.json \(named by the manifest\) does not exist/,
    );
  });

  it('a pack exported from a folder replays from the command line (--format wwb --references PACK)', async () => {
    const dir = await nileCopy('to-pack');
    const pack = join(workspace().root, 'nile-pack');
    const exported = await wwref(['export', '--format', 'wwb', '--references', dir, '--out', pack]);
    expect(exported.exitCode, String(exported.stderr)).toBe(0);
    const replayed = await wwref(['replay', '--format', 'wwb', '--references', pack, '--report', join(workspace().root, 'pack.json')]);
    expect(replayed.exitCode, String(replayed.stderr)).toBe(0);
    expect(replayed.stdout).toMatch(/16\/16 records/);
  });

  it('a changed code identity is refused like version drift, and named', async () => {
    const dir = await nileCopy('code');
    const manifest = readReferenceManifest(dir)!;
    manifest.code.workflows_sha256 = 'a'.repeat(64);
    writeReferenceManifest(manifest, dir);
    userError(
      await wwref(['replay', '--references', dir, '--report', join(workspace().root, 'r.json')]),
      /metadata workflows_sha256 is .*, the manifest says "a{64}"/,
    );
    // table and manifest re-sealed together: the checkout's code is what refuses
    reseal(dir, (t) => (t.metadata = { wwref: JSON.stringify({ ...JSON.parse(t.metadata.wwref!), workflows_sha256: 'a'.repeat(64) }) }));
    userError(
      await wwref(['replay', '--references', dir, '--report', join(workspace().root, 'r.json')]),
      /workflow code: the references were built with workflows_sha256 a{64}, this checkout has [0-9a-f]{64}; refusing to replay/,
    );
  });
});

describe('every reader refuses a table that is /dev/zero or a FIFO, within seconds', () => {
  it('replay, export, grade, diff, effects and report, each on a link to /dev/zero and on a FIFO', async () => {
    const zero = await nileCopy('reader-zero');
    const fifo = await nileCopy('reader-fifo');
    rmSync(join(zero, 'nile.arrow'));
    symlinkSync('/dev/zero', join(zero, 'nile.arrow'));
    rmSync(join(fifo, 'nile.arrow'));
    execFileSync('mkfifo', [join(fifo, 'nile.arrow')]);
    const out = join(workspace().root, 'reader-out');
    mkdirSync(out, { recursive: true });
    writeFileSync(
      join(out, 'table.csv'),
      `mask,utility\n${[...Array(16).keys()].map((k) => `${k.toString(2).padStart(4, '0')},0.5`).join('\n')}\n`,
    );
    const readers = (dir: string): [string, string[]][] => [
      ['replay', ['replay', '--references', dir, '--report', join(out, 'r.json')]],
      ['export', ['export', '--format', 'csv', '--references', dir, '--out', join(out, 'all.csv')]],
      ['grade', ['grade', '--references', dir, '--condition', 'nile', '--table', join(out, 'table.csv')]],
      ['diff', ['diff', dir, dir]],
      ['effects', ['effects', '--references', dir, '--out', join(out, 'effects')]],
      ['report', ['report', '--references', dir, '--out', join(out, 'report.html')]],
    ];
    // each reader once on each kind, the six readers of one kind side by side (they must all end within seconds)
    for (const dir of [zero, fifo]) {
      const started = Date.now();
      const results = await Promise.all(readers(dir).map(([, args]) => wwref(args)));
      expect(Date.now() - started, dir).toBeLessThan(20_000);
      for (const result of results) userError(result, /nile\.arrow.*(outside|not a regular file)/);
    }
    expect(readdirSync(out).sort()).toEqual(['table.csv']); // no reader wrote anything
  });
});

describe('guards', () => {
  it('--references inside prepared/ (or the source manifests) is refused with exit 2, and nothing is deleted', async () => {
    await nileCopy('prepared-guard'); // nile is prepared now
    const prepared = join(workspace().prepared, 'nile');
    const before = readdirSync(prepared)
      .sort()
      .map((f) => `${f} ${sha256Hex(readFileSync(join(prepared, f)))}`);
    userError(
      await wwref(['rebuild', '--condition', 'nile', '--references', prepared]),
      /reference folder .* is inside the prepared inputs/,
    );
    userError(
      await wwref(['replay', '--references', join(workspace().root, 'prepared', '..', 'prepared', 'nile')]),
      /is inside the prepared inputs/,
    );
    userError(await wwref(['list'], { WWREF_REFERENCES_DIR: join(workspace().manifests, 'refs') }), /is inside the source manifests/);
    const prep = await wwref(['prepare', '--source', 'nile']);
    expect(prep.exitCode, String(prep.stderr)).toBe(0);
    expect(
      readdirSync(prepared)
        .sort()
        .map((f) => `${f} ${sha256Hex(readFileSync(join(prepared, f)))}`),
    ).toEqual(before);
  });

  it('--condition given many times is one condition', async () => {
    const dir = await nileCopy('repeated');
    const args = Array.from({ length: 300 }, () => ['--condition', 'nile']).flat();
    const result = await wwref([
      'export',
      '--format',
      'csv',
      '--references',
      dir,
      '--out',
      join(workspace().root, 'repeated.csv'),
      ...args,
    ]);
    expect(result.exitCode, String(result.stderr)).toBe(0);
    expect(readFileSync(join(workspace().root, 'repeated.csv'), 'utf8').trim().split('\n')).toHaveLength(17);
  });
});

describe('writers on one folder', () => {
  const plan = (source: string) => {
    const file = join(workspace().root, 'plans', `${source}.plan.json`);
    mkdirSync(join(workspace().root, 'plans'), { recursive: true });
    writeFileSync(file, `${JSON.stringify(tinyCameraPlan(source), null, 2)}\n`);
    return file;
  };

  it('two add-sources at once, then an add-source beside a rebuild: every condition is in the manifest and replay passes', async () => {
    const refs = join(workspace().root, 'shared-refs');
    const [a, b] = await Promise.all([
      wwref(['add-source', plan('tiny_one'), '--references', refs, '--workers', '1']),
      wwref(['add-source', plan('tiny_two'), '--references', refs, '--workers', '1']),
    ]);
    expect(a.exitCode, String(a.stderr)).toBe(0);
    expect(b.exitCode, String(b.stderr)).toBe(0);
    const [c, d] = await Promise.all([
      wwref(['add-source', plan('tiny_three'), '--references', refs, '--workers', '1']),
      wwref(['rebuild', '--condition', 'nile', '--condition', 'seeds', '--references', refs, '--workers', '1']),
    ]);
    expect(c.exitCode, String(c.stderr)).toBe(0);
    expect(d.exitCode, String(d.stderr)).toBe(0);
    const conditions = Object.keys(readReferenceManifest(refs)!.conditions).sort();
    expect(conditions).toEqual(['nile', 'seeds', 'tiny_one', 'tiny_one__d6', 'tiny_three', 'tiny_three__d6', 'tiny_two', 'tiny_two__d6']);
    const replayed = await wwref(['replay', '--references', refs, '--workers', '2', '--report', join(workspace().root, 'shared.json')]);
    expect(replayed.exitCode, String(replayed.stderr)).toBe(0);
    expect(replayed.stdout).toMatch(/8\/8 conditions passed, 272\/272 records/);
  });

  it('a rebuild of an added source whose plan changed needs --force and every condition of the source; the old plan is recorded', async () => {
    const refs = join(workspace().root, 'changed-plan');
    const file = plan('tiny_changed');
    const added = await wwref(['add-source', file, '--references', refs, '--workers', '1']);
    expect(added.exitCode, String(added.stderr)).toBe(0);
    const old = readReferenceManifest(refs)!.conditions.tiny_changed!.plan_sha256;
    writeFileSync(
      file,
      `${JSON.stringify(
        tinyCameraPlan('tiny_changed', (p) => (p.title = 'a changed title')),
        null,
        2,
      )}\n`,
    );
    const before = readFileSync(join(refs, 'manifest.json'));
    userError(
      await wwref(['rebuild', '--references', refs, '--condition', 'tiny_changed']),
      /plan of condition 'tiny_changed' changed after its references were written .*pass --force/,
    );
    userError(
      await wwref(['rebuild', '--references', refs, '--condition', 'tiny_changed', '--force']),
      /condition 'tiny_changed__d6' of source 'tiny_changed' was built from another plan .*rebuild it together/,
    );
    expect(readFileSync(join(refs, 'manifest.json')).equals(before)).toBe(true);
    const forced = await wwref([
      'rebuild',
      '--references',
      refs,
      '--condition',
      'tiny_changed',
      '--condition',
      'tiny_changed__d6',
      '--force',
      '--workers',
      '1',
    ]);
    expect(forced.exitCode, String(forced.stderr)).toBe(0);
    const entries = readReferenceManifest(refs)!.conditions;
    for (const id of ['tiny_changed', 'tiny_changed__d6']) {
      expect(entries[id]!.plan_sha256).not.toBe(old);
      expect(entries[id]!.supersedes_plan_sha256).toEqual([old]);
    }
    const replayed = await wwref(['replay', '--references', refs, '--report', join(workspace().root, 'changed.json')]);
    expect(replayed.exitCode, String(replayed.stderr)).toBe(0);
  });

  it('a rebuild that reproduces the table in place leaves table and manifest byte for byte', async () => {
    const dir = await nileCopy('kept');
    const table = readFileSync(join(dir, 'nile.arrow'));
    const manifest = readFileSync(join(dir, 'manifest.json'));
    const again = await wwref(['rebuild', '--condition', 'nile', '--workers', '1', '--fresh', '--references', dir]);
    expect(again.exitCode, String(again.stderr)).toBe(0);
    expect(again.stdout).toMatch(/1 condition\(s\) reproduced, kept/);
    expect(readFileSync(join(dir, 'nile.arrow')).equals(table)).toBe(true);
    expect(readFileSync(join(dir, 'manifest.json')).equals(manifest)).toBe(true);
    expect(existsSync(join(dir, '.wwref.lock'))).toBe(false);
  });
});
