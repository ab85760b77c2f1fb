// Where a reference folder may be, checked before anything reads or writes it: apart from the folders
// other commands rewrite wholesale. Kept out of store.ts so that the command line can check a folder
// at start without loading the store (its tables need Apache Arrow).
import { dirname, join, resolve } from 'node:path';
import { isInside, lstatOrNothing, realPath } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';
import type { Paths } from '../core/settings.ts';

/** The generated folders a reference folder is kept apart from. */
export type GuardedPaths = Pick<Paths, 'prepared' | 'cache' | 'manifests'>;

/**
 * Folders a reference folder must neither be inside of nor contain: prepared inputs, the raw cache and
 * the source manifests (each is rewritten wholesale by `prepare`/`acquire`). Checked after resolving
 * `..` and symbolic links; returns the folder's absolute path.
 */
export function checkReferenceFolder(dir: string, paths: GuardedPaths): string {
  if (dir.trim() === '') throw new UserError('a reference folder needs a path');
  const folder = resolve(dir);
  const guarded: [string, string][] = [
    [paths.prepared, 'the prepared inputs'],
    [join(paths.cache, 'raw'), 'the raw cache'],
    [paths.manifests, 'the source manifests'],
  ];
  for (const [other, what] of guarded) {
    if (isInside(folder, other))
      throw new UserError(`reference folder ${dir} is inside ${what} (${other}), which wwref rewrites; choose another folder`);
    if (isInside(other, folder)) throw new UserError(`reference folder ${dir} contains ${what} (${other}); choose a folder of its own`);
  }
  const real = realPath(folder);
  let existing = real;
  while (!lstatOrNothing(existing) && dirname(existing) !== existing) existing = dirname(existing);
  if (!lstatOrNothing(existing)?.isDirectory()) {
    throw new UserError(
      `reference folder ${dir} cannot be a folder: ` +
        `${existing === real ? 'it is' : `${existing} is`} a file; name a folder (it is created when missing)`,
    );
  }
  return real;
}
