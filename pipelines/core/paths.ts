// Where the project's own files live, derived from the repository root so the CLI works from any cwd,
// and the runtimes wwref.config.json declares. Generated locations are settings (core/settings.ts).
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readConfig } from './config.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SOURCES_DIR = join(ROOT, 'sources');
export const MANIFESTS_DIR = join(ROOT, 'manifests');
export const WORKFLOWS_DIR = join(ROOT, 'workflows');
/** The committed reference folder (the default of --references). */
export const REFERENCES_DIR = join(ROOT, 'outputs', 'references');

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

/** The exact pins of a runtime's requirements file (name -> version, names lower-cased). */
export function runtimePins(runtime: Pick<RuntimeDeclaration, 'requirements'>): Record<string, string> {
  const pins: Record<string, string> = {};
  for (const line of readFileSync(runtime.requirements, 'utf8').split('\n')) {
    const match = /^\s*([A-Za-z0-9_.-]+)==([^\s#]+)/.exec(line);
    if (match) pins[match[1]!.toLowerCase()] = match[2]!;
  }
  return pins;
}
