// The command line's one error path (pipelines/cli/main.ts): every bad flag value, unwritable or
// protected output path and corrupt input is exit 2 with one line on stderr naming the problem, never
// a stack trace, and nothing is written where it must not be:
// - --workers 0, -1, abc, 1.5, 0x2, 1e0, +2, 100000 (more than the cores without --workers-max), --workers-max out of range;
// - an output path inside the references folder (relative, with '..', through a symbolic link), for
//   replay --report, export --out (csv and wwb), plan-schema --out, report --out and effects --out;
// - an output path that cannot be written: a read-only folder, a folder where a file is expected, a
//   file where a folder is expected, a parent that is a file, a FIFO, a symbolic link;
// - `--condition=` and a bare `--condition`, which must not mean "everything";
// - a corrupt JSON cell in a reference table (whose manifest hash was updated to match), for every reader;
// - a corrupt source manifest or prepared file for `export --format wwb`: no pack is written.
// Real tables built by a real rebuild (nile) in a temporary root; the committed folders are checked unchanged.
// The cases run in this process through runCli, what bin/wwref.mjs runs (test/support/cli.ts); the first
// of every batch also runs as a real process and must print the same line.
import { readReferenceManifest, writeReferenceManifest } from '../support/raw-references.ts';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { tableFromIPC, type DataType } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrowFileBytes } from '../../pipelines/core/tabular.ts';
import { sha256Hex } from '../../pipelines/core/hashing.ts';

import { filesUnder, guardRepository } from '../sources/hardening-support.ts';
import { cliInProcess, cliProcess, type CliOutcome } from '../support/cli.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';

let ws: Workspace;
let guard: ReturnType<typeof guardRepository>;
/** The working directory of every command: relative paths below are relative to it. */
let cwd: string;

beforeAll(async () => {
  guard = guardRepository();
  ws = useTempWorkspace();
  cwd = join(ws.root, 'work');
  mkdirSync(cwd, { recursive: true });
  const built = await cliProcess(['rebuild', '--condition', 'nile', '--workers', '1'], cwd);
  expect(built.code, built.stderr).toBe(0);
});
afterAll(() => {
  ws.dispose();
  guard.check();
});

/**
 * Runs every case (arguments, expected message) and checks that each is refused: in this process
 * through runCli (what bin/wwref.mjs runs), and the first case of the batch also as a real process,
 * which must print the same line.
 */
async function refusedAll(cases: [string[], RegExp][]): Promise<void> {
  for (const [args, expected] of cases) refused(await cliInProcess(args, cwd), expected, args);
  const [args, expected] = cases[0]!;
  const real = await cliProcess(args, cwd);
  refused(real, expected, args);
  expect(real.stderr.trimEnd(), 'the same line as in process').toBe((await cliInProcess(args, cwd)).stderr.trimEnd());
}

/** Exit 2 and exactly one line on stderr, `wwref: <message>`, matching `expected`; no stack trace. */
function refused({ code, stderr }: CliOutcome, expected: RegExp, args: string[]): void {
  const label = `wwref ${JSON.stringify(args)}\n${stderr}`;
  expect(code, label).toBe(2);
  expect(stderr, label).not.toMatch(/\n\s+at |internal error/);
  const lines = stderr.trimEnd().split('\n');
  expect(lines, label).toHaveLength(1);
  expect(lines[0], label).toMatch(/^wwref: /);
  expect(lines[0], label).toMatch(expected);
}

/** A listing (names and sha256) of a folder's files, to show that nothing in it changed. */
function listing(dir: string): string[] {
  return filesUnder(dir).map((f) => `${f} ${sha256Hex(readFileSync(join(dir, f)))}`);
}

