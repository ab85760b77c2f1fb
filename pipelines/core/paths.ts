// Where things live. Every path is derived from the repository root, so the CLI works from any cwd.
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readConfig, RUNTIME_NAME } from './config.ts';
import { UserError } from './errors.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SOURCES_DIR = join(ROOT, 'sources');
export const MANIFESTS_DIR = join(ROOT, 'manifests');
export const WORKFLOWS_DIR = join(ROOT, 'workflows');

/** Generated locations; tests point them at temporary folders through the environment. */
export function preparedDir(): string {
  return process.env.WWREF_PREPARED_DIR ?? join(ROOT, 'prepared');
}
/** prepared/<source>/: arrays.npz and metadata.json.gz of one source. */
export function sourcePreparedDir(source: string): string {
  return join(preparedDir(), source);
}
export function referencesDir(): string {
  return process.env.WWREF_REFERENCES_DIR ?? join(ROOT, 'outputs', 'references');
}
export function cacheDir(): string {
  return process.env.WWREF_CACHE_DIR ?? join(ROOT, 'outputs', 'cache');
}
export function manifestsDir(): string {
  return process.env.WWREF_MANIFESTS_DIR ?? MANIFESTS_DIR;
}

/** The runtime every command uses unless told otherwise (workflows/requirements.txt in .venv). */
export const DEFAULT_RUNTIME = 'pinned';

export interface RuntimeDeclaration {
  name: string;
  /** Requirements file of exact pins, absolute. */
  requirements: string;
  /** The virtual environment scripts/setup-python creates for it. */
  venv: string;
  description?: string;
  /** Variables every process of this runtime needs (wwref.config.json). */
  environment: Record<string, string>;
  notes: string[];
}

/** Every runtime of wwref.config.json, `pinned` included even when the file does not declare it. */
export function declaredRuntimes(): RuntimeDeclaration[] {
  const declared = readConfig(ROOT).runtimes;
  const names = [...new Set([DEFAULT_RUNTIME, ...Object.keys(declared)])];
  return names.map((name) => ({
    name,
    requirements: resolve(ROOT, declared[name]?.requirements ?? join('workflows', 'requirements.txt')),
    venv: join(ROOT, name === DEFAULT_RUNTIME ? '.venv' : `.venv-${name}`),
    ...(declared[name]?.description ? { description: declared[name]!.description } : {}),
    environment: { ...(declared[name]?.environment ?? {}) },
    notes: [...(declared[name]?.notes ?? [])],
  }));
}

/**
 * Selects a runtime for this process and every process it starts: WWREF_RUNTIME, and the variables
 * the runtime declares. A declared variable already set to another value is refused (one line), so
 * nothing is overridden silently.
 */
export function useRuntime(name: string, env: NodeJS.ProcessEnv = process.env): RuntimeDeclaration {
  const previous = env.WWREF_RUNTIME;
  env.WWREF_RUNTIME = name;
  let runtime: RuntimeDeclaration;
  try {
    runtime = activeRuntime(env);
  } catch (error) {
    if (previous === undefined) delete env.WWREF_RUNTIME;
    else env.WWREF_RUNTIME = previous;
    throw error;
  }
  for (const [key, value] of Object.entries(runtime.environment)) {
    if (env[key] !== undefined && env[key] !== value) {
      throw new UserError(`${key}=${JSON.stringify(env[key])} is set in the environment, but runtime '${name}' sets ${JSON.stringify(value)} (wwref.config.json); unset it`);
    }
    env[key] = value;
  }
  return runtime;
}

/**
 * The runtime this process executes records with: WWREF_RUNTIME (set by `--runtime NAME`, and
 * inherited by every process wwref starts, scripts/setup-python included), else `pinned`.
 */
export function activeRuntime(env: NodeJS.ProcessEnv = process.env): RuntimeDeclaration {
  const name = env.WWREF_RUNTIME?.trim() || DEFAULT_RUNTIME;
  const runtimes = declaredRuntimes();
  const found = runtimes.find((r) => r.name === name);
  if (!found) {
    const why = RUNTIME_NAME.test(name) ? 'is not declared in wwref.config.json' : 'is not a runtime name';
    throw new UserError(`runtime '${name}' ${why} (declared: ${runtimes.map((r) => r.name).join(', ')})`);
  }
  return found;
}

/** The interpreter of the active runtime made by scripts/setup-python (.venv for `pinned`, .venv-<name> otherwise). */
export function pythonExecutable(): string {
  return process.env.WWREF_PYTHON ?? join(activeRuntime().venv, 'bin', 'python');
}

/** Mirror directories, in the order they are tried: command line, WWREF_MIRROR, wwref.config.json. */
export function mirrorDirs(fromCli: readonly string[] = []): string[] {
  const fromEnv = (process.env.WWREF_MIRROR ?? '').split(delimiter).filter(Boolean);
  const fromConfig = readConfig(ROOT).mirrors.map((m) => resolve(ROOT, m));
  return [...fromCli.map((m) => resolve(m)), ...fromEnv.map((m) => resolve(m)), ...fromConfig];
}
