// What a controls run leaves beside its records: summary.json (cells and family-macro cells, with the
// run's identity), summary.csv, macro.csv and the recovery figure. Each file is written atomically.
import { join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { writeFileAtomic, writeJsonAtomic } from '../../core/fsutil.ts';
import { ROOT } from '../../core/paths.ts';
import type { Settings } from '../../core/settings.ts';
import { runPython } from '../../execution/launcher.ts';
import type { StoredRecord } from './records.ts';
import { cellsCsv, macroCells, summaryCells } from './summary.ts';

export interface SummaryFiles {
  summary: string;
  summary_csv: string;
  macro_csv: string;
  figures: string[];
}

const FIGURE_SCRIPT = join(ROOT, 'workflows', 'evaluation', 'figure.py');

/** Writes the summaries of `records` into `out`; `meta` goes into summary.json as it is. */
export async function writeSummaries(
  settings: Settings,
  out: string,
  records: readonly StoredRecord[],
  meta: Record<string, unknown>,
  figures = true,
): Promise<SummaryFiles> {
  const cells = summaryCells(records);
  const macro = macroCells(records);
  const files: SummaryFiles = {
    summary: join(out, 'summary.json'),
    summary_csv: join(out, 'summary.csv'),
    macro_csv: join(out, 'macro.csv'),
    figures: [],
  };
  writeJsonAtomic(files.summary, { ...meta, records: records.length, cells, family_macro: macro });
  writeFileAtomic(files.summary_csv, cellsCsv(cells));
  writeFileAtomic(files.macro_csv, cellsCsv(macro));
  if (figures) {
    const child = runPython(settings, [FIGURE_SCRIPT], {
      env: { MPLBACKEND: 'Agg', MPLCONFIGDIR: join(settings.paths.cache, 'matplotlib') },
      input: JSON.stringify({ out, cells: macro }),
      reject: false,
    });
    if (child.exitCode !== 0) {
      const last = String(child.stderr).trim().split('\n').pop() || `exit status ${child.exitCode}`;
      throw new UserError(`the controls' figure could not be drawn (matplotlib): ${last}`);
    }
    files.figures = (JSON.parse(String(child.stdout)) as string[]).map((f) => join(out, f));
  }
  return files;
}
