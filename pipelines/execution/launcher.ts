// The one way wwref starts the project's Python: the interpreter of the selected runtime (created on
// first use), the repository as working folder, one computation thread, a fixed hash seed, the
// numerical profile's and the runtime's variables, on top of the environment the settings carry.
// Workers, the Dask bridge, scheduler and workers, preparation, inspection and figures all start here.
import { execa, execaSync, type Options, type ResultPromise, type SyncOptions } from 'execa';
import { ROOT } from '../core/paths.ts';
import { ensureLibmPin, ensurePythonRuntime } from '../core/runtime.ts';
import type { Settings } from '../core/settings.ts';
import { profileEnvironment, type NumericalProfile } from '../core/profiles.ts';

/** One computation thread everywhere: set before Python (and its BLAS/OpenMP pools) starts. */
export const THREAD_ENV = {
  OMP_NUM_THREADS: '1',
  OPENBLAS_NUM_THREADS: '1',
  MKL_NUM_THREADS: '1',
  VECLIB_MAXIMUM_THREADS: '1',
  NUMEXPR_NUM_THREADS: '1',
} as const;

/**
 * The variables every Python process of the project gets, under `profile` (default the settings').
 * A profile's libm pin goes first in LD_PRELOAD, so that its functions win over the C library's and
 * over any other preloaded library's; libraries the environment preloads stay after it.
 */
export function pythonEnvironment(settings: Settings, profile: NumericalProfile = settings.profile): Record<string, string> {
  const env = { ...THREAD_ENV, PYTHONHASHSEED: '0', ...settings.runtime.environment, ...profileEnvironment(profile, settings.environment) };
  if (!profile.libm) return env;
  const preload = [ensureLibmPin(settings, profile.libm), settings.environment.LD_PRELOAD?.trim()].filter(Boolean).join(' ');
  return { ...env, LD_PRELOAD: preload };
}

/** The whole environment of a Python process: the settings' environment, the project's variables, `extra`. */
export function processEnvironment(
  settings: Settings,
  extra: Readonly<Record<string, string>> = {},
  profile?: NumericalProfile,
): Record<string, string> {
  const inherited = Object.fromEntries(
    Object.entries(settings.environment).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
  return { ...inherited, ...pythonEnvironment(settings, profile), ...extra };
}

export interface LaunchOptions {
  /** Variables added to the project's (a module's own settings, a test's double). */
  env?: Readonly<Record<string, string>>;
  profile?: NumericalProfile;
}

/** `python ARGS…` of the runtime, asynchronously (execa options other than cwd and env pass through). */
export function startPython(
  settings: Settings,
  args: readonly string[],
  options: LaunchOptions & Omit<Options, 'env' | 'cwd' | 'extendEnv'> = {},
): ResultPromise {
  const { env, profile, ...rest } = options;
  return execa(ensurePythonRuntime(settings), args, {
    ...rest,
    cwd: ROOT,
    extendEnv: false,
    env: processEnvironment(settings, env, profile),
  });
}

/** `python ARGS…` of the runtime, to completion. */
export function runPython(
  settings: Settings,
  args: readonly string[],
  options: LaunchOptions & Omit<SyncOptions, 'env' | 'cwd' | 'extendEnv'> = {},
) {
  const { env, profile, ...rest } = options;
  return execaSync(ensurePythonRuntime(settings), args, {
    ...rest,
    cwd: ROOT,
    extendEnv: false,
    env: processEnvironment(settings, env, profile),
  });
}

/**
 * How a Python process that failed ended, for a one-line message: the last line it wrote on stderr,
 * else its answer over the size read (it was stopped), the signal that ended it, or its exit status.
 */
export function howItEnded(child: {
  stderr?: unknown;
  exitCode?: number;
  signal?: string;
  isMaxBuffer?: boolean;
  timedOut?: boolean;
}): string {
  const last = String(child.stderr ?? '')
    .trim()
    .split('\n')
    .pop();
  if (last) return last;
  if (child.isMaxBuffer) return 'its answer was larger than wwref reads (it was stopped)';
  if (child.timedOut) return 'it did not finish in time (it was stopped)';
  if (child.signal) return `it was ended by ${child.signal}`;
  return `exit status ${child.exitCode ?? 'unknown'}`;
}