describe('--workers and --workers-max', () => {
  it('--workers 0, -1, abc, 1.5, empty, 0x2, 1e0, +2, and 100000 without --workers-max are refused before anything runs', async () => {
    // each refusal names the option and what it got
    const digits = (value: string) =>
      new RegExp(`^wwref: --workers takes one whole number written in decimal digits, not '${value.replace(/[.+]/g, '\\$&')}'$`);
    const values: [string, RegExp][] = [
      ['0', /^wwref: --workers takes a whole number of at least 1, not 0$/],
      ['-1', digits('-1')],
      ['abc', digits('abc')],
      ['1.5', digits('1.5')],
      ['', digits('')],
      // a number parser reads these as 2, 1 and 2
      ['0x2', digits('0x2')],
      ['1e0', digits('1e0')],
      ['+2', digits('+2')],
      ['100000', /^wwref: --workers 100000 is more than \d+ \(the cores of this machine\); pass --workers-max 100000 to allow it$/],
    ];
    await refusedAll(
      values.flatMap(([value, expected]): [string[], RegExp][] => [
        [['rebuild', '--condition', 'nile', '--workers', value], expected],
        [['prepare', '--source', 'nile', `--workers=${value}`], expected],
      ]),
    );
    expect(existsSync(join(ws.cache, 'journal', 'nile.jsonl'))).toBe(false); // nothing ran
  });

  it('--workers-max outside 1..256 or not in decimal digits is refused; within it, a larger --workers passes the check', async () => {
    await refusedAll([
      ...[
        ['0', /^wwref: --workers-max takes a whole number from 1 to 256, not 0$/],
        ['257', /^wwref: --workers-max takes a whole number from 1 to 256, not 257$/],
        ['1e9', /^wwref: --workers-max takes one whole number written in decimal digits, not '1e9'$/],
        ['0x4', /^wwref: --workers-max takes one whole number written in decimal digits, not '0x4'$/],
        ['x', /^wwref: --workers-max takes one whole number written in decimal digits, not 'x'$/],
      ].map(([max, expected]): [string[], RegExp] => [
        ['rebuild', '--condition', 'nile', '--workers', '3', '--workers-max', max as string],
        expected as RegExp,
      ]),
      // validation passed: the unknown condition is what stops the run
      [['rebuild', '--condition', 'no_such_condition', '--workers', '3', '--workers-max', '3'], /unknown condition 'no_such_condition'/],
    ]);
  });
});

describe('output paths inside the references folder are refused, however they are spelled', () => {
  it('relative, with .., through a linked folder or a linked file, absolute: nothing is written there', async () => {
    const refs = ws.references;
    const before = listing(refs);
    symlinkSync(refs, join(cwd, 'refs-link'));
    symlinkSync(join(refs, 'manifest.json'), join(cwd, 'manifest-link.json'));
    mkdirSync(join(cwd, 'sub'));
    const spellings = [
      '../references/manifest.json',
      'sub/../../references/report.json',
      './../references/x',
      'refs-link/manifest.json',
      'refs-link/new/x.json',
      'manifest-link.json',
      refs,
    ];
    const commands = [
      (path: string) => ['replay', '--report', path],
      (path: string) => ['export', '--out', path],
      (path: string) => ['export', '--format', 'wwb', '--out', path],
      (path: string) => ['plan-schema', '--out', path],
      (path: string) => ['report', '--out', path],
      (path: string) => ['effects', '--out', path],
    ];
    const inside = /is inside .*\/references, which only wwref itself writes; choose another path$/;
    // every spelling with two commands, every command with at least two spellings
    const cases = spellings.flatMap((path, i): [string[], RegExp][] => [
      [commands[i % commands.length]!(path), inside],
      [commands[(i + 3) % commands.length]!(path), inside],
    ]);
    // the folder named by --references (not the default) is protected the same way
    const other = join(ws.root, 'other-refs');
    mkdirSync(other);
    copyFileSync(join(refs, 'manifest.json'), join(other, 'manifest.json'));
    copyFileSync(join(refs, 'nile.arrow'), join(other, 'nile.arrow'));
    cases.push([
      ['export', '--references', '../other-refs', '--out', '../other-refs/all.csv'],
      /other-refs, which only wwref itself writes/,
    ]);
    // and so are the prepared and source-manifest folders
    cases.push([['plan-schema', '--out', '../prepared/x.json'], /is inside .*\/prepared, which only wwref itself writes/]);
    cases.push([['export', '--out', '../manifests/nile.json'], /is inside .*\/manifests, which only wwref itself writes/]);
    await refusedAll(cases);
    expect(listing(refs)).toEqual(before);
    expect(readdirSync(other).sort()).toEqual(['manifest.json', 'nile.arrow']);
    expect(readdirSync(ws.manifests)).toEqual(['nile.json']);
  });
});

