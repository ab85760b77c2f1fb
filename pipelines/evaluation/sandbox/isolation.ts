// The OS sandbox of one calculation, the same for every engine (engines.ts says what runs inside):
// how it is entered (a fresh user and mount namespace that mounts the call's own scratch, every
// inherited descriptor closed, the kernel's limits, a seccomp filter), the bubblewrap command line
// (namespaces, read-only binds of exactly the files the interpreter needs), and whether such a
// sandbox can be made on this machine at all.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { ROOT } from '../../core/paths.ts';
import { seccompArch, seccompFilter, type SeccompArch } from './seccomp.ts';

// from the checkout's root, not this module's URL: the built command line runs this code from dist/chunks/
export const SANDBOX_DIR = join(ROOT, 'pipelines', 'evaluation', 'sandbox');
/** Files the sandbox is made from at each call (filters, the scratch's mount point), readable by every user. */
const STATE_DIR = join(ROOT, '.tools', 'sandbox');

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

/** Room left to an interpreter's own code beside the memory its program may use (engines.ts). */
export const INTERPRETER_ROOM = 512 * MIB;
/** The scratch tmpfs: its bytes (also the largest file: RLIMIT_FSIZE) and its inodes (files and folders). */
export const SCRATCH_BYTES = 64 * MIB;
export const SCRATCH_INODES = 4096;
const MAX_FILES = 256;
/** Tasks (threads: no process can be made) of the sandbox's user, counted in the sandbox's own namespaces. */
export const MAX_TASKS = 256;
/** Signals queued at once (POSIX timers included), counted in the sandbox's own namespaces like its tasks. */
export const MAX_SIGNALS = 1024;
/**
 * The kernel's limit on the interpreter's data (RLIMIT_DATA: its private writable memory) is the memory
 * limit and this much more: everything it can use lawfully stays under the limit; memory that only the
 * poll watches (JavaScript's buffers outside its heap) cannot go past it even while the poll is late.
 */
export const DATA_MARGIN_BYTES = 512 * MIB;
/** CPU seconds allowed to the interpreter's start-up on top of the code's limit (kernel backstop only). */
const STARTUP_CPU_SECONDS = 30;
/** The sandbox's user inside its namespace (`nobody`). */
const NOBODY = 65534;

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
  check('memoryBytes', INTERPRETER_ROOM + 256 * MIB, 8192 * MIB);
  check('outputBytes', 1, 16 * MIB);
  return limits;
}

export interface Tools {
  bash: string;
  unshare: string;
  mount: string;
  mkdir: string;
  prlimit: string;
  bwrap: string;
  /** Present when we are root: the sandbox is then made by the unprivileged user `nobody`. */
  setpriv: string | null;
  arch: SeccompArch;
  /** The seccomp filter bubblewrap installs before the interpreter (exec allowed once: the interpreter's). */
  filter: string;
  /** The same filter refusing execve too, for a runner that can install it itself once started (engines.ts). */
  noExecFilter: string;
  /** The folder each call's own scratch tmpfs is mounted on, in the call's private mount namespace only. */
  scratchMount: string;
  clockTicks: number;
}

/** What an engine runs in the sandbox (engines.ts). */
export interface SandboxedCommand {
  /** bubblewrap arguments binding, read-only, what the interpreter reads. */
  binds: string[];
  /** Variables inside, beside HOME and PWD. */
  environment: Readonly<Record<string, string>>;
  /** Where the call's scratch is seen inside (the working folder is the first). */
  scratch: string[];
  /** The interpreter and its arguments. */
  command: string[];
  /** The kernel's address-space limit (bytes), where the interpreter allows one (WebAssembly does not). */
  addressSpace?: number;
  /** The largest file the code may write (RLIMIT_FSIZE; default the scratch's size). */
  fileBytes?: number;
}

function which(name: string): string | null {
  for (const dir of ['/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin']) {
    const path = join(dir, name);
    if (existsSync(path)) return path;
  }
  return null;
}

