// The pinned Python runtime, created on first use. Every place that starts the project's interpreter
// asks ensurePythonRuntime() for it: when .venv does not exist yet, scripts/setup-python (the script
// `npm run setup` runs) creates it, with a progress line on stderr, so that `npm ci && npx wwref rebuild`
// works on a fresh clone. A runtime that exists is used as it is (the workers' hello checks its
// versions); an interpreter named explicitly (WWREF_PYTHON) is never created, only checked.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { UserError } from './errors.ts';
import { ROOT } from './paths.ts';
import type { Settings } from './settings.ts';

export const SETUP_SCRIPT = join(ROOT, 'scripts', 'setup-python');

/**
 * Lock file that serialises concurrent first uses (two commands started at once on a fresh clone):
 * in the checkout's own tool folder (`.tools/`, ignored by git), nothing written outside the checkout.
 */
function lockFile(): string {
  const tools = join(ROOT, '.tools');
  mkdirSync(tools, { recursive: true });
  return join(tools, 'setup.lock');
}

/** Whether `flock` (util-linux) is on the PATH; without it the set-up runs unlocked. */
function hasFlock(): boolean {
  return spawnSync('flock', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * The interpreter of the pinned runtime, created first if it does not exist. Blocks while the
 * runtime is set up (a few minutes, once); the set-up's own lines go to stderr, so standard output
 * stays the command's (JSON of `wwref grade`, for instance).
 */
export function ensurePythonRuntime(settings: Settings, log: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): string {
  const python = settings.python.executable;
  if (existsSync(python)) return python;
  if (settings.python.explicit)
    throw new UserError(
      `${settings.python.explicit} names ${python}, which does not exist; unset it to use (or create) the pinned runtime in .venv`,
    );
  const name = settings.runtime.name;
  log(
    `wwref: creating the Python runtime '${name}' in ${dirname(dirname(python))} ` +
      `(first use; takes a few minutes, once; 'npm run setup' does the same)…`,
  );
  const command = hasFlock() ? ['flock', lockFile(), 'bash', SETUP_SCRIPT] : ['bash', SETUP_SCRIPT];
  // stdout of the set-up goes to our stderr (fd 2)
  // scripts/setup-python learns which runtime to create from WWREF_RUNTIME
  const env = { ...settings.environment, WWREF_RUNTIME: name };
  const result = spawnSync(command[0]!, command.slice(1), { cwd: ROOT, env, stdio: ['ignore', 2, 2] });
  if (result.error) throw new UserError(`cannot run ${SETUP_SCRIPT}: ${result.error.message}`);
  if (result.status !== 0 || !existsSync(python)) {
    throw new UserError(
      `the pinned Python runtime could not be created (scripts/setup-python exited with status ${result.status ?? result.signal}); ` +
        `see its message above, then run 'npm run setup'`,
    );
  }
  log(`wwref: Python runtime '${name}' ready (${python})`);
  return python;
}

export const LIBM_PIN_SCRIPT = join(ROOT, 'scripts', 'build-libm-pin.py');

/** Whether `library` is the file its build.json names (a damaged or half-replaced library is not). */
function libmPinIntact(library: string): boolean {
  try {
    const built = JSON.parse(readFileSync(join(dirname(library), 'build.json'), 'utf8')) as { library_sha256?: unknown };
    return createHash('sha256').update(readFileSync(library)).digest('hex') === built.library_sha256;
  } catch {
    return false;
  }
}

/**
 * The libm pin of `pin`'s profile, built first if it is missing or damaged (`npm run setup` builds it
 * too): a few seconds once glibc's source is at hand. A failure is one line with the build's own
 * reason (no C compiler, no glibc source).
 */
export function ensureLibmPin(
  settings: Settings,
  pin: { library: string },
  log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): string {
  // ld.so splits LD_PRELOAD at spaces and colons
  if (/[\s:]/.test(pin.library)) {
    throw new UserError(
      `numerical profile '${settings.profile.name}' preloads ${pin.library}, and LD_PRELOAD cannot carry a path with a space or colon: ` +
        "move the checkout to a path without them, or choose the 'native' profile",
    );
  }
  if (libmPinIntact(pin.library)) return pin.library;
  const python = ensurePythonRuntime(settings, log);
  log('wwref: building the libm pin of the numerical profile (first use; scripts/build-libm-pin.py may fetch glibc-source, about 20 MB)…');
  mkdirSync(dirname(dirname(pin.library)), { recursive: true });
  const build = [python, LIBM_PIN_SCRIPT, '--out', dirname(pin.library)];
  const command = hasFlock() ? ['flock', `${lockFile()}.libm`, ...build] : build;
  const result = spawnSync(command[0]!, command.slice(1), {
    cwd: ROOT,
    env: settings.environment,
    encoding: 'utf8',
    stdio: ['ignore', 2, 'pipe'],
  });
  if (result.error) throw new UserError(`cannot run ${LIBM_PIN_SCRIPT}: ${result.error.message}`);
  const lines = (result.stderr ?? '')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => line.replace(/^build-libm-pin: /, ''));
  if (result.status !== 0 || !libmPinIntact(pin.library)) {
    throw new UserError(
      `numerical profile '${settings.profile.name}' preloads ${pin.library}, which could not be built: ${lines.at(-1) ?? `status ${result.status}`} ` +
        `(see native/libm-pin/README.md; 'npm run setup -- --glibc-source PATH' takes glibc's source from PATH)`,
    );
  }
  for (const line of lines) log(`wwref: libm pin: ${line}`);
  return pin.library;
}
