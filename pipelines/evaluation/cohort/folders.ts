// The cohort's own folders inside OUT (episodes/, controls/, report/, interrupted/): created by the
// cohort, never followed through a link. Whatever an agent (which can write in OUT) put at such a
// name — a link, a FIFO, a file — is set aside under OUT/interrupted/ with a timestamp, said, and a
// fresh folder made.
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

/**
 * Moves whatever is at `path` (inside `out`: a folder, FIFO, link an agent put at a name of the cohort)
 * under OUT/interrupted/ as `<name>.planted.<ms>`, never following it, and says `why` on the log.
 */
export function setAsideEntry(out: string, path: string, why: string, log: (line: string) => void): void {
  realFolder(join(out, INTERRUPTED_FOLDER));
  const aside = join(out, INTERRUPTED_FOLDER, `${basename(path)}.planted.${Date.now()}`);
  try {
    renameSync(path, aside); // a link is moved itself, never what it points to
  } catch (error) {
    throw fsError(error, 'set aside', path);
  }
  log(`cohort: ${why}: set aside as ${aside}`);
}

/** The cohort's folder `path` (inside `out`), a real one: anything else found at its name is set aside first. */
export function ownFolder(out: string, path: string, log: (line: string) => void): void {
  const stats = lstatOrNothing(path);
  if (stats && !stats.isDirectory())
    setAsideEntry(out, path, `${path} was no folder of the cohort (a link, FIFO or file was put there)`, log);
  realFolder(path);
}