/** The shared libraries `files` load (from one ldd run), to bind read-only at their own paths. */
export function sharedLibraries(files: string[]): string[] {
  if (files.length === 0) return [];
  const result = spawnSync('ldd', files, { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' }, maxBuffer: 64 * MIB });
  if (result.error) return [];
  const libraries = new Set<string>();
  for (const match of (result.stdout ?? '').matchAll(/(\/\S+) \(0x/g)) libraries.add(match[1]!);
  return [...libraries].filter((path) => existsSync(path)).sort();
}

/**
 * Run by bash inside the call's own user and mount namespace, before bubblewrap: closes every
 * descriptor but 0-3 (whatever the server inherited from its launcher must not reach the code), opens
 * the seccomp filter as fd 4 for bubblewrap, and mounts the call's scratch: a tmpfs of bounded bytes
 * and inodes, noexec, nosuid, nodev, seen by this namespace alone and gone with it, holding the working
 * folder (`work`) and the other writable places (`tmp`) apart.
 * Arguments: the mount program, the scratch's mount point, bytes and inodes, the filter file, the mkdir
 * program, then the command.
 */
const ENTER = [
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash parameter expansion, not a template placeholder
  'for fd in /proc/self/fd/*; do n=${fd##*/}; if [ "$n" -gt 3 ]; then eval "exec $n>&-"; fi; done',
  'exec 4<"$5" || exit 125',
  '"$1" -t tmpfs -o "size=$3,nr_inodes=$4,mode=0700,noexec,nosuid,nodev" wwref-scratch "$2" || exit 125',
  '"$6" "$2/work" "$2/tmp" || exit 125',
  'shift 6',
  'exec "$@"',
].join('\n');

/** The kernel's limits on the call: set after the namespaces are made, so they count the sandbox's own tasks. */
function kernelLimits(tools: Tools, limits: CalculationLimits, inner: SandboxedCommand): string[] {
  const cpu = Math.ceil(limits.cpuSeconds) + STARTUP_CPU_SECONDS;
  return [
    tools.prlimit,
    `--cpu=${cpu}:${cpu + 1}`,
    `--data=${limits.memoryBytes + DATA_MARGIN_BYTES}`,
    ...(inner.addressSpace ? [`--as=${inner.addressSpace}`] : []),
    '--core=0',
    `--nofile=${MAX_FILES}`,
    `--fsize=${inner.fileBytes ?? SCRATCH_BYTES}`,
    `--nproc=${MAX_TASKS}`,
    '--msgqueue=0',
    // queued signals (POSIX timers among them) are counted per user across every call: each call its own share
    `--sigpending=${MAX_SIGNALS}`,
    '--',
  ];
}

/** `reachable`'s answers: the bound files are the runtimes', asked again at every call. */
const reachableSeen = new Map<string, boolean>();

/** Whether every user may reach `path` (search its folders, read it): `nobody` makes the sandbox when we are root. */
function reachable(path: string): boolean {
  if (!reachableSeen.has(path)) reachableSeen.set(path, reachableNow(path));
  return reachableSeen.get(path)!;
}

function reachableNow(path: string): boolean {
  const parts = path.split('/').filter(Boolean);
  for (let i = 0; i <= parts.length; i++) {
    const place = `/${parts.slice(0, i).join('/')}`;
    let mode: number;
    try {
      mode = statSync(place).mode;
    } catch {
      return false;
    }
    const last = i === parts.length;
    if (!last && !(mode & 0o001)) return false;
    if (last && !(mode & 0o004)) return false;
  }
  return true;
}

/**
 * As root, a bound file or folder that `nobody` cannot reach (an interpreter under /root) is first
 * bound, by root, in a private mount namespace of the call's own, at a place under .tools/sandbox/stage/
 * that nobody can reach; bubblewrap binds it from there. Returns that step (or nothing) and the binds
 * with their sources replaced.
 */
function staged(tools: Tools, binds: string[]): { step: string[]; binds: string[] } {
  if (!tools.setpriv) return { step: [], binds };
  const pairs: string[] = [];
  const out = [...binds];
  for (let i = 0; i + 2 < out.length; i++) {
    if (!out[i]!.endsWith('bind') || reachable(out[i + 1]!)) continue;
    const source = out[i + 1]!;
    const place = join(STATE_DIR, 'stage', String(pairs.length / 2));
    mkdirSync(join(STATE_DIR, 'stage'), { recursive: true, mode: 0o755 });
    if (statSync(source).isDirectory()) mkdirSync(place, { recursive: true, mode: 0o755 });
    else if (!existsSync(place)) writeFileSync(place, '', { mode: 0o644 });
    pairs.push(source, place);
    out[i + 1] = place;
  }
  if (pairs.length === 0) return { step: [], binds };
  const script = 'm=$1; shift; while [ "$1" != -- ]; do "$m" --bind "$1" "$2" || exit 125; shift 2; done; shift; exec "$@"';
  const step = [
    tools.unshare,
    '--mount',
    '--propagation',
    'private',
    '--',
    tools.bash,
    '--norc',
    '--noprofile',
    '-c',
    script,
    'wwref-stage',
  ];
  return { step: [...step, tools.mount, ...pairs, '--'], binds: out };
}

/** The whole command line of one call: entering, limits, bubblewrap, and the engine's command inside. */
export function sandboxArgv(tools: Tools, limits: CalculationLimits, command: SandboxedCommand): string[] {
  const stage = staged(tools, command.binds);
  const inner = { ...command, binds: stage.binds };
  const drop = tools.setpriv ? [tools.setpriv, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--no-new-privs'] : [];
  const enter = [tools.unshare, '--user', '--map-root-user', '--mount', '--propagation', 'private', '--'];
  const bash = [tools.bash, '--norc', '--noprofile', '-c', ENTER, 'wwref-sandbox', tools.mount, tools.scratchMount, String(SCRATCH_BYTES)];
  const setenv = Object.entries(inner.environment).flatMap(([name, value]) => ['--setenv', name, value]);
  const bwrap = [
    tools.bwrap,
    '--unshare-all', // user, mount, pid, network (an own loopback only), ipc, uts, cgroup namespaces
    '--unshare-user',
    '--uid',
    String(NOBODY),
    '--gid',
    String(NOBODY),
    '--disable-userns',
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    '--seccomp',
    '4',
    '--clearenv',
    '--hostname',
    'sandbox',
    // the scratch first: a runtime bound under one of its places (a checkout under /tmp) stays visible,
    // its mount points made in `tmp`, never in the working folder
    ...inner.scratch.flatMap((place, k) => ['--bind', join(tools.scratchMount, k === 0 ? 'work' : 'tmp'), place]),
    ...inner.binds,
    '--chdir',
    inner.scratch[0]!,
    '--setenv',
    'HOME',
    inner.scratch[0]!,
    ...setenv,
    '--remount-ro',
    '/',
    '--',
    ...inner.command,
  ];
  return [
    ...stage.step,
    ...drop,
    ...enter,
    ...bash,
    String(SCRATCH_INODES),
    tools.filter,
    tools.mkdir,
    ...kernelLimits(tools, limits, inner),
    ...bwrap,
  ];
}

/**
 * Starts the sandbox: its own session and process group, no environment of ours, stdin/stdout/stderr
 * and fd 3 (the runner's ready line) as pipes, nothing else.
 */
export function startSandbox(argv: string[]): ChildProcess {
  return spawn(argv[0]!, argv.slice(1), { detached: true, env: {}, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
}

/** A file under .tools/sandbox/ holding `bytes`, named by their hash, readable by every user (written atomically once). */
export function stateFile(stem: string, bytes: Buffer, extension = '.bpf'): string {
  mkdirSync(STATE_DIR, { recursive: true });
  chmodSync(STATE_DIR, 0o755);
  const path = join(STATE_DIR, `${stem}-${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}${extension}`);
  if (!existsSync(path) || !readFileSync(path).equals(bytes)) {
    const partial = `${path}.${process.pid}.tmp`;
    writeFileSync(partial, bytes, { mode: 0o644 });
    chmodSync(partial, 0o644);
    renameSync(partial, path);
  }
  return path;
}

type Probe = { available: true; tools: Tools } | { available: false; reason: string };
let probed: Probe | undefined;

function findTools(): Tools | string {
  const found: Record<string, string> = {};
  for (const [name, hint] of [
    ['bwrap', 'bubblewrap (bwrap) is not installed (apt-get install bubblewrap)'],
    ['prlimit', 'prlimit (util-linux) is not installed'],
    ['unshare', 'unshare (util-linux) is not installed'],
    ['mount', 'mount (util-linux) is not installed'],
    ['bash', 'bash is not installed'],
    ['mkdir', 'mkdir (coreutils) is not installed'],
  ] as const) {
    const path = which(name);
    if (!path) return hint;
    found[name] = path;
  }
  const root = process.getuid?.() === 0;
  const setpriv = root ? which('setpriv') : null;
  if (root && !setpriv) return 'running as root and setpriv (util-linux) is missing to drop to nobody';
  const arch = seccompArch();
  if (!arch) return `no seccomp filter is written for this processor (${process.arch}); the sandbox knows x64 and arm64`;
  const scratchMount = join(STATE_DIR, 'scratch');
  mkdirSync(scratchMount, { recursive: true });
  chmodSync(STATE_DIR, 0o755);
  chmodSync(scratchMount, 0o755);
  const clock = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } });
  return {
    bash: found.bash!,
    unshare: found.unshare!,
    mount: found.mount!,
    mkdir: found.mkdir!,
    prlimit: found.prlimit!,
    bwrap: found.bwrap!,
    setpriv,
    arch,
    filter: stateFile(`seccomp-${arch}`, seccompFilter({ arch, allowExec: true })),
    noExecFilter: stateFile(`seccomp-${arch}-noexec`, seccompFilter({ arch, allowExec: false })),
    scratchMount,
    clockTicks: Number(clock.stdout?.trim()) || 100,
  };
}

function probe(): Probe {
  // an operator may turn calculations off (stricter, never weaker): the server then offers no `calculate`
  if (process.env.WWREF_SANDBOX === 'off') return { available: false, reason: 'calculations are turned off here (WWREF_SANDBOX=off)' };
  const tools = findTools();
  if (typeof tools === 'string') return { available: false, reason: tools };
  // a real sandbox with a program in it (bash, bound read-only with its libraries), or the reason why not
  const bash = [tools.bash, ...sharedLibraries([tools.bash])];
  const inner: SandboxedCommand = {
    binds: bash.flatMap((path) => ['--ro-bind', path, path]),
    environment: {},
    scratch: ['/scratch'],
    command: [tools.bash, '--norc', '--noprofile', '-c', 'echo sandbox-ok > /scratch/ok && read -r said < /scratch/ok && echo -n "$said"'],
  };
  const argv = sandboxArgv(tools, DEFAULT_LIMITS, inner);
  const result = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', env: {}, timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.error) return { available: false, reason: `the sandbox could not be started: ${result.error.message}` };
  if (result.stdout !== 'sandbox-ok') {
    const said = (result.stderr || `exit ${result.status ?? result.signal}`).trim().split('\n')[0];
    // as root the sandbox is made by `nobody`, who must be able to read every bound file
    const who = tools.setpriv ? ' (as nobody: the checkout and the interpreters must be readable by every user)' : '';
    return { available: false, reason: `the sandbox cannot be made here${who}: ${said}` };
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
