// The settings of one wwref process, built once (by the command line, a script or a test) and handed
// down to every job. This is the only module that reads WWREF_* variables; nothing writes process.env.
//
// Precedence, highest first: command-line flags, wwref.config.json, the environment, built-in
// defaults. The committed file decides what it sets (the numerical profile, the mirrors it lists): a
// variable that contradicts it is refused rather than ignored, so a stale shell setting never changes
// the bits silently. Locations the file does not set (generated folders, the interpreter, downloads)
// come from the environment or the defaults.
import { delimiter, join, resolve } from 'node:path';
import { readConfig, RUNTIME_NAME } from './config.ts';
import { UserError } from './errors.ts';
import {
  DEFAULT_RUNTIME,
  declaredRuntimes,
  MANIFESTS_DIR,
  REFERENCES_DIR,
  ROOT,
  runtimePins,
  SOURCES_DIR,
  WORKFLOWS_DIR,
  type RuntimeDeclaration,
} from './paths.ts';
import { DEFAULT_PROFILE, PROFILE_NAMES, profileByName, type NumericalProfile } from './profiles.ts';

/** Where wwref reads and writes. */
export interface Paths {
  root: string;
  sources: string;
  workflows: string;
  /** prepared/<source>/: arrays.npz and metadata.json.gz of each source. */
  prepared: string;
  /** The reference folder commands read (and rebuild writes). */
  references: string;
  /** Raw cache, journals, run reports, audit copies. */
  cache: string;
  /** Source manifests, manifests/<source>.json. */
  manifests: string;
  /** The published catalog facts, used for conformance checks only. */
  published: string;
}

export interface Settings {
  paths: Paths;
  /** The runtime that executes records (`--runtime`, WWREF_RUNTIME, else `pinned`). */
  runtime: RuntimeDeclaration;
  /** Its interpreter; `explicit` names who chose it (never created then, only checked). */
  python: { executable: string; explicit: false | 'WWREF_PYTHON' | 'a flag' };
  /** The numerical profile every Python process runs under. */
  profile: NumericalProfile;
  /** Mirror directories of raw files, in the order they are tried. */
  mirrors: string[];
  /** Downloads from upstream URLs: allowed unless WWREF_OFFLINE=1; read timeout in seconds. */
  downloads: { online: boolean; readTimeoutSeconds: number };
  /** How long a fresh Python worker may take to import its libraries and answer its hello (WWREF_HELLO_TIMEOUT_SECONDS, default 120). */
  helloTimeoutSeconds: number;
  /** The environment processes started by wwref inherit (this process's when built by the CLI). */
  environment: Readonly<Record<string, string | undefined>>;
}

export interface SettingsFlags {
  references?: string;
  runtime?: string;
  mirrors?: readonly string[];
  /** Overrides of generated locations (tests, benchmarks): never read from the environment then. */
  paths?: Partial<Paths>;
  python?: string;
  online?: boolean;
  readTimeoutSeconds?: number;
}

const DEFAULT_READ_TIMEOUT_SECONDS = 60;
/** How long a fresh worker may take to import its libraries and answer its hello, unless WWREF_HELLO_TIMEOUT_SECONDS says otherwise. */
export const DEFAULT_HELLO_TIMEOUT_SECONDS = 120;

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}

function selectRuntime(name: string): RuntimeDeclaration {
  const runtimes = declaredRuntimes();
  const found = runtimes.find((r) => r.name === name);
  if (!found) {
    const why = RUNTIME_NAME.test(name) ? 'is not declared in wwref.config.json' : 'is not a runtime name';
    throw new UserError(`runtime '${name}' ${why} (declared: ${runtimes.map((r) => r.name).join(', ')})`);
  }
  return found;
}

/**
 * The variables a runtime declares (wwref.config.json) must not contradict the environment: nothing
 * is overridden silently.
 */
function checkRuntimeEnvironment(runtime: RuntimeDeclaration, env: Readonly<Record<string, string | undefined>>): void {
  for (const [key, value] of Object.entries(runtime.environment)) {
    if (env[key] !== undefined && env[key] !== value) {
      throw new UserError(
        `${key}=${JSON.stringify(env[key])} is set in the environment, ` +
          `but runtime '${runtime.name}' sets ${JSON.stringify(value)} (wwref.config.json); unset it`,
      );
    }
  }
}

