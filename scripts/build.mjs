// The build of the command line, so that no TypeScript is compiled when a command starts: esbuild
// bundles pipelines/cli/main.ts into dist/ (ignored by git) as one entry and chunks that the commands
// load when they need them (`await import(...)`), packages left external but Apache Arrow (BUNDLED).
// `npm ci` runs it through the `prepare` script; bin/wwref.mjs runs the build only while it matches
// the sources (builtEntry) and builds again first when it does not, so a stale build never runs and
// an edited source takes effect at the next command.
//   node scripts/build.mjs           (npm run build) builds dist/ and prints the entry
// Plain JavaScript: it runs before anything can compile TypeScript. esbuild is called through its API
// (its own install script is not run: package.json's allowScripts).
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, extname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** What the build depends on besides the bundled sources: this script and the compiler options esbuild reads. */
const EXTRA_INPUTS = ['scripts/build.mjs', 'tsconfig.json', 'package.json'];
const STAMP = 'build.json';
/** Output files of earlier builds are removed once this old: a process started before may still load their chunks. */
const PRUNE_AFTER_MS = 24 * 3600 * 1000;
/**
 * Packages bundled into the build rather than imported from node_modules at run time. Apache Arrow is
 * some 160 modules: Node takes about twice as long to load them as one tree-shaken file. It shares no
 * objects with other packages. zod stays a package: the MCP SDK must see the same zod as our schemas.
 */
const BUNDLED = new Set(['apache-arrow']);

/** esbuild plugin: every package is external except BUNDLED ones (and what they import). */
const externalPackages = {
  name: 'external-packages',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:')) return { external: true };
      const name = args.path.startsWith('@') ? args.path.split('/').slice(0, 2).join('/') : args.path.split('/')[0];
      // an importer inside node_modules belongs to a bundled package: its own imports are bundled too
      if (BUNDLED.has(name) || args.importer.includes(`${sep}node_modules${sep}`)) return undefined;
      return { external: true };
    });
  },
};

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

/**
 * The entry of the build in `root`/dist when it was built from exactly the files there are now, else
 * undefined. A file whose size and modification time are as recorded is taken as unchanged (as git
 * does); any other is hashed, so a checkout that only touched a file does not force a rebuild.
 */
export function builtEntry(root = ROOT) {
  const dist = join(root, 'dist');
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(join(dist, STAMP), 'utf8'));
  } catch {
    return undefined;
  }
  if (stamp?.version !== 1 || typeof stamp.entry !== 'string' || typeof stamp.inputs !== 'object') return undefined;
  for (const [file, recorded] of Object.entries(stamp.inputs)) {
    let stat;
    try {
      stat = statSync(join(root, file));
    } catch {
      return undefined; // a source was removed or renamed
    }
    if (stat.size === recorded.size && stat.mtimeMs === recorded.mtimeMs) continue;
    if (stat.size !== recorded.size || sha256(readFileSync(join(root, file))) !== recorded.sha256) return undefined;
  }
  const entry = join(dist, stamp.entry);
  try {
    statSync(entry);
  } catch {
    return undefined;
  }
  return entry;
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
 * Builds dist/ in `root` and returns the entry's path. Every file lies two folders below the root
 * (dist/cli, dist/chunks), as its source does (pipelines/<stage>/): core/paths.ts finds the
 * repository root from its own location. Safe to run in several processes at once.
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
        return { contents, loader: LOADERS[extname(args.path)] ?? 'js' };
      });
    },
  };
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: { main: 'pipelines/cli/main.ts' },
    entryNames: 'cli/[name]-[hash]',
    chunkNames: 'chunks/[name]-[hash]',
    outdir: dist,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    plugins: [externalPackages, recordInputs],
    metafile: true,
    write: false,
    logLevel: 'silent',
  });
  const keep = new Set();
  for (const file of result.outputFiles) {
    writeOnce(file.path, file.contents);
    keep.add(file.path);
  }
  const entry = Object.entries(result.metafile.outputs).find(([, output]) => output.entryPoint === 'pipelines/cli/main.ts')?.[0];
  if (!entry) throw new Error('esbuild produced no entry for pipelines/cli/main.ts');
  const entryPath = resolve(root, entry);
  const stamp = { version: 1, entry: relative(dist, entryPath), esbuild: esbuild.version, inputs: sortedKeys(inputs) };
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
  const chunks = readdirSync(join(ROOT, 'dist', 'chunks')).length;
  process.stdout.write(`built ${relative(ROOT, entry)} (${statSync(entry).size} bytes; ${chunks} chunks in dist/chunks)\n`);
}