describe('output paths that cannot be written are refused with one line', () => {
  it('a read-only folder (permissions, or the immutable flag when running as root)', async (ctx) => {
    const ro = join(cwd, 'read-only');
    mkdirSync(ro);
    chmodSync(ro, 0o555);
    let writable = true;
    try {
      writeFileSync(join(ro, 'probe'), '');
      rmSync(join(ro, 'probe'));
    } catch {
      writable = false; // the permissions are enough
    }
    // root ignores permissions: make the folder immutable instead, where the file system allows it
    const immutable = writable && spawnSync('chattr', ['+i', ro]).status === 0;
    if (writable && !immutable) {
      chmodSync(ro, 0o755);
      ctx.skip('running as root on a file system without the immutable flag: no read-only folder to test with');
    }
    try {
      const unwritable = /cannot be written: .*read-only is not writable \((EACCES|EPERM)\)$/;
      await refusedAll([
        [['plan-schema', '--out', 'read-only/schema.json'], unwritable],
        [['export', '--out', 'read-only/all.csv'], unwritable],
        [['export', '--format', 'wwb', '--out', 'read-only/pack'], unwritable],
        [['report', '--out', 'read-only/deeper/report.html'], unwritable],
        [['effects', '--out', 'read-only/effects'], unwritable],
        [['replay', '--report', 'read-only/replay.json'], unwritable],
      ]);
      expect(readdirSync(ro)).toEqual([]);
    } finally {
      if (immutable) execFileSync('chattr', ['-i', ro]);
      chmodSync(ro, 0o755);
    }
  });

  it('a folder where a file is expected, a file where a folder is expected, a parent that is a file', async () => {
    mkdirSync(join(cwd, 'a-folder'));
    writeFileSync(join(cwd, 'a-file'), 'keep');
    const isFolder = /--(out|report) a-folder is a directory; name a file$/;
    const isFile = /--out a-file is a file; name a folder$/;
    const parentIsFile = /cannot be written: .*\/work\/a-file is a file, not a folder$/;
    await refusedAll([
      [['plan-schema', '--out', 'a-folder'], isFolder],
      [['export', '--out', 'a-folder'], isFolder],
      [['report', '--out', 'a-folder'], isFolder],
      [['replay', '--report', 'a-folder'], isFolder],
      [['export', '--format', 'wwb', '--out', 'a-file'], isFile],
      [['effects', '--out', 'a-file'], isFile],
      [['export', '--out', 'a-file/all.csv'], parentIsFile],
      [['plan-schema', '--out', 'a-file/x/y/schema.json'], parentIsFile],
      [['report', '--out', 'a-file/report.html'], parentIsFile],
      [['replay', '--report', 'a-file/replay.json'], parentIsFile],
      [['effects', '--out', 'a-file/effects'], parentIsFile],
      [['export', '--format', 'wwb', '--out', 'a-file/pack'], parentIsFile],
    ]);
    expect(readdirSync(join(cwd, 'a-folder'))).toEqual([]);
    expect(readFileSync(join(cwd, 'a-file'), 'utf8')).toBe('keep');
  });

  it('a FIFO or a symbolic link as the output file is refused, and left as it was; so is a name too long for the file system', async () => {
    execFileSync('mkfifo', [join(cwd, 'a-fifo')]);
    writeFileSync(join(cwd, 'target.txt'), 'keep');
    symlinkSync('target.txt', join(cwd, 'a-link'));
    await refusedAll([
      [['export', '--out', 'a-fifo'], /--out a-fifo is not a regular file \(a device, FIFO or socket\); name a file$/],
      [['plan-schema', '--out', 'a-fifo'], /is not a regular file/],
      [['export', '--out', 'a-link'], /--out a-link is a symbolic link; name the file itself/],
      [['report', '--out', 'a-link'], /is a symbolic link/],
      [['export', '--out', `${'x'.repeat(300)}.csv`], /ENAMETOOLONG/],
    ]);
    expect(lstatSync(join(cwd, 'a-fifo')).isFIFO()).toBe(true);
    expect(lstatSync(join(cwd, 'a-link')).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(cwd, 'target.txt'), 'utf8')).toBe('keep');
  });
});

describe('an empty --condition never selects everything', () => {
  it('rebuild, replay, export, effects, report: `--condition=`, a bare `--condition` (last, or before another flag), `--condition ""`', async () => {
    const commands: [string, string[]][] = [
      ['rebuild', ['--workers', '1']],
      ['replay', ['--report', 'replay.json']],
      ['export', ['--out', 'all.csv']],
      ['effects', ['--out', 'effects']],
      ['report', ['--out', 'report.html']],
    ];
    const needs = /^wwref: --condition needs a value \(leave the option out to select everything\)$/;
    await refusedAll(
      commands.flatMap(([command, rest]): [string[], RegExp][] => [
        [[command, '--condition=', ...rest], needs],
        [[command, ...rest, '--condition'], needs],
        [[command, '--condition', ...rest], needs],
        [[command, '--condition', '', ...rest], needs],
        [[command, '--condition', 'nile', '--condition=', ...rest], needs],
      ]),
    );
    expect(readdirSync(cwd).filter((f) => ['replay.json', 'all.csv', 'effects', 'report.html'].includes(f))).toEqual([]);
    expect(existsSync(join(ws.cache, 'journal', 'nile.jsonl'))).toBe(false); // nothing ran
  });
});

