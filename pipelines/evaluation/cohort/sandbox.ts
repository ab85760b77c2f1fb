// The sandbox of each agent run of `cohort run --sandbox-agents`: bubblewrap (bwrap) with a user
// namespace mapped to the caller's uid and gid, its own pid, ipc, uts and (where the kernel allows)
// cgroup namespaces, every capability dropped and no further user namespace; a read-only view of /,
// a fresh /proc (only the sandbox's own processes: no sibling's WWREF_MCP_TOKEN) and /dev, a private
// writable /tmp, /var/tmp and /dev/shm; and an empty tmpfs over each folder holding the answers or the
// data they are computed from (the cohort's folder, the references, the checkout's outputs/, prepared/
// and .git, the cache, the raw mirrors, the published folder, a --controls folder, --sandbox-hide) and
// over /run (the host's Unix sockets: a read-only view does not stop a connect), so the checkout's
// code stays readable, and the pinned Python runtimes (.venv: the answers' packages ship raw data).
// The network (`network`): `none`, the default, a network namespace of the sandbox's own (only its
// loopback), where the sandbox's first process (forwarder.mjs) listens on 127.0.0.1 at the episodes
// server's port and pipes each connection to the episode's own Unix socket (episodes-server.ts
// `openSocket`), bound at /run/wwref/mcp.sock: the agent reaches its endpoint at the same URL and
// nothing else (no other port of the host, no other address, no abstract Unix socket); `shared`, the
// host's network, for an agent that must reach its model's API (and so every port of the host's
// loopback, and the internet). Either way the episode's token is a file in the sandbox
// (/run/wwref/token, from a pipe: never in an argv), for `wwref connect --token-file`. The pid
// namespace ends with the agent's shell (bwrap's init exits then): whatever it left behind, setsid or
// not, is killed with it; --die-with-parent ends it when the cohort itself is killed. No seccomp
// filter: the sandbox keeps the agent from the cohort's files, not from the kernel (the calculation
// sandbox, ../sandbox/, is the strict one).
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, delimiter, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { declaredRuntimes, ROOT } from '../../core/paths.ts';
import type { Settings } from '../../core/settings.ts';

/** The variable naming the bwrap program to use (default: `bwrap` on PATH). */
export const BWRAP_VARIABLE = 'WWREF_BWRAP';
/** --disable-userns and --size need bubblewrap 0.8 (Debian 12, Ubuntu 24.04, Fedora 38 and later). */
const INSTALL = 'install bubblewrap 0.8 or later (apt-get install bubblewrap; dnf install bubblewrap)';
/** Each agent's own, empty and writable. */
const PRIVATE = ['/tmp', '/var/tmp', '/dev/shm'];
/** The private /tmp, /var/tmp and /dev/shm of one agent, each at most this many bytes (kept in memory). */
const TMP_BYTES = 1 << 30;

/** The agents' network: a namespace of its own reaching only the episode's endpoint, or the host's. */
export type SandboxNetwork = 'none' | 'shared';
export const SANDBOX_NETWORKS: readonly SandboxNetwork[] = ['none', 'shared'];

/** Where the sandbox holds the episode's token (a file) and, with the network `none`, its socket. */
export const SANDBOX_TOKEN_FILE = '/run/wwref/token';
const SANDBOX_SOCKET = '/run/wwref/mcp.sock';
/** The descriptor the token is read from (bwrap --ro-bind-data): agent.ts writes `data` on it. */
export const TOKEN_FD = 3;
/** The first process of a sandbox without the host's network (plain JavaScript: no build, Node's modules only). */
const FORWARDER = join(ROOT, 'pipelines', 'evaluation', 'cohort', 'forwarder.mjs');

export interface AgentSandbox {
  bwrap: string;
  /** The folders an agent sees empty (real paths, none inside another). */
  hidden: string[];
  network: SandboxNetwork;
}

/** What one episode's sandbox gets: its token (a file), and without the host's network its socket and the port it answers at. */
export interface SandboxEpisode {
  token: boolean;
  socket?: { path: string; port: number };
}

/** The bwrap program: WWREF_BWRAP, else `bwrap` on PATH; a UserError naming what to install when there is none. */
function findBwrap(env: Readonly<Record<string, string | undefined>>): string {
  const named = env[BWRAP_VARIABLE]?.trim();
  const candidates = named
    ? [named]
    : (env.PATH ?? '/usr/bin:/bin')
        .split(delimiter)
        .filter((d) => isAbsolute(d))
        .map((d) => join(d, 'bwrap'));
  for (const path of candidates)
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not there, or not runnable
    }
  throw new UserError(
    `--sandbox-agents: ${named ? `${BWRAP_VARIABLE}=${named} is no program that can be run` : 'bwrap is not on PATH'}; ${INSTALL}`,
  );
}

/** Whether `path` is `folder` or inside it. */
const within = (path: string, folder: string) => {
  const rel = relative(folder, path);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
};

