// Figure files (`wwref report --figures DIR`): each condition's response surface and effect heat map
// as SVG and PNG, for papers and for readers without a browser. Drawn by matplotlib in the pinned
// Python runtime (figures.py beside this file): a maintained plotting library with its own fonts, so
// the files look the same on every machine and need no browser or system font. This module only
// sends the numbers (the same analysis the HTML report draws) and lists what was written.
import { join } from 'node:path';
import { UserError } from '../core/errors.ts';
import { makeDirs } from '../core/fsutil.ts';
import { ROOT } from '../core/paths.ts';
import type { Settings } from '../core/settings.ts';
import { runPython, howItEnded } from '../execution/launcher.ts';
import type { ConditionAnalysis } from './effects.ts';

export const FIGURE_SCRIPT = join(ROOT, 'pipelines', 'analysis', 'figures.py');

/** The files one condition gets, relative to the figure folder. */
export function figureFiles(condition: string): string[] {
  return ['surface', 'effects'].flatMap((kind) => [`${condition}.${kind}.svg`, `${condition}.${kind}.png`]);
}

/** Writes the figures of every analysed condition into `dir`; returns the file names written. */
export function writeFigures(settings: Settings, dir: string, analyses: readonly ConditionAnalysis[]): string[] {
  makeDirs(dir);
  const conditions = analyses.map((a) => {
    const cols = 2 ** (a.dimensions - 1);
    // effects come option by option, backgrounds ascending: row i is effects[i*cols … (i+1)*cols)
    const effects = [...Array(a.dimensions).keys()].map((i) => a.effects.slice(i * cols, (i + 1) * cols).map((e) => e.effect));
    return {
      condition: a.condition,
      family: a.family,
      dimensions: a.dimensions,
      utilities: a.surface.utilities,
      best_mask: a.best_mask,
      effects,
    };
  });
  const child = runPython(settings, [FIGURE_SCRIPT], {
    // matplotlib's font cache goes to wwref's cache folder, never into the figure folder
    env: { MPLBACKEND: 'Agg', MPLCONFIGDIR: join(settings.paths.cache, 'matplotlib') },
    input: JSON.stringify({ out: dir, conditions }),
    reject: false,
    maxBuffer: 16 * 1024 * 1024,
  });
  if (child.exitCode !== 0) {
    const last = howItEnded(child);
    throw new UserError(`the figures could not be drawn (matplotlib): ${last}`);
  }
  return JSON.parse(String(child.stdout)) as string[];
}
