// Output paths a user names are checked once, before any work (core/containment.ts checkOutputPath):
// - through the real command line, effects --out, report --out / --figures, export --out (csv and wwb),
//   rebuild --report, replay --report and diff --json inside the project's own source folders
//   (workflows/, sources/, pipelines/, test/, scripts/, contracts/) are one line, exit 2, before anything
//   is read or run: a reference folder without tables, or a rebuild that would take a minute, is
//   refused at once and nothing is created; a report whose parent is a file is refused the same way;
// - the job functions themselves (called without the command line) refuse the same paths, so a caller
//   other than this command line gets the same check;
// - the plan schema may still be written into sources/, where the committed one lives;
// - the rule holds under every name of a place: a bind mount of the checkout, of a source folder, of
//   the git folder or of a reference folder, and a hard link of a tracked file, are refused like the
//   project's own paths (also where the mount table cannot be read), while a bind mount of a scratch
//   folder is written as usual; the project's runtime (node_modules/, dist/, .venv/) is refused, and
//   `link/..` is read as the system reads it.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { execa } from 'execa';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Catalog } from '../../pipelines/catalog/catalog.ts';
import { writeEffects } from '../../pipelines/analysis/effects.ts';
import { writeReportFiles } from '../../pipelines/analysis/report.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { ROOT, SOURCES_DIR } from '../../pipelines/core/paths.ts';
import { rebuild } from '../../pipelines/jobs/rebuild.ts';
import { replay } from '../../pipelines/jobs/replay.ts';
import { exportPack } from '../../pipelines/jobs/wwb.ts';
import { exportCsv } from '../../pipelines/references/export.ts';
import { currentSettings } from '../support/workspace.ts';
import { useGuardedWorkspace } from '../sources/hardening-support.ts';
import { BIN, cliInProcess, cliProcess, type CliOutcome } from '../support/cli.ts';
import { writeSurfaceCatalog } from '../support/fixtures.ts';

const workspace = useGuardedWorkspace();

/** Exit 2, one `wwref:` line on stderr matching `message`, nothing on stdout, no stack. */
function refused(outcome: CliOutcome, message: RegExp, label: string): void {
  expect(outcome.code, `${label}\n${outcome.stderr}`).toBe(2);
  expect(outcome.stdout, label).toBe('');
  expect(outcome.stderr, label).toMatch(/^wwref: [^\n]*\n?$/); // a real process's output comes without its last newline
  expect(outcome.stderr.trimEnd(), label).toMatch(message);
}

/** A path under a source folder of the repository, unique to this test file (and checked absent after). */
const inSource = (folder: string, name: string) => join(ROOT, folder, `wwref-output-test-${name}`);

