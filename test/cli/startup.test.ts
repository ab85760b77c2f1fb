// The command line's start (bin/wwref.mjs, scripts/build.mjs): it runs the esbuild build in dist/ only
// while the build matches the sources, builds again when a source changed (a stale build never runs),
// falls back to the sources through tsx when no build can be made, and the build's start loads no
// package but yargs and zod, bundled (each command loads its work when it runs: pipelines/cli/README.md).
// Everything runs as real processes in a temporary copy of the repository's code (node_modules linked),
// so the repository's own dist/ is never touched; the timings are scripts/bench.ts --section startup's.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';

let root: string;

function wwref(args: string[], env: Record<string, string> = {}, cwd = root) {
  const result = spawnSync(process.execPath, [join(root, 'bin', 'wwref.mjs'), ...args], {
    cwd,
    env: { ...process.env, WWREF_FROM_SOURCES: '', ...env },
    encoding: 'utf8',
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const stamp = () =>
  JSON.parse(readFileSync(join(root, 'dist', 'build.json'), 'utf8')) as { entry: string; inputs: Record<string, unknown> };

interface Metafile {
  inputs: Record<string, { imports: { path: string; kind: string; external?: boolean }[] }>;
}

/** The package a file in node_modules belongs to (the innermost node_modules), else undefined. */
function packageOf(input: string): string | undefined {
  return /.*node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)?.[1];
}

/**
 * What the bundle evaluates at start: the modules main.ts imports, followed through their static
 * imports and requires but not their `await import(...)`, which the bundle evaluates on first use.
 * Returns the packages left to node_modules among them, the packages bundled and the source files.
 */
function loadedAtStart(meta: Metafile) {
  const inputs = new Set<string>();
  const imported = new Set<string>();
  const visit = (input: string) => {
    if (inputs.has(input)) return;
    inputs.add(input);
    for (const { path, kind, external } of meta.inputs[input]?.imports ?? []) {
      if (kind === 'dynamic-import') continue;
      if (external) {
        if (!path.startsWith('node:') && !builtinModules.includes(path)) imported.add(path);
      } else visit(path);
    }
  };
  visit('pipelines/cli/main.ts');
  const bundled = new Set([...inputs].map(packageOf).filter((p) => p !== undefined));
  return { imported: [...imported].sort(), bundled: [...bundled].sort(), inputs: [...inputs] };
}

/** `names` and every package they depend on, as installed (package.json's dependencies, followed). */
function dependencyClosure(names: string[]): string[] {
  const found = new Map<string, string>(); // folder -> package name
  const visit = (name: string, from: string) => {
    // the copy Node would load from `from`: its own node_modules first, then the top level
    const nested = join(from, 'node_modules', name);
    const folder = existsSync(join(nested, 'package.json')) ? nested : join(ROOT, 'node_modules', name);
    if (found.has(folder)) return;
    found.set(folder, name);
    const { dependencies = {} } = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    for (const dependency of Object.keys(dependencies)) visit(dependency, folder);
  };
  for (const name of names) visit(name, ROOT);
  return [...new Set(found.values())].sort();
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'wwref-startup-'));
  for (const item of [
    'pipelines',
    'bin',
    'scripts/build.mjs',
    'scripts/build-stamp.mjs',
    'scripts/code-cache.mjs',
    'contracts',
    'workflows',
    'package.json',
    'tsconfig.json',
    'wwref.config.json',
  ]) {
    cpSync(join(ROOT, item), join(root, item), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('the build of the command line', () => {
  it('is made on first use, prints what the sources print, and loads no package but yargs and zod (bundled) at start', () => {
    const first = wwref(['--help']);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('Commands:');
    expect(statSync(join(root, 'dist', stamp().entry)).isFile()).toBe(true);
    // the same text from the sources through tsx
    const fromSources = wwref(['--help'], { WWREF_FROM_SOURCES: '1' });
    expect(fromSources.code).toBe(0);
    expect(fromSources.stdout).toBe(first.stdout);

    const start = loadedAtStart(JSON.parse(readFileSync(join(root, 'dist', 'metafile.json'), 'utf8')) as Metafile);
    expect(start.imported).toEqual([]);
    // what is bundled is yargs and zod with what they depend on: not Arrow, the MCP SDK, execa
    const allowed = dependencyClosure(['yargs', 'zod']);
    expect(allowed).toEqual(expect.arrayContaining(['cliui', 'string-width', 'yargs', 'yargs-parser', 'zod']));
    expect(start.bundled.filter((p) => !allowed.includes(p))).toEqual([]);
    expect(start.bundled).toEqual(expect.arrayContaining(['yargs', 'zod']));
    expect(start.inputs.filter((i) => /pipelines\/(jobs|analysis|evaluation|execution\/local|references\/store)/.test(i))).toEqual([]);
    // zod imported as a namespace everywhere (`import * as z`): the bundle holds its English messages,
    // not the forty other locales that `import { z }` keeps
    const bundle = JSON.parse(readFileSync(join(root, 'dist', 'metafile.json'), 'utf8')) as {
      outputs: Record<string, { inputs: Record<string, unknown> }>;
    };
    const locales = Object.values(bundle.outputs).flatMap((o) =>
      Object.keys(o.inputs).filter((i) => /zod\/v4\/locales\/(?!en\.js|index\.js)/.test(i)),
    );
    expect(locales).toEqual([]);
  });

  it('lays out a help text as the sources do, and finds its version from any folder', async () => {
    // the build's shortcut in string-width (scripts/build.mjs): printable ASCII is one column a
    // character in every installed copy, as string-width itself computes it
    const modules = join(ROOT, 'node_modules');
    const copies = [
      join(modules, 'string-width'),
      ...readdirSync(modules).map((name) => join(modules, name, 'node_modules', 'string-width')),
    ];
    const installed = copies.filter((folder) => existsSync(join(folder, 'package.json')));
    expect(installed.length).toBeGreaterThan(0);
    const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i));
    for (const folder of installed) {
      const { main = 'index.js', exports } = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as {
        main?: string;
        exports?: unknown;
      };
      const file = typeof exports === 'string' ? exports : (((exports as Record<string, unknown>)?.default as string) ?? main);
      const { default: stringWidth } = (await import(pathToFileURL(join(folder, file)).href)) as { default: (s: string) => number };
      expect(
        printable.filter((c) => stringWidth(c) !== 1),
        folder,
      ).toEqual([]);
      expect(stringWidth(printable.join('')), folder).toBe(printable.length);
    }
    const built = wwref(['episode', '--help']);
    expect(built.code).toBe(0);
    expect(built.stdout).toContain('a budgeted episode');
    expect(wwref(['episode', '--help'], { WWREF_FROM_SOURCES: '1' }).stdout).toBe(built.stdout);
    // yargs finds the program's package.json from its own file's place, bundled or not
    const version = wwref(['--version'], {}, tmpdir());
    expect(version.stderr).toBe('');
    expect(version.stdout.trim()).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
  });

  it("keeps V8's compiled code of each command beside the bundle, and compiles afresh when the cache is not V8's", () => {
    const run = () => wwref(['families', '--family', 'regression']);
    const first = run();
    expect(first.code).toBe(0);
    const cache = `${join(root, 'dist', stamp().entry)}.${process.version}-${process.arch}.families.v8cache`;
    const written = readFileSync(cache);
    expect(written.length).toBeGreaterThan(0);
    // written through a temporary of its own (<cache>.<pid>.<random>.tmp, created new), none left behind
    expect(readdirSync(dirname(cache)).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    // used as it is: the same output, the file left alone (a cache V8 refused would be written anew, a new file)
    const inode = statSync(cache).ino;
    expect(run().stdout).toBe(first.stdout);
    expect(statSync(cache).ino).toBe(inode);
    expect(readFileSync(cache).equals(written)).toBe(true);
    // a cache V8 refuses (not of this source, or damaged) changes nothing but the time: replaced
    writeFileSync(cache, Buffer.alloc(written.length, 7));
    const again = run();
    expect(again.stderr).toBe('');
    expect(again.stdout).toBe(first.stdout);
    expect(readFileSync(cache).equals(Buffer.alloc(written.length, 7))).toBe(false);
    // a run that fails (an unknown command, exit 2) leaves no cache
    expect(wwref(['no-such-command']).code).toBe(2);
    expect(existsSync(cache.replace('.families.', '.no-such-command.'))).toBe(false);
  });

  it('is built again, before it runs, when a source changed; a file only touched keeps it', () => {
    const file = join(root, 'pipelines', 'cli', 'commands', 'catalog', 'families.ts');
    const text = readFileSync(file, 'utf8');
    const before = stamp().entry;

    writeFileSync(file, text.replace("describe: 'print the workflow families", "describe: 'PRINT the workflow families"));
    const edited = wwref(['--help']);
    expect(edited.code).toBe(0);
    expect(edited.stdout).toContain('PRINT the workflow families');
    expect(stamp().entry).not.toBe(before);

    writeFileSync(file, text);
    expect(wwref(['--help']).stdout).not.toContain('PRINT the workflow families');
    const rebuilt = statSync(join(root, 'dist', 'build.json')).mtimeMs;
    // a new modification time over the same bytes (a checkout, a touch): hashed, found equal, not rebuilt
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    expect(wwref(['families', '--family', 'regression']).code).toBe(0);
    expect(statSync(join(root, 'dist', 'build.json')).mtimeMs).toBe(rebuilt);
    expect(stamp().entry).toBe(before);
  });

  it('is made by `npm run build` (what `npm ci` runs) and is run as it is', () => {
    rmSync(join(root, 'dist'), { recursive: true, force: true });
    const said = execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, encoding: 'utf8' });
    expect(said).toMatch(/^built dist\/cli\/main-\w+\.cjs /);
    const built = statSync(join(root, 'dist', 'build.json')).mtimeMs;
    const version = wwref(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
    expect(statSync(join(root, 'dist', 'build.json')).mtimeMs).toBe(built);
  });

  it('when no build can be made, runs from the sources and says so in one line', () => {
    rmSync(join(root, 'dist'), { recursive: true, force: true });
    writeFileSync(join(root, 'dist'), 'a file where the build folder would be\n');
    try {
      const result = wwref(['families', '--family', 'regression']);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('regression');
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(
        /^wwref: the build in dist\/ is missing or stale and could not be made \(.+\); running from the sources\n$/,
      );
    } finally {
      rmSync(join(root, 'dist'), { force: true });
    }
  });
});
