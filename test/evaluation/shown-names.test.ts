// Issue 40, third red team (Q5): a name holding characters a table cannot show as themselves (format and
// invisible ones such as U+2060 WORD JOINER, bidi overrides, U+00AD, separators, private-use and
// unassigned code points) could look like another method's ("design_degree2" with U+2060 inside). Such a
// cohort name is refused at creation; wherever a name is shown (terminal, Markdown, LaTeX, CSV, HTML)
// each such character is '?', and two methods whose shown names are equal are told apart.
import { describe, expect, it } from 'vitest';
import { cohortNameProblem } from '../../pipelines/evaluation/cohort/plan.ts';
import { exceptionLine } from '../../pipelines/evaluation/cohort/run.ts';
import { uniqueNames } from '../../pipelines/evaluation/compare/methods.ts';
import { renderComparisonReport } from '../../pipelines/evaluation/compare/report.ts';
import { compareMethods, type Method } from '../../pipelines/evaluation/compare/statistics.ts';
import { differencesCsv, latexTables, markdownTables, printable, recoveryCsv } from '../../pipelines/evaluation/compare/tables.ts';

/** One of each kind the red team named. */
const HIDDEN: [string, string][] = [
  ['U+2060 word joiner', '\u2060'],
  ['U+200B zero width space', '\u200b'],
  ['U+202E right-to-left override', '\u202e'],
  ['U+202A left-to-right embedding', '\u202a'],
  ['U+2066 left-to-right isolate', '\u2066'],
  ['U+2069 pop directional isolate', '\u2069'],
  ['U+00AD soft hyphen', '\u00ad'],
  ['U+2028 line separator', '\u2028'],
  ['U+2029 paragraph separator', '\u2029'],
  ['U+E000 private use', '\ue000'],
  ['U+0378 unassigned', '\u0378'],
  ['U+FEFF byte order mark', '\ufeff'],
  ['U+FE0F variation selector', '\ufe0f'],
  ['U+0085 next line', '\u0085'],
];
const ANY_HIDDEN = new RegExp(`[${HIDDEN.map(([, c]) => c).join('')}\\u0000-\\u0009\\u000b-\\u001f]`, 'u');

describe('a cohort name', () => {
  it('holding a format, invisible, private-use or unassigned character is refused at creation, naming the code point', () => {
    for (const [what, c] of HIDDEN) {
      const problem = cohortNameProblem(`design_degree2${c}`);
      expect(problem, what).toBeDefined();
      if (c !== '\u0085') expect(problem, what).toContain(`U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`);
    }
    for (const name of ['design_degree2', 'agent run 3', 'Kéa-été (ünïcode)', 'μ-agent'])
      expect(cohortNameProblem(name), name).toBeUndefined();
  });

  it('is shown with each such character as ?', () => {
    for (const [what, c] of HIDDEN) expect(printable(`a${c}b`), what).toBe('a?b');
    expect(printable('Kéa-été μ')).toBe('Kéa-été μ');
  });
});

describe('methods whose shown names are equal', () => {
  const rows = (shift: number) =>
    ['wine', 'concrete', 'airfoil'].map((condition, k) => ({
      condition,
      instance: condition,
      family: condition,
      track: 'four',
      budget: 4,
      recovery: 0.2 + 0.1 * k + shift,
      delivered: true,
    }));
  const methods: Method[] = [
    { name: 'design_degree2', kind: 'control', from: '/runs/controls', rows: rows(0) },
    // a stored name with a word joiner inside: it must not pass for the control
    { name: 'design_\u2060degree2', kind: 'cohort', from: '/runs/agent\u202ea', rows: rows(0.3) },
    // a name that is shown as the one above
    { name: 'design_?degree2', kind: 'cohort', from: '/runs/agent\u202ea', rows: rows(0.2) },
    { name: 'agent\u200b', kind: 'cohort', from: '/runs/b', rows: rows(0.1) },
  ];

  it('are told apart, and no table, page or CSV shows a hidden character', () => {
    const named = uniqueNames(methods);
    const names = named.map((m) => m.name);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).not.toMatch(ANY_HIDDEN);
    // nothing but the control is shown as the control
    expect(names.filter((n) => n.startsWith('design_degree2'))).toEqual(['design_degree2']);
    expect(names[1]).not.toBe(names[2]);
    const comparison = compareMethods(named);
    const page = renderComparisonReport(comparison, { command: 'wwref cohort compare', colours: {}, figures: [] });
    for (const [what, output] of [
      ['csv', recoveryCsv(comparison)],
      ['differences', differencesCsv(comparison)],
      ['markdown', markdownTables(comparison)],
      ['latex', latexTables(comparison)],
      ['html', page],
    ]) {
      expect(output, what).not.toMatch(ANY_HIDDEN);
      expect(output, what).toContain('?degree2');
    }
    expect(page).toContain('/runs/agent?a');
  });
});

describe("an agent's exception line quoted on the terminal", () => {
  it('cannot lay out a line of its own: blanks collapsed, hidden characters shown as ?, at most 200 characters', () => {
    // padding to the next terminal row, then text shaped like a row of the cohort's table
    const forged = `Error: x${' '.repeat(150)}four B=4 (1 condition(s), 1 source(s)): c_wrap 0.912 [0.912, 0.912]`;
    expect(exceptionLine(`Traceback\n${forged}\n`)).toBe('Error: x four B=4 (1 condition(s), 1 source(s)): c_wrap 0.912 [0.912, 0.912]');
    expect(exceptionLine('ValueError: \u202eevil\u2060\tname\r\n\n')).toBe('ValueError: ?evil? name');
    const long = exceptionLine(`E: ${'y'.repeat(500)}`);
    expect([...long]).toHaveLength(201);
    expect(long.endsWith('…')).toBe(true);
    // a Python exception group's borders are skipped, its '| ' prefixes stripped
    expect(exceptionLine("  | ValueError: no column 'yield'\n  +------------------------------------\n")).toBe(
      "ValueError: no column 'yield'",
    );
  });
});
