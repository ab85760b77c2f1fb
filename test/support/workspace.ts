// A throw-away workspace for tests: generated folders (prepared inputs, manifests, references, caches)
// point at a temporary directory through the WWREF_* variables that pipelines/core/paths.ts reads.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const VARIABLES = ['WWREF_PREPARED_DIR', 'WWREF_REFERENCES_DIR', 'WWREF_CACHE_DIR', 'WWREF_MANIFESTS_DIR'] as const;

export interface Workspace {
  root: string;
  prepared: string;
  references: string;
  cache: string;
  manifests: string;
  dispose(): void;
}

export function useTempWorkspace(): Workspace {
  const root = mkdtempSync(join(tmpdir(), 'wwref-test-'));
  const saved = Object.fromEntries(VARIABLES.map((v) => [v, process.env[v]]));
  const ws = {
    root,
    prepared: join(root, 'prepared'),
    references: join(root, 'references'),
    cache: join(root, 'cache'),
    manifests: join(root, 'manifests'),
  };
  process.env.WWREF_PREPARED_DIR = ws.prepared;
  process.env.WWREF_REFERENCES_DIR = ws.references;
  process.env.WWREF_CACHE_DIR = ws.cache;
  process.env.WWREF_MANIFESTS_DIR = ws.manifests;
  return {
    ...ws,
    dispose() {
      for (const v of VARIABLES) {
        if (saved[v] === undefined) delete process.env[v];
        else process.env[v] = saved[v];
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}
