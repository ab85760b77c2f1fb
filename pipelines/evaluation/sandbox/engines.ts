// The calculation engines: what runs inside the OS sandbox (isolation.ts), which is the same for both.
//
// - `pyodide`: CPython compiled to WebAssembly (the npm package `pyodide`), in node, standard library
//   and wwref_helpers only; its WebAssembly arithmetic gives the same bytes on every CPU.
// - `native`: the project's pinned runtime (.venv: numpy, scipy, scikit-learn at the pinned versions)
//   under the numerical profile, one computation thread; its runner installs a second seccomp filter
//   refusing execve before the code runs, so the code can neither start a process nor replace its own.
import { readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { ROOT, SOURCES_DIR } from '../../core/paths.ts';
import {
  type CalculationLimits,
  INTERPRETER_ROOM,
  SANDBOX_DIR,
  type SandboxedCommand,
  sharedLibraries,
  stateFile,
  type Tools,
} from './isolation.ts';

export const ENGINE_NAMES = ['pyodide', 'native'] as const;
export type EngineName = (typeof ENGINE_NAMES)[number];

export const PYODIDE_RUNNER = join(SANDBOX_DIR, 'runner.mjs');
export const NATIVE_RUNNER = join(SANDBOX_DIR, 'runner.py');
export const HELPERS = join(SANDBOX_DIR, 'wwref_helpers.py');
/** The benchmark's public helpers (native engine), on the project's own estimators in workflows/evaluation/. */
export const PUBLIC_HELPERS = join(SANDBOX_DIR, 'wwb_helpers.py');
/** The project's Python package, bound read-only for wwb_helpers (its estimators are the controls'). */
const WORKFLOWS = join(ROOT, 'workflows');
/** Largest file a native calculation may write: the benchmark's RLIMIT_FSIZE, 2 MB. */
export const NATIVE_FILE_BYTES = 2_000_000;
/** The benchmark's address-space limit, 2 GB: the native engine's memory limit in an episode. */
export const NATIVE_MEMORY_BYTES = 2_000_000_000;

const JS_HEAP_MIB = 384;

/** An engine: how one call's interpreter is bound and started in the sandbox. */
export interface Engine {
  name: EngineName;
  /** The command for one call (the snapshot is the Pyodide engine's, made by snapshot.ts). */
  command(tools: Tools, limits: CalculationLimits, options?: { snapshot?: string; nodePermissions?: boolean }): SandboxedCommand;
  /** Whether the call starts from an interpreter snapshot (snapshot.ts). */
  snapshots: boolean;
}

const readOnly = (paths: string[]) => paths.flatMap((path) => ['--ro-bind', path, path]);

let pyodideFiles: { node: string; libraries: string[]; pyodide: string } | undefined;

/** Node, the libraries it loads and the pyodide package (found once). */
export function pyodideInstall(): { node: string; libraries: string[]; pyodide: string } {
  if (pyodideFiles) return pyodideFiles;
  let pyodide: string;
  try {
    pyodide = dirname(createRequire(import.meta.url).resolve('pyodide/package.json'));
  } catch {
    throw new UserError("the npm package 'pyodide' is not installed (npm ci)");
  }
  const node = realpathSync(process.execPath);
  pyodideFiles = { node, libraries: sharedLibraries([node]), pyodide };
  return pyodideFiles;
}

/** Pyodide in node: node's permission model as an inner layer, Python's WebAssembly memory capped. */
export const pyodideEngine: Engine = {
  name: 'pyodide',
  snapshots: true,
  command(_tools, limits, options = {}) {
    const { node, libraries, pyodide } = pyodideInstall();
    const nodePermissions = options.nodePermissions ?? true;
    const wasmPages = Math.min(65536, Math.floor((limits.memoryBytes - INTERPRETER_ROOM) / 65536));
    return {
      binds: [
        ...readOnly([node, ...libraries]),
        ...[
          '--ro-bind',
          pyodide,
          '/sbx/pyodide',
          '--ro-bind',
          PYODIDE_RUNNER,
          '/sbx/runner.mjs',
          '--ro-bind',
          HELPERS,
          '/sbx/wwref_helpers.py',
        ],
        ...(options.snapshot ? ['--ro-bind', options.snapshot, '/sbx/snapshot'] : []),
      ],
      environment: {},
      scratch: ['/scratch'],
      command: [
        node,
        // Node's permission model on top: no child processes, no worker threads, no native addons, files
        // read only under /sbx and /scratch, written only under /scratch. The OS layer holds without it.
        ...(nodePermissions
          ? ['--experimental-permission', '--allow-fs-read=/sbx/*', '--allow-fs-read=/scratch/*', '--allow-fs-write=/scratch/*']
          : []),
        '--no-warnings',
        `--max-old-space-size=${JS_HEAP_MIB}`,
        // V8's baseline WebAssembly compiler only: the optimising tier spent about 0.6 s of every call
        // recompiling the interpreter's hot functions, and measured no faster on a multi-second ridge fit
        '--liftoff-only',
        // Python's WebAssembly memory stops growing here: an allocation past it is Python's MemoryError
        `--wasm-max-mem-pages=${wasmPages}`,
        '/sbx/runner.mjs',
      ],
    };
  },
};

/** The pinned runtime as the native engine sees it: its interpreter, environment and files. */
export interface NativeRuntime {
  /** The runtime's python (the virtual environment's `bin/python`). */
  python: string;
  /** Variables of every Python process of the project (execution/launcher.ts pythonEnvironment). */
  environment: Readonly<Record<string, string>>;
}

let nativeFiles: { key: string; binds: string[] } | undefined;

/** Everything the runtime's interpreter reads: the environment, its base installation, their libraries. */
function nativeBinds(runtime: NativeRuntime): string[] {
  const venv = dirname(dirname(runtime.python));
  const base = dirname(dirname(realpathSync(runtime.python)));
  const preload = (runtime.environment.LD_PRELOAD ?? '').split(/[\s:]+/).filter(Boolean);
  const key = JSON.stringify([venv, base, preload]);
  if (nativeFiles?.key === key) return nativeFiles.binds;
  // every compiled module of the runtime, so that what any import loads from the system is bound
  const compiled: string[] = [realpathSync(runtime.python), ...preload];
  for (const root of [join(venv, 'lib'), join(base, 'lib')])
    for (const entry of readdirSync(root, { recursive: true, encoding: 'utf8' }))
      if (/\.so(\.\d+)*$/.test(entry)) compiled.push(join(root, entry));
  const system = sharedLibraries(compiled).filter((path) => !path.startsWith(`${venv}/`) && !path.startsWith(`${base}/`));
  // an empty regular file over each (a device such as /dev/null cannot be opened where it is bound)
  const empty = stateFile('empty', Buffer.alloc(0), '');
  const emptied = packageData(venv).flatMap((file) => ['--ro-bind', empty, file]);
  nativeFiles = { key, binds: [...readOnly([venv, base, ...preload, ...system]), ...emptied] };
  return nativeFiles.binds;
}

/** The folders of the pinned packages holding data files that are the sources' raw data or copies of it (sklearn's wine and breast-cancer tables). */
const DATA_FOLDERS = ['sklearn/datasets/data'];

/**
 * The data files a calculation sees empty: every file but Python code in the folders of the pinned
 * packages that hold a source's raw file (its plan's `package.path`: statsmodels' datasets, scikit-image's
 * images) and in DATA_FOLDERS. With them, the code and the pinned packages a calculation has would
 * rebuild a condition's reference table (a red team did, for wine); imports are untouched.
 */
function packageData(venv: string): string[] {
  let sitePackages: string[];
  try {
    sitePackages = readdirSync(join(venv, 'lib'))
      .filter((name) => name.startsWith('python'))
      .map((name) => join(venv, 'lib', name, 'site-packages'));
  } catch {
    return [];
  }
  const folders = new Set(DATA_FOLDERS);
  for (const plan of readdirSync(SOURCES_DIR).filter((name) => name.endsWith('.plan.json'))) {
    const raw = (JSON.parse(readFileSync(join(SOURCES_DIR, plan), 'utf8')) as { raw_files?: { package?: { path?: unknown } }[] }).raw_files;
    for (const file of raw ?? []) if (typeof file.package?.path === 'string') folders.add(dirname(file.package.path));
  }
  const files: string[] = [];
  for (const root of sitePackages)
    for (const folder of folders) {
      let entries: string[];
      try {
        entries = readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' });
      } catch {
        continue; // not installed in this runtime
      }
      for (const entry of entries) {
        const file = join(root, folder, entry);
        if (!/\.(py|pyc|pyi|so)$/.test(entry) && !entry.split('/').includes('__pycache__') && statSync(file).isFile()) files.push(file);
      }
    }
  return files.sort();
}

/** The pinned runtime, one computation thread, execve refused before the code runs. */
export function nativeEngine(runtime: NativeRuntime): Engine {
  return {
    name: 'native',
    snapshots: false,
    command(tools, limits) {
      return {
        binds: [
          ...nativeBinds(runtime),
          ...['--ro-bind', NATIVE_RUNNER, '/sbx/runner.py', '--ro-bind', tools.noExecFilter, '/sbx/seccomp-noexec.bpf'],
          // the helpers: wwb_helpers (copied into the working folder by the runner) and wwref_helpers on
          // the path, over the project's own package
          ...['--ro-bind', PUBLIC_HELPERS, '/sbx/wwb_helpers.py', '--ro-bind', HELPERS, '/sbx/lib/wwref_helpers.py'],
          // workflows.masks reads contracts/ beside the package when it loads
          ...['--ro-bind', WORKFLOWS, '/sbx/lib/workflows', '--ro-bind', join(ROOT, 'contracts'), '/sbx/lib/contracts'],
          ...['--dev-bind', '/dev/null', '/dev/null'],
        ],
        environment: { ...runtime.environment, PYTHONDONTWRITEBYTECODE: '1', PYTHONNOUSERSITE: '1', LANG: 'C.UTF-8', TZ: 'UTC' },
        // the benchmark's working folder was /job (published code opens /job/evidence.json)
        scratch: ['/job', '/tmp'],
        command: [runtime.python, '-B', '-s', '/sbx/runner.py'],
        // the address space is the memory limit: every mapping counts, shared ones included
        addressSpace: limits.memoryBytes,
        fileBytes: NATIVE_FILE_BYTES,
      };
    },
  };
}
