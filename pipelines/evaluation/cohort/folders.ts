// The cohort's own folders inside OUT (episodes/, controls/, report/, interrupted/): created by the
// cohort, never followed through a link. Whatever an agent (which can write in OUT) put at such a
// name — a link, a FIFO, a file — is set aside under OUT/interrupted/ with a timestamp, said, and a
// fresh folder made.
import { renameSync } from 'node:fs';
import { basename, join } from 'node:path';
import { lstatOrNothing } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import { makeDirs } from '../../core/fsutil.ts';
import { INTERRUPTED_FOLDER } from './plan.ts';

/** A real folder (not a link) at `path`, created when missing; a UserError otherwise. */
export function realFolder(path: string): void {
  if (!lstatOrNothing(path)) makeDirs(path);
  const stats = lstatOrNothing(path);
  if (!stats?.isDirectory()) throw new UserError(`${path} is not a folder of the cohort (a link or a file was put there); refused`);
}

/** Moves `path` (inside `out`) under OUT/interrupted/ as `<name>.<ms>`, whatever it is (a link is moved, not followed). */
export function setAsideEntry(out: string, path: string, why: string, log: (line: string) => void): void {
  realFolder(join(out, INTERRUPTED_FOLDER));
  const to = join(out, INTERRUPTED_FOLDER, `${basename(path)}.${Date.now()}`);
  renameSync(path, to);
  log(`cohort: ${path} ${why}: set aside as ${to}`);
}

/** The cohort's folder `path` (inside `out`), a real one: anything else found at its name is set aside first. */
export function ownFolder(out: string, path: string, log: (line: string) => void): void {
  const stats = lstatOrNothing(path);
  if (stats && !stats.isDirectory()) setAsideEntry(out, path, 'was no folder of the cohort (a link, FIFO or file was put there)', log);
  realFolder(path);
}