describe('corrupt inputs are one line, not a stack', () => {
  it('a corrupt JSON cell in a table whose manifest hash matches it: every reader refuses it, naming row and column', async () => {
    const refs = join(ws.root, 'corrupt-cell');
    mkdirSync(refs);
    const table = tableFromIPC(readFileSync(join(ws.references, 'nile.arrow')));
    const columns = table.schema.fields.map((f) => {
      const values = Array.from(table.getChild(f.name)!.toArray() as ArrayLike<unknown>);
      if (f.name === 'warnings') values[3] = '[{"category": "RuntimeWarn';
      return { name: f.name, type: f.type as DataType, nullable: true, values };
    });
    const bytes = arrowFileBytes(columns, Object.fromEntries(table.schema.metadata));
    writeFileSync(join(refs, 'nile.arrow'), bytes);
    const manifest = readReferenceManifest(ws.references)!;
    manifest.conditions.nile!.table_sha256 = sha256Hex(bytes);
    writeReferenceManifest(manifest, refs);
    writeFileSync(
      join(cwd, 'prediction.json'),
      JSON.stringify(Object.fromEntries([...Array(16).keys()].map((k) => [k.toString(2).padStart(4, '0'), 0.5]))),
    );

    const corrupt = /reference table .*corrupt-cell\/nile\.arrow, row 3, column warnings: not valid JSON; rebuild the condition$/;
    const at = ['--references', refs];
    await refusedAll([
      [['export', ...at, '--out', 'all.csv'], corrupt],
      [['export', ...at, '--format', 'wwb', '--out', 'pack'], corrupt],
      [['effects', ...at, '--out', 'effects'], corrupt],
      [['report', ...at, '--out', 'report.html'], corrupt],
      [['grade', ...at, '--condition', 'nile', '--table', 'prediction.json'], corrupt],
      [['replay', ...at, '--report', 'replay.json'], corrupt],
    ]);
    expect(readdirSync(cwd).filter((f) => ['all.csv', 'pack', 'effects', 'report.html', 'replay.json'].includes(f))).toEqual([]);
  });

  it('a corrupt source manifest for export --format wwb (truncated, wrong shape, a folder, missing): refused, no pack written', async () => {
    const path = join(ws.manifests, 'nile.json');
    const good = readFileSync(path);
    const cases: [() => void, RegExp][] = [
      [() => writeFileSync(path, good.subarray(0, 40)), /source manifest .*manifests\/nile\.json is not valid JSON/],
      [() => writeFileSync(path, '[1, 2]'), /source manifest .*manifests\/nile\.json is malformed: .*expected object/],
      [
        () => writeFileSync(path, JSON.stringify({ ...JSON.parse(good.toString()), prepared_files: 'none' })),
        /source manifest .*manifests\/nile\.json is malformed/,
      ],
      [() => mkdirSync(path), /cannot read .*manifests\/nile\.json: it is a directory \(EISDIR\)$/],
      [() => {}, /source manifest not found: .*manifests\/nile\.json; run 'wwref prepare --source nile'$/],
    ];
    try {
      for (const [corrupt, expected] of cases) {
        rmSync(path, { recursive: true, force: true });
        corrupt();
        await refusedAll([[['export', '--format', 'wwb', '--out', 'pack'], expected]]);
        expect(existsSync(join(cwd, 'pack')), 'no partial pack').toBe(false);
      }
    } finally {
      rmSync(path, { recursive: true, force: true });
      writeFileSync(path, good);
    }
  });

  it('a changed prepared file for export --format wwb: refused before anything is written, never sealed', async () => {
    const npz = join(ws.prepared, 'nile', 'arrays.npz');
    const good = readFileSync(npz);
    try {
      writeFileSync(npz, Buffer.concat([good, Buffer.from('x')]));
      await refusedAll([
        [
          ['export', '--format', 'wwb', '--out', 'pack'],
          /prepared input changed: .*prepared\/nile\/arrays\.npz .*run 'wwref prepare --source nile'$/,
        ],
      ]);
      expect(existsSync(join(cwd, 'pack')), 'no partial pack').toBe(false);
    } finally {
      writeFileSync(npz, good);
    }
    // control: the untouched inputs export as a sealed pack
    const ok = await cliProcess(['export', '--format', 'wwb', '--out', 'pack'], cwd);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(cwd, 'pack', 'manifest.json'), 'utf8')).files_sha256['inputs/nile/arrays.npz']).toBe(
      sha256Hex(good),
    );
  });
});
