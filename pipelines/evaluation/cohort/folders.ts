// The cohort's own folders inside OUT (episodes/, controls/, report/, interrupted/): created by the
// cohort, never followed through a link. Whatever an agent (which can write in OUT) put at such a
// name — a link, a FIFO, a file — is set aside under OUT/interrupted/ with a timestamp and a random
// suffix (an agent cannot plant something at the name beforehand), said, and a fresh folder made.
import { randomBytes } from 'node:crypto';
import { renameSync } from 'node:fs';
import { basename, join } from 'node:path';
import { lstatOrNothing } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import { fsError, makeDirs } from '../../core/fsutil.ts';
import { INTERRUPTED_FOLDER } from './plan.ts';

/** A real folder (not a link) at `path`, created when missing; a UserError otherwise. */
export function realFolder(path: string): void {
  if (!lstatOrNothing(path)) makeDirs(path);
  const stats = lstatOrNothing(path);
  if (!stats?.isDirectory()) throw new UserError(`${path} is not a folder of the cohort (a link or a file was put there); refused`);
}

/** Renames `path` (never followed) to `<folder>/<name>.planted.<ms>.<random hex>`, a fresh name tried again on a collision; the new path. */
export function renameAside(path: string, folder: string): string {
  for (let attempt = 0; ; attempt++) {
    const aside = join(folder, `${basename(path)}.planted.${Date.now()}.${randomBytes(6).toString('hex')}`);
    if (lstatOrNothing(aside) && attempt < 5) continue;
    try {
      renameSync(path, aside); // a link is moved itself, never what it points to
      return aside;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (attempt < 5 && (code === 'ENOTEMPTY' || code === 'EEXIST' || code === 'EISDIR' || code === 'ENOTDIR')) continue;
      throw fsError(error, 'set aside', path);
    }
  }
}

/** OUT/<name> (interrupted/, retried/) as a real folder: whatever else is at its name (a link, a file) is itself renamed aside in OUT, never followed. */
export function asideFolder(out: string, log: (line: string) => void, name = INTERRUPTED_FOLDER): string {
  const folder = join(out, name);
  const stats = lstatOrNothing(folder);
  if (stats && !stats.isDirectory()) {
    const aside = renameAside(folder, out);
    log(`cohort: ${folder} was no folder of the cohort (a link, FIFO or file was put there): set aside as ${aside}`);
  }
  realFolder(folder);
  return folder;
}

/**
 * Moves whatever is at `path` (inside `out`: a folder, FIFO, link an agent put at a name of the cohort)
 * under OUT/interrupted/ as `<name>.planted.<ms>.<hex>`, never following it, and says `why` on the log.
 */
export function setAsideEntry(out: string, path: string, why: string, log: (line: string) => void): void {
  const aside = renameAside(path, asideFolder(out, log));
  log(`cohort: ${why}: set aside as ${aside}`);
}

/** The cohort's folder `path` (inside `out`), a real one: anything else found at its name is set aside first (then, with `create`, the folder made). */
export function ownFolder(out: string, path: string, log: (line: string) => void, create = true): void {
  const stats = lstatOrNothing(path);
  if (stats && !stats.isDirectory())
    setAsideEntry(out, path, `${path} was no folder of the cohort (a link, FIFO or file was put there)`, log);
  if (create) realFolder(path);
}
