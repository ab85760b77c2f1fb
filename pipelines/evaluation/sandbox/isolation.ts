// The OS sandbox of one calculation: the bubblewrap command line (namespaces, read-only binds of exactly
// the files the interpreter needs, a private size-limited scratch tmpfs), the resource limits given to
// the kernel (prlimit) and to Node/V8, and whether such a sandbox can be made on this machine at all.
import { spawnSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { ROOT } from '../../core/paths.ts';

// from the checkout's root, not this module's URL: the built command line runs this code from dist/chunks/
export const SANDBOX_DIR = join(ROOT, 'pipelines', 'evaluation', 'sandbox');
export const RUNNER = join(SANDBOX_DIR, 'runner.mjs');
export const HELPERS = join(SANDBOX_DIR, 'wwref_helpers.py');

const MIB = 1024 * 1024;

/** Limits of one calculation. Defaults as the benchmark's harness: 30 CPU seconds, 45 wall seconds. */
export interface CalculationLimits {
  /** CPU seconds of everything the call started, summed. */
  cpuSeconds: number;
  wallSeconds: number;
  /** Resident memory of everything the call started, summed (bytes). */
  memoryBytes: number;
  /** Bytes kept of stdout and of stderr, each; the call ends when either goes past it. */
  outputBytes: number;
}

export const DEFAULT_LIMITS: CalculationLimits = { cpuSeconds: 30, wallSeconds: 45, memoryBytes: 2048 * MIB, outputBytes: 64 * 1024 };

/** Room left to Node itself (its code, V8's heap, Pyodide's JavaScript) beside Python's WebAssembly memory. */
const NODE_ROOM = 512 * MIB;
const JS_HEAP_MIB = 384;
const SCRATCH_BYTES = 64 * MIB;
const MAX_FILES = 256;
/**
 * The kernel's limit on the interpreter's data (RLIMIT_DATA: its private writable memory, WebAssembly
 * memory as it grows included) is the memory limit and this much more: everything it can use lawfully
 * (WebAssembly capped NODE_ROOM below the limit, JS_HEAP_MIB of heap, some 180 MiB of Node itself)
 * stays under the limit; JavaScript's memory outside the heap (Buffer, ArrayBuffer), which only the
 * poll watches, cannot go past it even while the poll is late.
 */
export const DATA_MARGIN_BYTES = 512 * MIB;
/** CPU seconds allowed to the interpreter's start-up on top of the code's limit (kernel backstop only). */
const STARTUP_CPU_SECONDS = 30;

/** The limits with defaults filled in, checked (one-line errors). */
export function resolveLimits(partial: Partial<CalculationLimits> = {}): CalculationLimits {
  const limits = { ...DEFAULT_LIMITS, ...partial };
  const check = (name: keyof CalculationLimits, low: number, high: number) => {
    const value = limits[name];
    if (typeof value !== 'number' || !Number.isFinite(value) || value < low || value > high)
      throw new UserError(`sandbox limit ${name} must be a number from ${low} to ${high}, not ${String(value)}`);
  };
  check('cpuSeconds', 1, 600);
  check('wallSeconds', 1, 900);
  check('memoryBytes', NODE_ROOM + 256 * MIB, 8192 * MIB);
  check('outputBytes', 1, 16 * MIB);
  return limits;
}

export interface Tools {
  bwrap: string;
  prlimit: string;
  /** Present when we are root: the sandbox then runs as the unprivileged user `nobody`. */
  setpriv: string | null;
  node: string;
  /** The shared libraries the node binary loads (from ldd), bound read-only at their own paths. */
  libraries: string[];
  pyodide: string;
  clockTicks: number;
}

let probed: { available: true; tools: Tools } | { available: false; reason: string } | undefined;

function which(name: string): string | null {
  for (const dir of ['/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin']) {
    const path = join(dir, name);
    if (existsSync(path)) return path;
  }
  return null;
}

function nodeLibraries(node: string): string[] {
  const result = spawnSync('ldd', [node], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
  if (result.error || result.status !== 0) return []; // a static binary ("not a dynamic executable")
  const libraries = new Set<string>();
  for (const match of result.stdout.matchAll(/(\/\S+) \(0x/g)) libraries.add(match[1]!);
  return [...libraries].filter((path) => existsSync(path));
}

const NOBODY = 65534;

/** bwrap and its arguments for one calculation, up to and including the node command inside. */
export function sandboxArgv(
  tools: Tools,
  limits: CalculationLimits,
  options: { nodePermissions?: boolean; snapshot?: string } = {},
): string[] {
  const nodePermissions = options.nodePermissions ?? true;
  const wasmPages = Math.min(65536, Math.floor((limits.memoryBytes - NODE_ROOM) / 65536));
  const binds = [tools.node, ...tools.libraries].flatMap((path) => ['--ro-bind', path, path]);
  const bwrap = [
    tools.bwrap,
    '--unshare-all', // user, mount, pid, network (an own loopback only), ipc, uts, cgroup namespaces
    '--unshare-user',
    '--disable-userns',
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    '--clearenv',
    '--hostname',
    'sandbox',
    ...binds,
    '--ro-bind',
    tools.pyodide,
    '/sbx/pyodide',
    '--ro-bind',
    RUNNER,
    '/sbx/runner.mjs',
    '--ro-bind',
    HELPERS,
    '/sbx/wwref_helpers.py',
    ...(options.snapshot ? ['--ro-bind', options.snapshot, '/sbx/snapshot'] : []),
    '--size',
    String(SCRATCH_BYTES),
    '--tmpfs',
    '/scratch',
    '--chdir',
    '/scratch',
    '--setenv',
    'HOME',
    '/scratch',
    '--remount-ro',
    '/',
    '--',
    tools.node,
    // Node's permission model on top: no child processes, no worker threads, no native addons, files
    // read only under /sbx and /scratch, written only under /scratch. The namespaces above hold even if it fails.
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
  ];
  // the kernel's own limits, kept through every exec: CPU and data (backstops to the watchdog: it counts
  // CPU from the code's start, the kernel the interpreter's start-up too; it polls memory, the kernel
  // refuses the allocation), no core files, a bounded number of open files and file size. Not the
  // address space: WebAssembly reserves far more of it than it uses.
  const prlimit = [
    tools.prlimit,
    `--cpu=${Math.ceil(limits.cpuSeconds) + STARTUP_CPU_SECONDS}:${Math.ceil(limits.cpuSeconds) + STARTUP_CPU_SECONDS + 1}`,
    `--data=${limits.memoryBytes + DATA_MARGIN_BYTES}`,
    '--core=0',
    `--nofile=${MAX_FILES}`,
    `--fsize=${SCRATCH_BYTES}`,
  ];
  const drop = tools.setpriv ? [tools.setpriv, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--no-new-privs'] : [];
  return [...prlimit, ...drop, ...bwrap];
}

function probe(): { available: true; tools: Tools } | { available: false; reason: string } {
  // an operator may turn calculations off (stricter, never weaker): the server then offers no `calculate`
  if (process.env.WWREF_SANDBOX === 'off') return { available: false, reason: 'calculations are turned off here (WWREF_SANDBOX=off)' };
  const bwrap = which('bwrap');
  if (!bwrap) return { available: false, reason: 'bubblewrap (bwrap) is not installed (apt-get install bubblewrap)' };
  const prlimit = which('prlimit');
  if (!prlimit) return { available: false, reason: 'prlimit (util-linux) is not installed' };
  const root = process.getuid?.() === 0;
  const setpriv = root ? which('setpriv') : null;
  if (root && !setpriv) return { available: false, reason: 'running as root and setpriv (util-linux) is missing to drop to nobody' };
  let pyodide: string;
  try {
    pyodide = dirname(createRequire(import.meta.url).resolve('pyodide/package.json'));
  } catch {
    return { available: false, reason: "the npm package 'pyodide' is not installed (npm ci)" };
  }
  const node = realpathSync(process.execPath);
  const clock = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
  const tools: Tools = {
    bwrap,
    prlimit,
    setpriv,
    node,
    libraries: nodeLibraries(node),
    pyodide,
    clockTicks: Number(clock.stdout?.trim()) || 100,
  };
  // a real sandbox with node in it, or the reason why not (user namespaces refused, …)
  const argv = sandboxArgv(tools, DEFAULT_LIMITS);
  const nodeAt = argv.indexOf(node, argv.indexOf('--'));
  const check = [...argv.slice(0, nodeAt + 1), '-e', 'process.stdout.write("sandbox-ok")'];
  const result = spawnSync(check[0]!, check.slice(1), { encoding: 'utf8', env: {}, timeout: 30_000 });
  if (result.error) return { available: false, reason: `bubblewrap could not be started: ${result.error.message}` };
  if (result.stdout !== 'sandbox-ok') {
    const said = (result.stderr || `exit ${result.status ?? result.signal}`).trim().split('\n')[0];
    // as root the sandbox is made by `nobody`, who must be able to read every bound file
    const who = setpriv ? ' (as nobody: the checkout and node must be readable by every user)' : '';
    return { available: false, reason: `bubblewrap cannot make the sandbox here${who}: ${said}` };
  }
  return { available: true, tools };
}

/** Whether calculations can run in an OS sandbox on this machine, and if not, why (probed once). */
export function sandboxAvailable(): { available: boolean; reason: string | null } {
  probed ??= probe();
  return probed.available ? { available: true, reason: null } : { available: false, reason: probed.reason };
}

/** The tools of an available sandbox; a one-line error naming the reason otherwise. */
export function sandboxTools(): Tools {
  probed ??= probe();
  if (!probed.available) throw new UserError(`no calculation sandbox on this machine: ${probed.reason}`);
  return probed.tools;
}