/**
 * The repository's git folder (its objects hold the committed references) and the checkouts of its
 * other worktrees (`git worktree add`), each with references of its own in outputs/: read from the
 * files git keeps (`.git` a folder, or a file naming it; `worktrees/<name>/gitdir`).
 */
export function repositoryFolders(root: string = ROOT): { git: string; worktrees: string[] } {
  let git = join(root, '.git');
  try {
    if (statSync(git).isFile()) {
      const named = /^gitdir:\s*(.+)$/m.exec(readFileSync(git, 'utf8'))?.[1]?.trim();
      if (named) {
        const own = resolve(root, named);
        const common = readFileSync(join(own, 'commondir'), 'utf8').trim();
        git = resolve(own, common);
      }
    }
  } catch {
    // no repository, or not one git wrote: only the checkout's own folders
  }
  // the main checkout is the folder of a git folder named .git (a bare repository has none)
  const worktrees: string[] = basename(git) === '.git' ? [dirname(git)] : [];
  try {
    for (const name of readdirSync(join(git, 'worktrees')))
      worktrees.push(dirname(resolve(readFileSync(join(git, 'worktrees', name, 'gitdir'), 'utf8').trim())));
  } catch {
    // no other worktree
  }
  return { git, worktrees: [...new Set([root, ...worktrees])] };
}

/** pip's cache folder, as pip finds it: PIP_CACHE_DIR, else $XDG_CACHE_HOME/pip, else ~/.cache/pip. */
export function pipCache(env: Readonly<Record<string, string | undefined>>): string {
  if (env.PIP_CACHE_DIR) return resolve(env.PIP_CACHE_DIR);
  if (env.XDG_CACHE_HOME) return join(resolve(env.XDG_CACHE_HOME), 'pip');
  return join(env.HOME || homedir(), '.cache', 'pip');
}

/** The real paths of the folders (and files) an agent must not see that exist now, none inside another. */
export function hiddenFolders(settings: Settings, extra: readonly string[], root: string = ROOT): string[] {
  const { paths } = settings;
  const repository = repositoryFolders(root);
  const runtimeFolders = [...new Set([...declaredRuntimes().map((runtime) => relative(ROOT, runtime.venv)), '.venv', '.venv-current'])];
  const wanted = [
    ...extra,
    paths.references,
    repository.git,
    ...repository.worktrees.flatMap((tree) => [join(tree, 'outputs'), join(tree, 'prepared'), join(tree, '.git')]),
    paths.prepared,
    paths.cache,
    paths.published,
    ...settings.mirrors,
    // the pinned runtimes, this checkout's and every worktree's: the answers' packages ship raw data
    // (a worktree's .venv rebuilt a table offline); the example agents' .venv stays
    ...repository.worktrees.flatMap((tree) => runtimeFolders.map((folder) => join(tree, folder))),
    // pip's cache: the wheels of the pinned packages, which ship raw data of some sources
    pipCache(settings.environment),
    // the host's Unix sockets (a Docker or D-Bus socket): a read-only view does not stop a connect
    '/run',
  ];
  const real = new Set<string>();
  for (const path of wanted)
    try {
      real.add(realpathSync(path));
    } catch {
      // absent: nothing to hide (the agent cannot create it on a read-only /)
    }
  const sorted = [...real].sort((a, b) => a.length - b.length);
  return sorted.filter((path, k) => !sorted.slice(0, k).some((outer) => within(path, outer)));
}

const isFolder = (path: string) => {
  try {
    return statSync(path).isDirectory();
  } catch {
    return true; // gone since: bwrap says so when it makes the sandbox
  }
};

/** The files of a hidden folder the sandbox shows all the same, read only: /etc/resolv.conf's target. */
function kept(folder: string): string[] {
  try {
    const resolv = realpathSync('/etc/resolv.conf');
    return resolv !== '/etc/resolv.conf' && within(resolv, folder) ? ['--ro-bind', resolv, resolv] : [];
  } catch {
    return [];
  }
}

/** What /run holds in an episode's sandbox (its token, its socket), put there while its tmpfs is writable. */
function runFiles(episode: SandboxEpisode | undefined): string[] {
  if (!episode) return [];
  return [
    '--dir',
    dirname(SANDBOX_TOKEN_FILE),
    ...(episode.token ? ['--ro-bind-data', String(TOKEN_FD), SANDBOX_TOKEN_FILE] : []),
    // a read-only bind does not stop a connect (the socket is the episode's own)
    ...(episode.socket ? ['--ro-bind', episode.socket.path, SANDBOX_SOCKET] : []),
  ];
}

/**
 * bwrap's arguments up to the command: the agent's sandbox, run in `cwd`, ending in `--` (and, for an
 * episode with its socket, the forwarder's arguments ending in `--`: the command follows either way).
 */