describe('outputs inside the project source folders are refused before any work, through the command line', () => {
  it('effects, report (page and figures), export (csv and pack), diff, rebuild and replay', async () => {
    const ws = workspace();
    // a reference folder with a table, so that every command would otherwise succeed
    const refs = join(ws.root, 'refs');
    writeSurfaceCatalog(refs, [{ condition: 'op_surface', dimensions: 4, utility: (z) => 0.2 + 0.5 * z[0]! + 0.2 * z[1]! }]);
    const fine = await cliInProcess(['effects', '--references', refs, '--out', join(ws.root, 'effects')], ws.root);
    expect(fine.code, fine.stderr).toBe(0);
    expect(existsSync(join(ws.root, 'effects', 'summary.json'))).toBe(true);

    const cases: [string[], string, string][] = [
      [['effects', '--references', refs, '--out', inSource('workflows', 'effects')], '--out', 'workflows'],
      [['report', '--references', refs, '--out', inSource('pipelines', 'report.html')], '--out', 'pipelines'],
      [['report', '--references', refs, '--figures', inSource('sources', 'figures')], '--figures', 'sources'],
      [['export', '--references', refs, '--out', inSource('test', 'all.csv')], '--out', 'test'],
      [['export', '--references', refs, '--format', 'wwb', '--out', inSource('scripts', 'pack')], '--out', 'scripts'],
      [['export', '--references', refs, '--out', inSource('contracts', 'all.csv')], '--out', 'contracts'],
      [['diff', refs, refs, '--json', inSource('workflows', 'diff.json')], '--json', 'workflows'],
      [['replay', '--references', refs, '--report', inSource('pipelines', 'replay.json')], '--report', 'pipelines'],
      // relative to the working folder, through '..'
      [
        ['export', '--references', refs, '--out', `${relative(ws.root, ROOT)}/workflows/../sources/wwref-output-test-x.csv`],
        '--out',
        'sources',
      ],
    ];
    for (const [args, flag, folder] of cases) {
      const outcome = await cliInProcess(args, ws.root);
      refused(
        outcome,
        new RegExp(`^wwref: ${flag} \\S+ is inside ${ROOT}/${folder}, the project's own source; choose another path$`),
        args.join(' '),
      );
    }
    refused(
      await cliProcess(cases[0]![0], ws.root),
      /is inside .*\/workflows, the project's own source; choose another path$/,
      'a real process',
    );
    for (const [folder, name] of [
      ['workflows', 'effects'],
      ['pipelines', 'report.html'],
      ['sources', 'figures'],
      ['test', 'all.csv'],
      ['scripts', 'pack'],
      ['contracts', 'all.csv'],
      ['workflows', 'diff.json'],
      ['pipelines', 'replay.json'],
      ['sources', 'x.csv'],
    ]) {
      expect(existsSync(inSource(folder!, name!)), `${folder}/${name}`).toBe(false);
    }
  });

  it('before any work: a folder without references, and a rebuild, are refused at once; nothing is read, run or written', async () => {
    const ws = workspace();
    const empty = join(ws.root, 'no-references');
    mkdirSync(empty);
    // without the output check these fail on the missing manifest; the output path is refused first
    for (const args of [
      ['effects', '--references', empty, '--out', inSource('workflows', 'effects')],
      ['report', '--references', empty, '--out', inSource('pipelines', 'r.html')],
      ['export', '--references', empty, '--out', inSource('sources', 'all.csv')],
    ]) {
      refused(await cliInProcess(args, ws.root), /the project's own source; choose another path$/, args.join(' '));
    }
    writeFileSync(join(ws.root, 'a-file'), 'keep');
    const started = Date.now();
    for (const [report, message] of [
      [
        inSource('workflows', 'rebuild.json'),
        /^wwref: --report \S+ is inside \S+\/workflows, the project's own source; choose another path$/,
      ],
      [
        join(ws.root, 'a-file', 'rebuild.json'),
        /^wwref: --report \S+a-file\/rebuild\.json cannot be written: \S+\/a-file is a file, not a folder$/,
      ],
    ] as const) {
      refused(await cliInProcess(['rebuild', '--condition', 'nile', '--workers', '1', '--report', report], ws.root), message, report);
    }
    expect(Date.now() - started).toBeLessThan(10_000); // a rebuild of nile takes far longer
    expect(existsSync(join(ws.cache, 'journal'))).toBe(false); // no record ran
    expect(existsSync(join(ws.references, 'manifest.json'))).toBe(false);
    expect(existsSync(ws.prepared)).toBe(false); // nothing was prepared
    expect(readFileSync(join(ws.root, 'a-file'), 'utf8')).toBe('keep');
    expect(existsSync(inSource('workflows', 'rebuild.json'))).toBe(false);
  });

  it('the plan schema may still be written into sources/ (where the committed one lives)', async () => {
    const file = inSource('sources', 'schema.json');
    try {
      const outcome = await cliInProcess(['plan-schema', '--out', file], workspace().root);
      expect(outcome.code, outcome.stderr).toBe(0);
      expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(JSON.parse(readFileSync(join(SOURCES_DIR, 'plan.schema.json'), 'utf8')));
    } finally {
      rmSync(file, { force: true });
    }
  });

  it('but never as a sources/*.plan.json, which the catalog (or the worked examples) would read as a construction plan', async () => {
    for (const file of [inSource('sources', 'schema.plan.json'), join(ROOT, 'sources', 'examples', 'wwref-output-test-schema.plan.json')]) {
      const outcome = await cliInProcess(['plan-schema', '--out', file], workspace().root);
      expect(outcome.code).toBe(2);
      expect(outcome.stderr).toMatch(/every sources\/\*\.plan\.json is read as a construction plan/);
      expect(existsSync(file)).toBe(false);
    }
    expect((await cliInProcess(['list'], workspace().root)).code).toBe(0);
  });

  it('diff and report never write into the references they compare (a pack included), nor two outputs to one file', async () => {
    const ws = workspace();
    // the check comes before any work, so a folder standing for the pack compared is enough
    const pack = join(ws.root, 'pack');
    mkdirSync(join(pack, 'references'), { recursive: true });
    writeFileSync(join(pack, 'manifest.json'), '{"files_sha256": {}}\n');
    const refs = join(ROOT, 'outputs', 'references');
    const manifest = readFileSync(join(pack, 'manifest.json'));
    for (const args of [
      ['diff', refs, pack, '--condition', 'nile', '--json', join(pack, 'manifest.json')],
      ['report', '--references', refs, '--condition', 'nile', '--diff-with', pack, '--out', join(pack, 'references', 'nile.json')],
    ]) {
      const outcome = await cliInProcess(args, ws.root);
      expect(outcome.code, args.join(' ')).toBe(2);
      expect(outcome.stderr).toMatch(/is inside .*pack/);
    }
    expect(readFileSync(join(pack, 'manifest.json')).equals(manifest)).toBe(true);
    const same = join(ws.root, 'diff.out');
    const twice = await cliInProcess(['diff', refs, pack, '--condition', 'nile', '--json', same, '--html', same], ws.root);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toMatch(/--json and --html name the same file/);
  });
});

describe('no output replaces what the project is made of (one rule for every --out)', () => {
  it('tracked files, .git, a reference folder, the configuration, the sources: refused, each file unchanged', async () => {
    const ws = workspace();
    const refs = join(ws.root, 'refs-protect');
    writeSurfaceCatalog(refs, [{ condition: 'op_surface', dimensions: 4, utility: (z) => 0.2 + 0.5 * z[0]! }]);
    const at = (name: string) => join(ROOT, name);
    const cases: [string[], string, RegExp][] = [
      [
        ['export', '--references', refs, '--out', at('outputs/current/manifest.json')],
        'outputs/current/manifest.json',
        /a reference folder/,
      ],
      [['report', '--references', refs, '--out', at('wwref.config.json')], 'wwref.config.json', /the project's configuration/],
      [['export', '--references', refs, '--out', at('native/libm-pin/pin.c')], 'native/libm-pin/pin.c', /tracked by git/],
      // .git is a folder in a clone and a file in a worktree: the file checked is HEAD, or the pointer
      [
        ['export', '--references', refs, '--out', at('.git')],
        statSync(at('.git')).isDirectory() ? '.git/HEAD' : '.git',
        /the repository itself/,
      ],
      [['export', '--references', refs, '--out', at('README.md')], 'README.md', /tracked by git/],
      [
        ['plan-schema', '--out', at('sources/wine.plan.json')],
        'sources/wine.plan.json',
        /tracked by git\), which this command did not write/,
      ],
      [['plan-schema', '--out', at('pipelines/cli/main.ts')], 'pipelines/cli/main.ts', /the project's own source/],
      [
        [
          'new-source',
          '--family',
          'clustering',
          '--package',
          'scikit-learn:sklearn/datasets/data/iris.csv',
          '--force',
          '--out',
          at('workflows/families/clustering.py'),
        ],
        'workflows/families/clustering.py',
        /the project's own source/,
      ],
      [['report', '--references', refs, '--figures', at('docs')], 'docs/architecture.md', /a folder holding .*tracked by git/],
      [['effects', '--references', refs, '--out', ROOT], 'README.md', /a folder holding .*tracked by git/],
      // a folder around the repository holds its files too
      [['effects', '--references', refs, '--out', dirname(ROOT)], 'README.md', /a folder holding .*tracked by git/],
      [['export', '--references', refs, '--out', join(refs, 'all.csv')], 'wwref.config.json', /which only wwref itself writes/],
    ];
    for (const [args, file, message] of cases) {
      const before = readFileSync(at(file));
      const outcome = await cliInProcess(args, ws.root);
      refused(outcome, message, args.join(' '));
      expect(readFileSync(at(file)).equals(before), file).toBe(true);
    }
    // a reference folder that is no folder of the settings (a copy of one, anywhere) is recognised by its manifest
    refused(
      await cliInProcess(['export', '--references', refs, '--out', join(refs, 'tables', 'x.csv')], ws.root),
      /inside \S+refs-protect, (a reference folder|which only wwref itself writes)/,
      'inside a reference folder',
    );
  });

  it("the project's runtime is refused too; `link/..` is read as the system reads it (the link's target's parent)", async () => {
    const ws = workspace();
    const refs = join(ws.root, 'refs-runtime');
    writeSurfaceCatalog(refs, [{ condition: 'op_surface', dimensions: 4, utility: (z) => 0.2 + 0.5 * z[0]! }]);
    const export_ = (out: string) => ['export', '--references', refs, '--out', out];
    for (const file of ['node_modules/.package-lock.json', 'dist/build.json', '.venv/pyvenv.cfg']) {
      const before = readFileSync(join(ROOT, file));
      refused(await cliInProcess(export_(join(ROOT, file)), ws.root), /the project's runtime, which only its setup writes/, file);
      expect(readFileSync(join(ROOT, file)).equals(before), file).toBe(true);
    }
    // a link into the sources, then `..`: the system reaches the checkout's root, where the configuration is
    const link = join(ws.root, 'to-pipelines');
    symlinkSync(join(ROOT, 'pipelines'), link);
    const config = readFileSync(join(ROOT, 'wwref.config.json'));
    refused(await cliInProcess(export_(`${link}/../wwref.config.json`), ws.root), /the project's configuration/, 'link/..');
    expect(readFileSync(join(ROOT, 'wwref.config.json')).equals(config)).toBe(true);
    // and an output named through `link/..` is written where the system would put it, not where the text says
    mkdirSync(join(ws.root, 'a', 'b'), { recursive: true });
    symlinkSync(join(ws.root, 'a', 'b'), join(ws.root, 'to-b'));
    const fine = await cliInProcess(export_(`${join(ws.root, 'to-b')}/../all.csv`), ws.root);
    expect(fine.code, fine.stderr).toBe(0);
    expect([existsSync(join(ws.root, 'a', 'all.csv')), existsSync(join(ws.root, 'all.csv'))]).toEqual([true, false]);
  });

  it("the committed plan schema is plan-schema's own output: regenerated in place", async () => {
    const file = join(SOURCES_DIR, 'plan.schema.json');
    const before = readFileSync(file);
    const { mtimeNs } = statSync(file, { bigint: true });
    try {
      const outcome = await cliInProcess(['plan-schema', '--out', file], workspace().root);
      expect(outcome.code, outcome.stderr).toBe(0);
      expect(readFileSync(file).equals(before)).toBe(true);
    } finally {
      writeFileSync(file, before);
      // the repository guard compares modification times: the committed file's is put back, to the nanosecond
      const ns = mtimeNs % 1_000_000_000n;
      await execa('touch', ['-m', '-d', `@${mtimeNs / 1_000_000_000n}.${ns.toString().padStart(9, '0')}`, file]);
    }
  });
});

/**
 * Read-only bind mounts made for one test and always undone: read-only, so that even a check that
 * let a path through, or a recursive removal of the scratch folder, could not change the checkout.
 */
function bindMounts() {
  const scratch = mkdtempSync(join(tmpdir(), 'wwref-binds-'));
  const points: string[] = [];
  return {
    /** `source` shown at a new name (read-only unless told), or undefined where that cannot be made (not root, no mount namespace). */
    bind(source: string, name: string, readOnly = true): string | undefined {
      const point = join(scratch, name);
      mkdirSync(point);
      try {
        execFileSync('mount', ['--bind', source, point], { stdio: 'ignore' });
      } catch {
        rmdirSync(point);
        return undefined;
      }
      try {
        if (readOnly) execFileSync('mount', ['-o', 'remount,bind,ro', point], { stdio: 'ignore' });
      } catch {
        execFileSync('umount', [point], { stdio: 'ignore' }); // never left writable
        rmdirSync(point);
        return undefined;
      }
      points.push(point);
      return point;
    },
    undo(): void {
      for (const point of points.reverse()) {
        execFileSync('umount', [point], { stdio: 'ignore' });
        rmdirSync(point); // never a recursive removal: an empty folder once unmounted
      }
      rmdirSync(scratch);
    },
  };
}

describe('the rule holds under every name of a place (bind mounts, hard links)', () => {
  it('a bind mount of the checkout, a source folder, the git folder or a reference folder, and a hard link: refused, files unchanged', async (ctx) => {
    const ws = workspace();
    const refs = join(ws.root, 'refs-binds');
    writeSurfaceCatalog(refs, [{ condition: 'op_surface', dimensions: 4, utility: (z) => 0.2 + 0.5 * z[0]! }]);
    const mounts = bindMounts();
    try {
      const checkout = mounts.bind(ROOT, 'checkout');
      if (!checkout) return ctx.skip('bind mounts cannot be made here (needs root in a mount namespace): the bind-mount cases are not run');
      const cli = mounts.bind(join(ROOT, 'pipelines', 'cli'), 'cli')!;
      const gitDir = execFileSync('git', ['-C', ROOT, 'rev-parse', '--path-format=absolute', '--git-common-dir'], {
        encoding: 'utf8',
      }).trim();
      const git = mounts.bind(gitDir, 'git')!;
      const references = mounts.bind(join(ROOT, 'outputs', 'references'), 'references')!;
      const export_ = (out: string) => ['export', '--references', refs, '--out', out];
      const cases: [string[], string, RegExp][] = [
        [export_(join(checkout, 'wwref.config.json')), join(ROOT, 'wwref.config.json'), /the project's configuration/],
        [export_(join(checkout, 'README.md')), join(ROOT, 'README.md'), /is \S+\/README\.md, a file of the repository \(tracked by git\)/],
        [
          ['plan-schema', '--out', join(checkout, 'pipelines', 'cli', 'main.ts')],
          join(ROOT, 'pipelines', 'cli', 'main.ts'),
          /the project's own source/,
        ],
        [
          export_(join(checkout, 'outputs', 'current', 'manifest.json')),
          join(ROOT, 'outputs', 'current', 'manifest.json'),
          /a reference folder/,
        ],
        [['effects', '--references', refs, '--out', checkout], join(ROOT, 'README.md'), /a folder holding .*tracked by git/],
        [export_(join(cli, 'main.ts')), join(ROOT, 'pipelines', 'cli', 'main.ts'), /inside \S+\/pipelines, the project's own source/],
        [export_(join(cli, 'new.csv')), join(ROOT, 'pipelines', 'cli', 'main.ts'), /inside \S+\/pipelines, the project's own source/],
        [export_(join(git, 'HEAD')), join(gitDir, 'HEAD'), /the repository itself/],
        [
          export_(join(references, 'manifest.json')),
          join(ROOT, 'outputs', 'references', 'manifest.json'),
          /which only wwref itself writes|a reference folder/,
        ],
      ];
      const link = join(ws.root, 'readme-link');
      try {
        linkSync(join(ROOT, 'README.md'), link);
        cases.push([export_(link), join(ROOT, 'README.md'), /is \S+\/README\.md, a file of the repository \(tracked by git\)/]);
      } catch {
        console.warn('no hard link of README.md could be made in the temporary folder (another file system): that case is not run');
      }
      for (const [args, file, message] of cases) {
        const before = readFileSync(file);
        refused(await cliInProcess(args, ws.root), message, args.join(' '));
        expect(readFileSync(file).equals(before), file).toBe(true);
      }
      expect(existsSync(join(ROOT, 'pipelines', 'cli', 'new.csv'))).toBe(false);

      // where the mount table cannot be read, the folders' device and inode still tell: a real process
      // in a mount namespace of its own with /proc covered
      const hidden = await execa(
        'unshare',
        ['--mount', 'sh', '-c', 'mount -t tmpfs none /proc && exec node "$0" "$@"', BIN, ...export_(join(cli, 'new.csv'))],
        { cwd: ws.root, reject: false },
      );
      if (hidden.exitCode === 2 || !/unshare|mount/.test(String(hidden.stderr)))
        refused(
          { code: hidden.exitCode ?? -1, stdout: String(hidden.stdout), stderr: String(hidden.stderr) },
          /the project's own source/,
          'no mount table',
        );
      else console.warn(`no mount namespace for the no-mount-table case (${String(hidden.stderr).split('\n')[0]}): not run`);

      // a bind mount of a folder of the user's is written as usual
      const own = join(ws.root, 'own');
      mkdirSync(own);
      const shown = mounts.bind(own, 'own', false)!;
      const fine = await cliInProcess(export_(join(shown, 'all.csv')), ws.root);
      expect(fine.code, fine.stderr).toBe(0);
      expect(readFileSync(join(own, 'all.csv'), 'utf8')).toMatch(/^condition,/);
    } finally {
      mounts.undo();
    }
  });
});

describe('the job functions check their own output paths (no command line involved)', () => {
  async function refusal(job: () => unknown): Promise<string> {
    let error: unknown;
    try {
      await job();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }

  it('writeEffects, writeReportFiles, exportCsv, exportPack, rebuild and replay', async () => {
    const ws = workspace();
    const empty = join(ws.root, 'job-no-references');
    mkdirSync(empty, { recursive: true });
    const source = /is inside \S+\/(workflows|pipelines|sources|test|scripts), the project's own source; choose another path$/;
    expect(await refusal(() => writeEffects(currentSettings().paths, [], inSource('workflows', 'job-effects')))).toMatch(
      /^effects folder /,
    );
    expect(await refusal(() => writeEffects(currentSettings().paths, [], inSource('workflows', 'job-effects')))).toMatch(source);
    expect(await refusal(() => writeReportFiles(currentSettings(), { out: inSource('pipelines', 'job.html'), dir: empty }))).toMatch(
      /^report page .*pipelines, the project's own source/,
    );
    expect(await refusal(() => writeReportFiles(currentSettings(), { figures: inSource('sources', 'job-figures'), dir: empty }))).toMatch(
      /^figures folder .*sources, the project's own source/,
    );
    expect(await refusal(() => exportCsv(currentSettings({ references: empty }), inSource('test', 'job.csv'), []))).toMatch(
      /^CSV file .*test, the project's own source/,
    );
    expect(await refusal(() => exportPack(currentSettings(), inSource('scripts', 'job-pack'), [], empty))).toMatch(
      /^pack folder .*scripts, the project's own source/,
    );
    // the reference folder a job reads is protected too
    expect(await refusal(() => exportCsv(currentSettings({ references: empty }), join(empty, 'all.csv'), []))).toMatch(
      /^CSV file .*all\.csv is inside .*job-no-references, which only wwref itself writes/,
    );
    const catalog = Catalog.loadPublished(SOURCES_DIR);
    expect(
      await refusal(() =>
        rebuild(catalog, {
          settings: currentSettings(),
          conditions: ['nile'],
          report: inSource('workflows', 'job-rebuild.json'),
          quiet: true,
        }),
      ),
    ).toMatch(/^rebuild report .*workflows, the project's own source/);
    writeFileSync(join(ws.root, 'job-file'), 'keep');
    expect(
      await refusal(() =>
        rebuild(catalog, { settings: currentSettings(), conditions: ['nile'], report: join(ws.root, 'job-file', 'r.json'), quiet: true }),
      ),
    ).toMatch(/^rebuild report .*job-file is a file, not a folder$/);
    expect(
      await refusal(() =>
        replay({ settings: currentSettings(), referencesDir: empty, report: inSource('pipelines', 'job-replay.json'), quiet: true }),
      ),
    ).toMatch(/^replay report .*pipelines, the project's own source/);
    expect(existsSync(join(ws.cache, 'journal'))).toBe(false);
  });
});
