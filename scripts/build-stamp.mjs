// Whether the build in dist/ matches the files it was built from: what bin/wwref.mjs asks at every
// start, so this module imports nothing it does not need for the answer (node:crypto only when a
// file must be hashed). scripts/build.mjs writes the stamp (dist/build.json) this reads.
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

export const STAMP = 'build.json';
export const STAMP_VERSION = 2; // 2: one CommonJS bundle (1: ES module chunks)

/** The sha256 of `bytes`, in hex. */
export function sha256(bytes) {
  const { createHash } = createRequire(import.meta.url)('node:crypto');
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * The entry of the build in `root`/dist when it was built from exactly the files there are now, else
 * undefined. A file whose size and modification time are as recorded is taken as unchanged (as git
 * does); any other is hashed, so a checkout that only touched a file does not force a rebuild.
 */
export function builtEntry(root) {
  const dist = join(root, 'dist');
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(join(dist, STAMP), 'utf8'));
  } catch {
    return undefined;
  }
  if (stamp?.version !== STAMP_VERSION || typeof stamp.entry !== 'string' || typeof stamp.inputs !== 'object') return undefined;
  for (const file in stamp.inputs) {
    const recorded = stamp.inputs[file];
    let stat;
    try {
      // a missing file answers undefined rather than an exception: some 700 files are asked at every start
      stat = statSync(`${root}/${file}`, { throwIfNoEntry: false });
    } catch {
      stat = undefined; // not a folder on the way, not readable
    }
    if (stat === undefined) return undefined; // a source was removed or renamed
    if (stat.size === recorded.size && stat.mtimeMs === recorded.mtimeMs) continue;
    if (stat.size !== recorded.size || sha256(readFileSync(`${root}/${file}`)) !== recorded.sha256) return undefined;
  }
  const entry = join(dist, stamp.entry);
  try {
    return statSync(entry).isFile() ? entry : undefined;
  } catch {
    return undefined;
  }
}
