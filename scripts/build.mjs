// The build of the command line, so that no TypeScript is compiled when a command starts: esbuild
// bundles pipelines/cli/main.ts, with the packages it uses (all but EXTERNAL), into one CommonJS file
// in dist/cli (dist/ is ignored by git). Each command's work is still loaded only when it runs: an
// `await import(...)` of the sources becomes code that the bundle evaluates on first use. One file
// rather than ESM chunks, because V8 can keep the compiled code of a script between runs and not of
// an ES module on Node 20 (scripts/code-cache.mjs).
// `npm ci` runs it through the `prepare` script; bin/wwref.mjs runs the build only while it matches
// the sources (build-stamp.mjs) and builds again first when it does not, so a stale build never runs
// and an edited source takes effect at the next command.
//   node scripts/build.mjs           (npm run build) builds dist/ and prints the entry
// Plain JavaScript: it runs before anything can compile TypeScript. esbuild is called through its API
// (its own install script is not run: package.json's allowScripts).
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { STAMP, STAMP_VERSION, sha256 } from './build-stamp.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** What the build depends on besides the bundled sources: this script and the compiler options esbuild reads. */
const EXTRA_INPUTS = ['scripts/build.mjs', 'scripts/build-stamp.mjs', 'scripts/code-cache.mjs', 'tsconfig.json', 'package.json'];
/** Output files of earlier builds (and their code caches) are removed once this old: a process started before may still read them. */
const PRUNE_AFTER_MS = 24 * 3600 * 1000;
/**
 * Packages imported from node_modules at run time rather than bundled: Pyodide finds its WebAssembly
 * and standard library beside its own files; esbuild and tsx are the build's and the sources' tools.
 * Every other package is bundled: Node loads one file of a bundle in a fraction of the time it takes
 * to resolve and compile a package's many small modules (yargs and zod at start: 0.26 s of CPU against
 * 0.09 s bundled). There is one copy of each package in the bundle: the MCP SDK sees our schemas'
 * zod, as it must.
 */
const EXTERNAL = new Set(['pyodide', 'esbuild', 'tsx']);

/** esbuild plugin: the EXTERNAL packages and Node's own modules stay imports; everything else is bundled. */
const externalPackages = {
  name: 'external-packages',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:')) return { external: true };
      const name = args.path.startsWith('@') ? args.path.split('/').slice(0, 2).join('/') : args.path.split('/')[0];
      return EXTERNAL.has(name) ? { external: true } : undefined;
    });
  },
};

/**
 * esbuild plugin: every `import stringWidth from 'string-width'` (yargs' help layout: cliui, wrap-ansi)
 * gets the package's function behind a shortcut: a string of printable ASCII only is as wide as it
 * is long (one column a character, which string-width computes through its Unicode rules: segmenting
 * into graphemes, emoji regular expressions, East Asian widths). Those rules cost some 40 ms of every
 * command that lays out a help text (`--help`, any command with subcommands), and building them some
 * 13 ms of every command; any other string (`--help` has a few: ×, …) still goes to string-width,
 * loaded then. test/cli/startup.test.ts checks the shortcut's premise on the installed copies, and
 * that the build prints what the sources print.
 */
const asciiStringWidth = {
  name: 'ascii-string-width',
  setup(build) {
    const real = 'the package itself';
    build.onResolve({ filter: /^string-width$/ }, async (args) => {
      if (args.pluginData === real) return undefined;
      const resolved = await build.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: real,
      });
      if (resolved.errors.length) return { errors: resolved.errors };
      return { path: resolved.path, namespace: 'ascii-string-width' };
    });
    // the package is required on first use, not imported: esbuild then evaluates it only if a string
    // needs it, and its Unicode regular expressions (some 13 ms at start) are never built for ASCII
    build.onLoad({ filter: /.*/, namespace: 'ascii-string-width' }, (args) => ({
      contents:
        'const PRINTABLE_ASCII = /^[\\x20-\\x7e]*$/;\n' +
        'let stringWidth;\n' +
        'export default (string, options) => (typeof string === "string" && PRINTABLE_ASCII.test(string) ? string.length : ' +
        `(stringWidth ??= require(${JSON.stringify(args.path)}).default)(string, options));\n`,
      resolveDir: dirname(args.path),
      loader: 'js',
    }));
  },
};

/**
 * The bundle's first lines: where the repository is (the bundle lies in dist/cli, two folders below
 * it, as its sources lie in pipelines/<stage>/), read before any bundled module can shadow
 * `__dirname`, and the URL of a file of the repository, which stands for `import.meta.url`.
 */
const BANNER =
  "var __wwrefRoot = require('node:path').join(__dirname, '..', '..');\n" +
  "var __wwrefFileUrl = (file) => require('node:url').pathToFileURL(require('node:path').join(__wwrefRoot, file)).href;";

/**
 * The text esbuild compiles of a module: `import.meta.url` (which a CommonJS bundle has not) still
 * names the module's own file, so core/paths.ts finds the repository and yargs its locales and, for
 * --version, the program's package.json. A package's CommonJS `__dirname` or `__filename` has no such
 * stand-in (it would name dist/cli): the build stops rather than produce code that fails when that
 * path runs. So does any other use of `import.meta` in the sources.
 */
function moduleText(root, path, contents) {
  const text = contents.toString('utf8');
  const file = relative(root, path).split(sep).join('/');
  const inPackage = path.includes(`${sep}node_modules${sep}`);
  if (inPackage && /\b__(dirname|filename)\b/.test(text) && !/\b(var|let|const)\s+__(dirname|filename)\b/.test(text))
    throw new Error(`${file} uses __dirname or __filename: it cannot be bundled (add its package to EXTERNAL)`);
  if (!text.includes('import.meta')) return contents;
  const replaced = text.replaceAll('import.meta.url', `__wwrefFileUrl(${JSON.stringify(file)})`);
  if (!inPackage && replaced.includes('import.meta'))
    throw new Error(`${file} uses import.meta beyond import.meta.url, which the bundle cannot give it`);
  return replaced;
}

