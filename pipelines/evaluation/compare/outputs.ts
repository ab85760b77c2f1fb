// What `wwref cohort compare` writes into --out, each file atomically: compare.json (the comparison,
// the methods' colours, what was left out and why, the command), compare.csv and differences.csv
// (every digit), compare.md and compare.tex (tables to paste), the figure compare-recovery.svg/.png
// (family-macro recovery against budget with interval bands, one colour per method as in the page)
// and report.html. A figure that cannot be drawn is a warning: the tables are written all the same.
import { join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { makeDirs, writeFileAtomic, writeJsonAtomic } from '../../core/fsutil.ts';
import type { Settings } from '../../core/settings.ts';
import { drawRecoveryFigure } from '../controls/outputs.ts';
import type { LeftOut } from './methods.ts';
import { renderComparisonReport } from './report.ts';
import { type Comparison, compareMethods, type Method } from './statistics.ts';
import { differencesCsv, latexTables, markdownTables, recoveryCsv } from './tables.ts';

export const FIGURE_NAME = 'compare-recovery';

/** matplotlib's tab10, then a darker ten: a method keeps its colour in the figure and the page. */
const PALETTE = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
  '#0b3c5d',
  '#a0522d',
  '#1b5e20',
  '#7f0000',
  '#4a148c',
  '#3e2723',
  '#880e4f',
  '#263238',
  '#827717',
  '#006064',
];

export interface ComparisonFiles {
  json: string;
  csv: string;
  differences_csv: string;
  markdown: string;
  latex: string;
  report: string;
  figures: string[];
}

export interface ComparisonOutcome {
  comparison: Comparison;
  files: ComparisonFiles;
  warnings: string[];
}

export function writeComparison(
  settings: Settings,
  out: string,
  methods: readonly Method[],
  context: { command: string; leftOut: readonly LeftOut[] },
): ComparisonOutcome {
  if (methods.length < 2)
    throw new UserError(`nothing to compare: ${methods.length} method(s); give two cohorts, or a cohort and --controls or --published`);
  const comparison = compareMethods(methods);
  if (!comparison.cells.length)
    throw new UserError(
      `the methods share no (condition, budget) cell: ${methods.map((m) => `${m.name} has ${new Set(m.rows.map((r) => `${r.condition} B=${r.budget}`)).size}`).join('; ')}`,
    );
  makeDirs(out); // only now: a comparison refused leaves no folder behind
  const colours = Object.fromEntries(methods.map((m, k) => [m.name, PALETTE[k % PALETTE.length]!]));
  const files: ComparisonFiles = {
    json: join(out, 'compare.json'),
    csv: join(out, 'compare.csv'),
    differences_csv: join(out, 'differences.csv'),
    markdown: join(out, 'compare.md'),
    latex: join(out, 'compare.tex'),
    report: join(out, 'report.html'),
    figures: [],
  };
  const warnings: string[] = [];
  try {
    const cells = comparison.cells.flatMap((c) =>
      Object.entries(c.methods).map(([method, m]) => ({
        track: c.track,
        method,
        budget: c.budget,
        recovery: m.recovery,
        low: m.interval[0],
        high: m.interval[1],
      })),
    );
    files.figures = drawRecoveryFigure(settings, out, cells, FIGURE_NAME, { colours, dodge: true });
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    warnings.push(`${error.message}; the tables and the page are written without it`);
  }
  writeJsonAtomic(files.json, { ...comparison, colours, left_out: context.leftOut, command: context.command });
  writeFileAtomic(files.csv, recoveryCsv(comparison));
  writeFileAtomic(files.differences_csv, differencesCsv(comparison));
  writeFileAtomic(files.markdown, markdownTables(comparison));
  writeFileAtomic(files.latex, latexTables(comparison));
  const figureNames = files.figures.map((f) => f.slice(out.length + 1));
  writeFileAtomic(files.report, renderComparisonReport(comparison, { command: context.command, colours, figures: figureNames }));
  return { comparison, files, warnings };
}
