// Where things live. Every path is derived from the repository root, so the CLI works from any cwd.
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readConfig } from './config.ts';

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

/** The interpreter of the pinned runtime made by scripts/setup-python. */
export function pythonExecutable(): string {
  return process.env.WWREF_PYTHON ?? join(ROOT, '.venv', 'bin', 'python');
}

/** Mirror directories, in the order they are tried: command line, WWREF_MIRROR, wwref.config.json. */
export function mirrorDirs(fromCli: readonly string[] = []): string[] {
  const fromEnv = (process.env.WWREF_MIRROR ?? '').split(delimiter).filter(Boolean);
  const fromConfig = readConfig(ROOT).mirrors.map((m) => resolve(ROOT, m));
  return [...fromCli.map((m) => resolve(m)), ...fromEnv.map((m) => resolve(m)), ...fromConfig];
}