/**
 * The bundle as ASCII, so that code-cache.mjs reads it as Latin-1, a copy of its bytes, rather than
 * decoding UTF-8 (some 10 ms of each start for 2.8 MB). esbuild writes every string and name of the
 * code in ASCII (escapes: its default charset); what it leaves are a few comments it keeps (…, —,
 * emoji) and the characters of regular expressions it cannot escape without changing them. Each
 * UTF-16 unit of those is written as \uXXXX: the one escape that means the same in a string, a
 * comment and a regular expression with or without the u flag (\u{…} in a regular expression without
 * it matches the letter u and the digits: a class [−] became one that took u, 1 and 2).
 */
function asciiOnly(text) {
  return Buffer.from(
    text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
    'latin1',
  );
}

/** Writes `bytes` to `path` unless the file is there already (names carry a content hash): a temporary file renamed, so a reader never sees half of it. */
function writeOnce(path, bytes) {
  try {
    if (statSync(path).size === bytes.length) return;
  } catch {
    // not written yet
  }
  mkdirSync(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.${Date.now()}.tmp`;
  writeFileSync(temporary, bytes);
  renameSync(temporary, path);
}

/** Removes the output files of older builds, once old enough that no process still loads them. */
function prune(dist, keep) {
  for (const folder of ['cli', 'chunks']) {
    // chunks/: the ES module chunks of builds before the bundle
    let names = [];
    try {
      names = readdirSync(join(dist, folder));
    } catch {
      continue;
    }
    for (const name of names) {
      const path = join(dist, folder, name);
      if (keep.has(path)) continue;
      try {
        if (Date.now() - statSync(path).mtimeMs > PRUNE_AFTER_MS) rmSync(path, { force: true });
      } catch {
        // removed by another build meanwhile
      }
    }
  }
}

/** What the stamp records of a file: its size and modification time as seen before it was read, and the sha256 of what was read. */
function fileRecord(path) {
  const stat = statSync(path);
  const contents = readFileSync(path);
  return { record: { size: stat.size, mtimeMs: stat.mtimeMs, sha256: sha256(contents) }, contents };
}

const LOADERS = { '.ts': 'ts', '.mjs': 'js', '.js': 'js', '.cjs': 'js', '.json': 'json' };

/**
 * Builds dist/ in `root` and returns the entry's path (dist/cli/main-<hash>.cjs, the hash of its
 * contents). Safe to run in several processes at once.
 */
export async function build(root = ROOT) {
  const esbuild = await import('esbuild');
  const dist = join(root, 'dist');
  // The stamp records exactly the bytes esbuild compiled: a file edited during the build shows as changed.
  const inputs = {};
  for (const file of EXTRA_INPUTS) inputs[file] = fileRecord(join(root, file)).record;
  const recordInputs = {
    name: 'record-inputs',
    setup(build) {
      build.onLoad({ filter: /.*/ }, (args) => {
        const { record, contents } = fileRecord(args.path);
        inputs[relative(root, args.path).split(sep).join('/')] = record;
        return { contents: moduleText(root, args.path, contents), loader: LOADERS[extname(args.path)] ?? 'js' };
      });
    },
  };
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: { main: 'pipelines/cli/main.ts' },
    entryNames: 'cli/[name]-[hash]',
    outExtension: { '.js': '.cjs' },
    outdir: dist,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    banner: { js: BANNER },
    plugins: [externalPackages, asciiStringWidth, recordInputs],
    metafile: true,
    write: false,
    logLevel: 'silent',
  });
  // The bundle runs as a vm.Script (code-cache.mjs), where V8 refuses a dynamic import() at run time:
  // every import() of the sources must be of a module the bundle holds (esbuild turns it into a require)
  const dynamic = Object.entries(result.metafile.inputs).flatMap(([file, input]) =>
    input.imports.filter((i) => i.kind === 'dynamic-import' && i.external).map((i) => `${file}: import('${i.path}')`),
  );
  if (dynamic.length)
    throw new Error(`the bundle cannot keep a dynamic import() of a module outside it: ${dynamic.join(', ')} (import it statically)`);
  const keep = new Set();
  for (const file of result.outputFiles) {
    writeOnce(file.path, asciiOnly(file.text));
    keep.add(file.path);
  }
  const entry = Object.entries(result.metafile.outputs).find(([, output]) => output.entryPoint === 'pipelines/cli/main.ts')?.[0];
  if (!entry) throw new Error('esbuild produced no entry for pipelines/cli/main.ts');
  const entryPath = resolve(root, entry);
  const stamp = { version: STAMP_VERSION, entry: relative(dist, entryPath), esbuild: esbuild.version, inputs: sortedKeys(inputs) };
  writeFileSync(join(dist, 'metafile.json'), JSON.stringify(result.metafile));
  const temporary = join(dist, `${STAMP}.${process.pid}.tmp`);
  writeFileSync(temporary, `${JSON.stringify(stamp, null, 1)}\n`);
  renameSync(temporary, join(dist, STAMP));
  prune(dist, keep);
  return entryPath;
}

const sortedKeys = (object) => Object.fromEntries(Object.entries(object).sort(([a], [b]) => (a < b ? -1 : 1)));

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const entry = await build();
  process.stdout.write(`built ${relative(ROOT, entry)} (${statSync(entry).size} bytes)\n`);
}