export function sandboxArguments(sandbox: AgentSandbox, cwd: string, episode?: SandboxEpisode): string[] {
  const uid = String(process.getuid?.() ?? 0);
  const gid = String(process.getgid?.() ?? 0);
  const tmpfs = (place: string, bytes?: number) => [...(bytes ? ['--size', String(bytes)] : []), '--tmpfs', place];
  // empty and read-only (a tmpfs mounted by bwrap is writable: remounted read-only after), but for
  // /etc/resolv.conf where it leads into one (systemd-resolved's file in /run): the agent's DNS; /run
  // holds the episode's files
  const hide = (folder: string) =>
    isFolder(folder)
      ? [...tmpfs(folder, 4096), ...kept(folder), ...(folder === '/run' ? runFiles(episode) : []), '--remount-ro', folder]
      : ['--ro-bind', '/dev/null', folder];
  const run = sandbox.hidden.includes('/run') || !episode ? [] : [...tmpfs('/run', 4096), ...runFiles(episode), '--remount-ro', '/run'];
  return [
    sandbox.bwrap,
    '--unshare-user',
    '--uid',
    uid,
    '--gid',
    gid,
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(sandbox.network === 'none' ? ['--unshare-net'] : []),
    '--disable-userns',
    '--die-with-parent',
    '--cap-drop',
    'ALL',
    '--ro-bind',
    '/',
    '/',
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    ...PRIVATE.flatMap((place) => tmpfs(place, TMP_BYTES)),
    ...shownAgain([ROOT, cwd]).flatMap((path) => ['--ro-bind', path, path]),
    ...sandbox.hidden.flatMap(hide),
    ...run,
    '--setenv',
    'TMPDIR',
    '/tmp',
    '--chdir',
    cwd,
    '--',
    ...(episode?.socket ? [process.execPath, FORWARDER, String(episode.socket.port), SANDBOX_SOCKET, '--'] : []),
  ];
}

/** The real path of `path`, or `path` itself when it cannot be resolved (gone, or not there yet). */
const realOr = (path: string) => {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
};

/**
 * Of `paths` (the checkout, the agents' working folder), those inside /tmp, /var/tmp or /dev/shm, each
 * sandbox's own: shown again, read only, over its private one (a checkout cloned under /tmp), before the
 * hidden folders are laid over them; none inside another.
 */
function shownAgain(paths: readonly string[]): string[] {
  const places = PRIVATE.map(realOr);
  const inside = [...new Set(paths.map(realOr))]
    .filter((path) => places.some((place) => path !== place && within(path, place)))
    .sort((a, b) => a.length - b.length);
  return inside.filter((path, k) => !inside.slice(0, k).some((outer) => within(path, outer)));
}

/**
 * The agents' sandbox, checked before anything is written: bwrap found, the working folder `cwd` (when
 * known) outside every hidden folder, and a sandbox made once (a shell in it that sees /tmp writable,
 * / not, and the hidden folders empty). A UserError (one line) otherwise.
 */
export function prepareSandbox(
  settings: Settings,
  hidden: readonly string[],
  cwd: string | undefined,
  network: SandboxNetwork,
): AgentSandbox {
  const bwrap = findBwrap(settings.environment);
  const sandbox: AgentSandbox = { bwrap, hidden: hiddenFolders(settings, hidden), network };
  if (cwd !== undefined) checkWorkingFolder(sandbox, cwd);
  const argv = sandboxArguments(sandbox, '/');
  const check =
    'echo ok > /tmp/probe && [ ! -w / ] && for d in "$@"; do if [ -d "$d" ]; then [ -z "$(ls -A "$d")" ]; else [ ! -s "$d" ]; fi || exit 3; done';
  const probe = spawnSync(argv[0]!, [...argv.slice(1), '/bin/sh', '-c', check, 'probe', ...sandbox.hidden], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin' },
    timeout: 30_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (probe.status !== 0) {
    const said = probe.error?.message ?? ((probe.stderr ?? '').trim().split('\n').at(-1) || `exit status ${probe.status ?? probe.signal}`);
    throw new UserError(
      `--sandbox-agents: no agent sandbox can be made with ${bwrap} (${said.slice(0, 200)}); ${INSTALL}, and allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0)`,
    );
  }
  return sandbox;
}

/** Refuses (one line) a working folder inside a folder the sandbox hides: the agent would run in an empty folder. */
export function checkWorkingFolder(sandbox: AgentSandbox, cwd: string): void {
  const real = existsSync(cwd) ? realpathSync(cwd) : cwd;
  const folder = sandbox.hidden.find((h) => within(real, h));
  if (folder)
    throw new UserError(
      `--sandbox-agents: the agents' working folder ${cwd} is inside ${folder}, which the sandbox hides from them; start the cohort from another folder`,
    );
  // /tmp, /var/tmp or /dev/shm itself: each sandbox's own, empty (a folder inside one is shown again: shownAgain)
  const replaced = PRIVATE.map(realOr).find((p) => real === p);
  if (replaced)
    throw new UserError(
      `--sandbox-agents: the agents' working folder ${cwd} is ${replaced}, which each sandbox replaces with a private one; start the cohort from another folder`,
    );
}