function selectProfile(configured: string | undefined, fromEnv: string | undefined, runtime: RuntimeDeclaration): NumericalProfile {
  if (configured !== undefined && !(PROFILE_NAMES as readonly string[]).includes(configured)) {
    throw new UserError(`wwref.config.json: numerical_profile '${configured}' is not a profile (known: ${PROFILE_NAMES.join(', ')})`);
  }
  if (configured !== undefined && fromEnv !== undefined && fromEnv !== configured) {
    throw new UserError(
      `WWREF_NUMERICAL_PROFILE=${fromEnv} contradicts numerical_profile '${configured}' of wwref.config.json, ` +
        `which decides it; unset the variable or edit the file`,
    );
  }
  return profileByName(configured ?? fromEnv ?? DEFAULT_PROFILE, runtimePins(runtime).numpy);
}

/** A positive number of seconds, `what` (named in the refusal) as given, else `fallback`. */
function positiveSeconds(what: string, value: number | string | undefined, fallback: number): number {
  const seconds = value === undefined ? fallback : Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new UserError(`${what} must be a positive number of seconds, not '${value}'`);
  return seconds;
}

/** The settings from flags, wwref.config.json and `env` (process.env when the CLI builds them). */
export function loadSettings(flags: SettingsFlags = {}, env: Readonly<Record<string, string | undefined>> = process.env): Settings {
  const config = readConfig(ROOT);
  const runtimeName = nonEmpty(flags.runtime)?.trim() ?? nonEmpty(env.WWREF_RUNTIME)?.trim() ?? DEFAULT_RUNTIME;
  const runtime = selectRuntime(runtimeName);
  checkRuntimeEnvironment(runtime, env);
  const python = nonEmpty(flags.python) ?? nonEmpty(env.WWREF_PYTHON);
  const fromEnv = (name: string) => nonEmpty(env[name]);
  const location = (key: keyof Paths, variable: string, fallback: string) => resolve(flags.paths?.[key] ?? fromEnv(variable) ?? fallback);
  const paths: Paths = {
    root: ROOT,
    sources: resolve(flags.paths?.sources ?? SOURCES_DIR),
    workflows: WORKFLOWS_DIR,
    prepared: location('prepared', 'WWREF_PREPARED_DIR', join(ROOT, 'prepared')),
    references:
      nonEmpty(flags.references) !== undefined
        ? resolve(flags.references!)
        : location('references', 'WWREF_REFERENCES_DIR', REFERENCES_DIR),
    cache: location('cache', 'WWREF_CACHE_DIR', join(ROOT, 'outputs', 'cache')),
    manifests: location('manifests', 'WWREF_MANIFESTS_DIR', MANIFESTS_DIR),
    published: location('published', 'WWREF_PUBLISHED_DIR', resolve(ROOT, '..', 'shared', 'published')),
  };
  const mirrors = [
    ...(flags.mirrors ?? []).map((m) => resolve(m)),
    ...config.mirrors.map((m) => resolve(ROOT, m)),
    ...(env.WWREF_MIRROR ?? '')
      .split(delimiter)
      .filter(Boolean)
      .map((m) => resolve(m)),
  ];
  return {
    paths,
    runtime,
    python: {
      executable: python ?? join(runtime.venv, 'bin', 'python'),
      explicit: nonEmpty(flags.python) ? 'a flag' : python !== undefined ? 'WWREF_PYTHON' : false,
    },
    profile: selectProfile(config.numerical_profile, fromEnv('WWREF_NUMERICAL_PROFILE'), runtime),
    mirrors: [...new Set(mirrors)],
    downloads: {
      online: flags.online ?? env.WWREF_OFFLINE !== '1',
      readTimeoutSeconds: positiveSeconds(
        'the download read timeout (WWREF_DOWNLOAD_TIMEOUT_SECONDS)',
        flags.readTimeoutSeconds ?? fromEnv('WWREF_DOWNLOAD_TIMEOUT_SECONDS'),
        DEFAULT_READ_TIMEOUT_SECONDS,
      ),
    },
    helloTimeoutSeconds: positiveSeconds(
      'WWREF_HELLO_TIMEOUT_SECONDS',
      fromEnv('WWREF_HELLO_TIMEOUT_SECONDS'),
      DEFAULT_HELLO_TIMEOUT_SECONDS,
    ),
    environment: env,
  };
}
