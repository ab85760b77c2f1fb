// Raw access to a reference folder's files for tests that play the careless or hostile user: they
// read and rewrite tables and manifests behind the store's back (the product reads only through
// pipelines/references/store.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic, writeJsonAtomic } from '../../pipelines/core/fsutil.ts';
import type { ReferenceRecord } from '../../pipelines/execution/records.ts';
import { ReferenceManifest } from '../../pipelines/references/manifest.ts';
import { currentSettings } from './workspace.ts';
import { decodeTable, tableBytes, type LoadedTable } from '../../pipelines/references/tables.ts';

/** The reference folder of this process's settings (a workspace's, when one is in use). */
function defaultReferences(): string {
  return currentSettings().paths.references;
}

export function readReferenceTable(path: string): LoadedTable {
  return decodeTable(readFileSync(path), path);
}

export function writeReferenceTable(path: string, records: ReferenceRecord[], metadata: Record<string, string>): Uint8Array {
  const bytes = tableBytes(records, metadata);
  writeFileAtomic(path, bytes);
  return bytes;
}

export function readReferenceManifest(dir = defaultReferences()): ReferenceManifest | undefined {
  try {
    return ReferenceManifest.parse(JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

export function writeReferenceManifest(manifest: ReferenceManifest, dir = defaultReferences()): void {
  writeJsonAtomic(join(dir, 'manifest.json'), manifest);
}

export function tablePath(condition: string, dir = defaultReferences()): string {
  return join(dir, `${condition}.arrow`);
}
