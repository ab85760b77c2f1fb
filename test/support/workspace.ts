// A throw-away workspace for tests: generated folders (prepared inputs, manifests, references, caches)
// in a temporary directory, as settings for the functions a test calls and as WWREF_* variables for
// the command lines it runs (in process, through runCli, or as a process).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MANIFESTS_DIR, ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings, type Settings, type SettingsFlags } from '../../pipelines/core/settings.ts';

const VARIABLES = ['WWREF_PREPARED_DIR', 'WWREF_REFERENCES_DIR', 'WWREF_CACHE_DIR', 'WWREF_MANIFESTS_DIR'] as const;

export interface Workspace {
  root: string;
  prepared: string;
  references: string;
  cache: string;
  manifests: string;
  /** The settings of this workspace (other flags on top when given). */
  settings: Settings;
  with(flags: SettingsFlags): Settings;
  dispose(): void;
}

/** The settings of this process's environment (the default folders unless a workspace is in use). */
export function currentSettings(flags: SettingsFlags = {}): Settings {
  return loadSettings(flags, process.env);
}

/**
 * `inputs: 'committed'`: the prepared inputs and source manifests stay the repository's own (prepared/
 * is set up before the tests run), only references and caches are temporary.
 */
export function useTempWorkspace(options: { inputs?: 'temporary' | 'committed' } = {}): Workspace {
  const root = mkdtempSync(join(tmpdir(), 'wwref-test-'));
  const saved = Object.fromEntries(VARIABLES.map((v) => [v, process.env[v]]));
  const committed = options.inputs === 'committed';
  const dirs = {
    prepared: committed ? join(ROOT, 'prepared') : join(root, 'prepared'),
    references: join(root, 'references'),
    cache: join(root, 'cache'),
    manifests: committed ? MANIFESTS_DIR : join(root, 'manifests'),
  };
  process.env.WWREF_REFERENCES_DIR = dirs.references;
  process.env.WWREF_CACHE_DIR = dirs.cache;
  if (committed) {
    delete process.env.WWREF_PREPARED_DIR;
    delete process.env.WWREF_MANIFESTS_DIR;
  } else {
    process.env.WWREF_PREPARED_DIR = dirs.prepared;
    process.env.WWREF_MANIFESTS_DIR = dirs.manifests;
  }
  const settingsWith = (flags: SettingsFlags) => loadSettings({ ...flags, paths: { ...dirs, ...flags.paths } }, process.env);
  return {
    root,
    ...dirs,
    settings: settingsWith({}),
    with: settingsWith,
    dispose() {
      for (const v of VARIABLES) {
        if (saved[v] === undefined) delete process.env[v];
        else process.env[v] = saved[v];
      }
      rmSync(root, { recursive: true, force: true }); // never the committed folders: they are not under root
    },
  };
}

/** prepared/<source>/ of this process's settings. */
export function preparedFolder(source: string): string {
  return join(currentSettings().paths.prepared, source);
}
