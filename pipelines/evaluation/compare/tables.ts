// A comparison as tables: CSV for programs (every digit, one row per method and cell, one per pair),
// Markdown and LaTeX for papers (3 significant digits, the interval beside each value; one table of
// recoveries and one of paired differences per track, methods best first, budgets as columns).
import { cellsCsv } from '../controls/summary.ts';
import type { Comparison, ComparisonCell } from './statistics.ts';

export const TRACK_TITLES: Record<string, string> = { four: 'four options', six: 'paired six options', six_added: 'added six options' };
const trackTitle = (track: string) => TRACK_TITLES[track] ?? track;

/**
 * What cannot be shown as itself: control characters (a newline, an escape sequence's ESC), format and
 * invisible ones (U+200B, U+2060, U+00AD, bidi overrides, variation selectors: any default-ignorable
 * code point), line and paragraph separators, private-use, surrogate and unassigned code points.
 */
export const UNSHOWABLE = /[\p{C}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/u;

/** A name as a table, a page or a terminal shows it: each character it cannot show as itself (UNSHOWABLE) as '?'. */
export const printable = (text: string) => text.replace(new RegExp(UNSHOWABLE.source, 'gu'), '?');

/** 3 significant digits (0.412, 1.00, 0.0351); a difference with its sign. */
export function significant(x: number, signed = false): string {
  const text = Math.abs(x) < 5e-324 ? '0.00' : x.toPrecision(3);
  return signed && x > 0 ? `+${text}` : text;
}

const withInterval = (x: number, [low, high]: readonly [number, number], signed = false) =>
  `${significant(x, signed)} [${significant(low, signed)}, ${significant(high, signed)}]`;

export function recoveryCsv(comparison: Comparison): string {
  const kinds = new Map(comparison.methods.map((m) => [m.name, m.kind]));
  return cellsCsv(
    comparison.cells.flatMap((c) =>
      Object.entries(c.methods).map(([method, m]) => ({
        track: c.track,
        budget: c.budget,
        method,
        kind: kinds.get(method),
        recovery: m.recovery,
        recovery_low: m.interval[0],
        recovery_high: m.interval[1],
        rank: m.rank,
        rows: m.rows,
        delivered_rate: m.delivered_rate,
        conditions: c.conditions.length,
        sources: c.sources,
        families: c.families,
      })),
    ),
    ['rank', 'rows', 'conditions'],
  );
}

export function differencesCsv(comparison: Comparison): string {
  return cellsCsv(
    comparison.cells.flatMap((c) =>
      c.differences.map((d) => ({
        track: c.track,
        budget: c.budget,
        a: d.a,
        b: d.b,
        difference: d.difference,
        difference_low: d.interval[0],
        difference_high: d.interval[1],
      })),
    ),
  );
}

/** A table as rows of cells: the header row first. */
type Grid = string[][];

/** Per track: the recovery grid (methods × budgets) and the differences grid (pairs × budgets). */
function trackGrids(comparison: Comparison): { track: string; recovery: Grid; differences: Grid }[] {
  const order = comparison.ranking.map((r) => r.method);
  const tracks = [...new Set(comparison.cells.map((c) => c.track))];
  return tracks.map((track) => {
    const cells = comparison.cells.filter((c) => c.track === track);
    const header = (first: string) => [first, ...cells.map((c) => `B = ${c.budget}`)];
    const cellOf = (c: ComparisonCell, method: string) => c.methods[method]!;
    const recovery: Grid = [
      header('method'),
      ...order.map((method) => [method, ...cells.map((c) => withInterval(cellOf(c, method).recovery, cellOf(c, method).interval))]),
    ];
    const differences: Grid = [
      header('difference'),
      ...cells[0]!.differences.map((d, k) => [
        `${d.a} − ${d.b}`,
        ...cells.map((c) => withInterval(c.differences[k]!.difference, c.differences[k]!.interval, true)),
      ]),
    ];
    return { track, recovery, differences };
  });
}

const markdownCell = (text: string) => printable(text).replace(/\|/g, '\\|');

function markdownGrid(grid: Grid): string {
  const [header, ...rows] = grid;
  const line = (cells: string[]) => `| ${cells.map(markdownCell).join(' | ')} |`;
  return [line(header!), `|${header!.map((_, k) => (k === 0 ? ' --- ' : ' ---: ')).join('|')}|`, ...rows.map(line)].join('\n');
}

export function markdownTables(comparison: Comparison): string {
  const parts = [
    '# Family-macro effect recovery, 95 % source-bootstrap intervals',
    '',
    `Each cell: the conditions every method has; ${comparison.bootstrap.resamples} resamples of the sources (seed ${comparison.bootstrap.seed}), the same draws for every method and pair (paired differences).`,
  ];
  for (const { track, recovery, differences } of trackGrids(comparison))
    parts.push('', `## ${trackTitle(track)}`, '', markdownGrid(recovery), '', markdownGrid(differences));
  parts.push(
    '',
    '## Ranking (mean rank over the cells)',
    '',
    markdownGrid([
      ['method', 'mean rank', 'cells'],
      ...comparison.ranking.map((r) => [r.method, significant(r.mean_rank), String(r.cells)]),
    ]),
  );
  if (comparison.not_shared.length)
    parts.push(
      '',
      `${comparison.not_shared.length} (method, condition, budget) cell(s) not shared by every method are left out (compare.json, not_shared).`,
    );
  return `${parts.join('\n')}\n`;
}

const LATEX_SPECIAL: Record<string, string> = {
  '\\': '\\textbackslash{}',
  '&': '\\&',
  '%': '\\%',
  $: '\\$',
  '#': '\\#',
  _: '\\_',
  '{': '\\{',
  '}': '\\}',
  '~': '\\textasciitilde{}',
  '^': '\\textasciicircum{}',
  '−': '$-$',
};

export const latexText = (text: string) => printable(text).replace(/[\\&%$#_{}~^−]/g, (c) => LATEX_SPECIAL[c]!);

/** A table cell in LaTeX: its text escaped, a number's minus sign as a mathematical minus ("-0.39" → "$-$0.39"). */
const latexCell = (text: string) => latexText(text).replace(/(^|[\s[(])-(?=\d)/g, '$1$-$');

function latexGrid(grid: Grid, caption: string): string {
  const [header, ...rows] = grid;
  const line = (cells: string[]) => `${cells.map(latexCell).join(' & ')} \\\\`;
  return [
    '\\begin{table}[t]',
    '\\centering',
    `\\caption{${latexText(caption)}}`,
    `\\begin{tabular}{l${'r'.repeat(header!.length - 1)}}`,
    '\\toprule',
    line(header!),
    '\\midrule',
    ...rows.map(line),
    '\\bottomrule',
    '\\end{tabular}',
    '\\end{table}',
  ].join('\n');
}

/** LaTeX tables (booktabs), one pair per track. */
export function latexTables(comparison: Comparison): string {
  const parts = [
    '% wwref cohort compare: family-macro effect recovery, 95 % paired source-bootstrap intervals; needs \\usepackage{booktabs}',
  ];
  for (const { track, recovery, differences } of trackGrids(comparison)) {
    parts.push('', latexGrid(recovery, `Family-macro effect recovery, ${trackTitle(track)} (95 % source-bootstrap interval).`));
    parts.push('', latexGrid(differences, `Paired differences of family-macro effect recovery, ${trackTitle(track)} (95 % interval).`));
  }
  return `${parts.join('\n')}\n`;
}
