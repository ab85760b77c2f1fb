// What a controls run leaves beside its records: summary.json (cells and family-macro cells, with the
// run's identity), summary.csv, macro.csv and the recovery figure. Each file is written atomically; a
// figure that cannot be drawn is a warning.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { writeFileAtomic, writeJsonAtomic } from '../../core/fsutil.ts';
import { ROOT } from '../../core/paths.ts';
import type { Settings } from '../../core/settings.ts';
import { runPython } from '../../execution/launcher.ts';
import type { StoredRecord } from './records.ts';
import { cellsCsv, type LeftOut, macroCells, summaryCells } from './summary.ts';

export interface SummaryFiles {
  summary: string;
  summary_csv: string;
  macro_csv: string;
  figures: string[];
}

const FIGURE_SCRIPT = join(ROOT, 'workflows', 'evaluation', 'figure.py');
const SUMMARY_FILES = ['summary.json', 'summary.csv', 'macro.csv', 'controls-recovery.svg', 'controls-recovery.png'];

/**
 * Refuses (UserError) a folder a summary must not write into: a controls run's (its summary belongs to
 * its records), or one holding other files than a summary's.
 */
export function checkSummaryFolder(out: string): void {
  if (!existsSync(out)) return;
  const present = readdirSync(out);
  if (present.includes('run.json'))
    throw new UserError(`--out ${out} is a controls run's folder, whose summary belongs to its records; name another folder`);
  const foreign = present.filter((f) => !SUMMARY_FILES.includes(f));
  if (foreign.length)
    throw new UserError(
      `--out ${out} holds other files than a summary's (${foreign.slice(0, 3).join(', ')}${foreign.length > 3 ? ', …' : ''}); name a new or empty folder`,
    );
}

/** Writes the summaries of `records` into `out`; `meta` goes into summary.json as it is. */
export async function writeSummaries(
  settings: Settings,
  out: string,
  records: readonly StoredRecord[],
  meta: Record<string, unknown>,
  figures = true,
  leftOut: ReadonlyMap<string, readonly LeftOut[]> = new Map(),
  warn: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Promise<SummaryFiles> {
  const cells = summaryCells(records, leftOut);
  const macro = macroCells(records);
  const files: SummaryFiles = {
    summary: join(out, 'summary.json'),
    summary_csv: join(out, 'summary.csv'),
    macro_csv: join(out, 'macro.csv'),
    figures: [],
  };
  writeJsonAtomic(files.summary, { ...meta, records: records.length, cells, family_macro: macro });
  // a left-out record in CSV: "where: why", several separated by "; "
  const rows = cells.map((c) => ({ ...c, left_out: c.left_out.map((l) => `${l.record}: ${l.why}`).join('; ') }));
  writeFileAtomic(files.summary_csv, cellsCsv(rows));
  writeFileAtomic(files.macro_csv, cellsCsv(macro));
  try {
    if (figures) files.figures = drawRecoveryFigure(settings, out, macro);
  } catch (error) {
    // the numbers are written: a figure that cannot be drawn is said, not a failure of the run
    if (!(error instanceof UserError)) throw error;
    warn(`controls: warning: ${error.message}; the summaries are written without it`);
  }
  return files;
}

/**
 * The recovery figure (workflows/evaluation/figure.py): family-macro recovery against budget, one line
 * per `method` of `cells` (with `low`/`high`: its interval as a band), one panel per track; written into
 * `out` as `<name>.svg` and `.png`. `style`: each method's colour, and a dodge keeping equal lines apart.
 */
export function drawRecoveryFigure(
  settings: Settings,
  out: string,
  cells: readonly { track: string; method: string; budget: number; recovery: number }[],
  name = 'controls-recovery',
  style: { colours?: Record<string, string>; dodge?: boolean } = {},
): string[] {
  const child = runPython(settings, [FIGURE_SCRIPT], {
    env: { MPLBACKEND: 'Agg', MPLCONFIGDIR: join(settings.paths.cache, 'matplotlib') },
    input: JSON.stringify({ out, cells, name, ...style }),
    reject: false,
  });
  if (child.exitCode !== 0) {
    const last = String(child.stderr).trim().split('\n').pop() || `exit status ${child.exitCode}`;
    throw new UserError(`the recovery figure could not be drawn (matplotlib): ${last}`);
  }
  return (JSON.parse(String(child.stdout)) as string[]).map((f) => join(out, f));
}
