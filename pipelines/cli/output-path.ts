// Output paths named by the user (--out, --report, --json, --html, --figures): checked before any work.
import { accessSync, constants, existsSync, lstatSync, statSync, type Stats } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { isInside } from '../core/containment.ts';
import { UserError } from '../core/errors.ts';
import { ROOT } from '../core/paths.ts';
import type { Settings } from '../core/settings.ts';

/** Folders only wwref's reference store and preparation write into; no output option may point there. */
function protectedDirs(settings: Settings): string[] {
  const { paths } = settings;
  return [paths.references, join(ROOT, 'outputs', 'references'), join(ROOT, 'outputs', 'examples'), paths.prepared, paths.manifests];
}

/** The stats of `target` (links followed unless `link`), or undefined when nothing is there (a parent being a file included). */
function statOrNothing(target: string, flag: string, path: string, link = false): Stats | undefined {
  try {
    return (link ? lstatSync : statSync)(target, { throwIfNoEntry: false });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR') return undefined;
    throw new UserError(`--${flag} ${path} cannot be written: ${code ?? (error as Error).message}`);
  }
}

/**
 * An output path given by the user, refused inside a protected folder (after resolving `..` and
 * symlinks), and refused before any work when it cannot be written: a file output that is a folder,
 * a symbolic link, a device, FIFO or socket, a parent that is a file, or a nearest existing folder
 * that is not writable.
 */
export function outputPath(settings: Settings, path: string, flag: string, kind: 'file' | 'folder' = 'file'): string {
  if (path.trim() === '') throw new UserError(`--${flag} needs a path`);
  for (const dir of protectedDirs(settings)) {
    if (isInside(path, dir)) throw new UserError(`--${flag} ${path} is inside ${dir}, which only wwref itself writes; choose another path`);
  }
  const target = resolve(path);
  if (kind === 'file' && statOrNothing(target, flag, path, true)?.isSymbolicLink()) {
    throw new UserError(`--${flag} ${path} is a symbolic link; name the file itself (wwref replaces its outputs, it does not write through links)`);
  }
  const stats = statOrNothing(target, flag, path);
  if (stats?.isDirectory() && kind === 'file') throw new UserError(`--${flag} ${path} is a directory; name a file`);
  // an atomic write renames a new file over the path: never over a device, FIFO or socket
  if (stats && !stats.isDirectory() && !stats.isFile()) throw new UserError(`--${flag} ${path} is not a regular file (a device, FIFO or socket); name a file`);
  if (stats && !stats.isDirectory() && kind === 'folder') throw new UserError(`--${flag} ${path} is a file; name a folder`);
  let existing = stats && kind === 'folder' ? target : dirname(target);
  while (!existsSync(existing) && dirname(existing) !== existing) existing = dirname(existing);
  if (!statOrNothing(existing, flag, path)?.isDirectory()) throw new UserError(`--${flag} ${path} cannot be written: ${existing} is a file, not a folder`);
  try {
    accessSync(existing, constants.W_OK);
  } catch (error) {
    throw new UserError(`--${flag} ${path} cannot be written: ${existing} is not writable (${(error as NodeJS.ErrnoException).code})`);
  }
  return target;
}
