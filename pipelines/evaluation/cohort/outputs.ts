// What a cohort leaves beside its results: summary.json (the cells and family-macro cells with the
// controls and gains, the bootstrap's settings), summary.csv and macro.csv (the same cells, one column
// per control and gain), and the figure cohort-recovery.svg/.png (family-macro recovery against
// budget: the agent with the controls, drawn by the controls' figure code; one that cannot be drawn is a
// warning). The summaries say how many episodes were planned and are held, and which were left out and
// why. Each file is written atomically. And the report `cohort compare` writes (OUT/report/: the
// page, the Markdown and LaTeX tables, compare.json, CSV, the figure), the cohort and each of its
// controls as the methods, with the family-macro table the terminal shows.
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { lstatOrNothing } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import { writeFileAtomic, writeJsonAtomic } from '../../core/fsutil.ts';
import { digest } from '../../core/hashing.ts';
import type { Settings } from '../../core/settings.ts';
import { drawRecoveryFigure } from '../controls/outputs.ts';
import type { StoredRecord } from '../controls/records.ts';
import { cellsCsv, macroCells } from '../controls/summary.ts';
import type { LeftOut as ComparisonLeftOut } from '../compare/methods.ts';
import { cohortMethodName, controlsAsMethods, methodRow, uniqueNames } from '../compare/methods.ts';
import { type ComparisonOutcome, writeComparison } from '../compare/outputs.ts';
import { type Comparison, compareMethods, type Method } from '../compare/statistics.ts';
import { printable, significant } from '../compare/tables.ts';
import { setAsideEntry } from './folders.ts';
import { type CohortDefinition, type PlannedEpisode, plannedEpisodes, REPORT_FOLDER } from './plan.ts';
import { recordCohort, type StoredResult } from './results.ts';
import { BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, cohortCells, cohortMacroCells, flatCells, type LeftOut } from './summary.ts';

export const FIGURE_NAME = 'cohort-recovery';

export interface CohortFiles {
  summary: string;
  summary_csv: string;
  macro_csv: string;
  figures: string[];
}

/** Rows with every key of any row, in order of first appearance (a control missing from a cell is empty). */
function csvOf(rows: readonly Record<string, unknown>[]): string {
  const keys = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  return cellsCsv(
    rows.map((r) => Object.fromEntries(keys.map((k) => [k, r[k] ?? null]))),
    ['planned', 'episodes', 'delivered', 'left_out'],
  );
}

/** The name the agent's line has in the figure: its `agent` label, else "agent". */
const agentName = (definition: CohortDefinition) => printable(`agent: ${definition.labels.agent ?? definition.agent.slice(0, 40)}`);

/** What the summaries are made of: the plan, the lines that count, the episodes left out and why. */
export interface CohortHeld {
  planned: readonly PlannedEpisode[];
  results: readonly StoredResult[];
  leftOut: readonly LeftOut[];
  /** Where a warning goes (a figure that cannot be drawn). */
  log: (line: string) => void;
}

export function writeCohortSummaries(
  settings: Settings,
  out: string,
  definition: CohortDefinition,
  given: CohortHeld | readonly StoredResult[],
  controls: readonly StoredRecord[],
): CohortFiles {
  // the results alone: every planned episode not among them is left out, unsaid why
  const held: CohortHeld = Array.isArray(given)
    ? { planned: plannedEpisodes(definition), results: given, leftOut: [], log: () => {} }
    : (given as CohortHeld);
  const { planned, results } = held;
  const ids = new Set(results.map((r) => r.episode));
  const leftOut = Array.isArray(given)
    ? planned.filter((p) => !ids.has(p.id)).map((p) => ({ episode: p.id, reason: 'no results line' }))
    : held.leftOut;
  const cells = cohortCells(planned, results, controls, leftOut);
  const macro = cohortMacroCells(results, controls);
  const files: CohortFiles = {
    summary: join(out, 'summary.json'),
    summary_csv: join(out, 'summary.csv'),
    macro_csv: join(out, 'macro.csv'),
    figures: [],
  };
  writeJsonAtomic(files.summary, {
    definition_sha256: digest(definition),
    agents_sandboxed: definition.agents_sandboxed === true,
    labels: definition.labels,
    planned: planned.length,
    episodes: results.length,
    delivered: results.filter((r) => r.artifact_valid).length,
    left_out: leftOut,
    bootstrap: { unit: 'source', resamples: BOOTSTRAP_RESAMPLES, seed: BOOTSTRAP_SEED, interval: 'percentile 2.5 to 97.5' },
    cells,
    family_macro: macro,
  });
  writeFileAtomic(files.summary_csv, csvOf(flatCells(cells)));
  writeFileAtomic(files.macro_csv, csvOf(flatCells(macro)));
  const conditions = new Set(results.map((r) => r.condition));
  const controlLines = macroCells(controls.filter((r) => conditions.has(r.condition)));
  // the figure only draws what the tables hold: one that cannot be drawn is said, and the cohort stands
  try {
    if (macro.length)
      files.figures = drawRecoveryFigure(
        settings,
        out,
        [...macro.map((c) => ({ track: c.track, method: agentName(definition), budget: c.budget, recovery: c.recovery })), ...controlLines],
        FIGURE_NAME,
      );
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    held.log(`cohort: warning: ${error.message.split('\n')[0]}; the summaries are written without it`);
  }
  return files;
}

/** The cohort and its controls as the methods of a comparison (compare/statistics.ts): the cohort first. */
function cohortMethods(
  out: string,
  definition: CohortDefinition,
  results: readonly StoredResult[],
  controls: readonly StoredRecord[],
): Method[] {
  const agent: Method = {
    name: cohortMethodName(definition.labels, results[0]?.cohort ?? recordCohort(definition.labels, out)), // the stored name the lines carry
    kind: 'cohort',
    from: out,
    rows: results.map((r) => methodRow(r, r.effect_recovery, r.artifact_valid)),
  };
  return uniqueNames([agent, ...controlsAsMethods(controls, join(out, 'controls'))]);
}

/** Per (track, budget): the agent's recovery with its interval, then its gain over each control with the paired interval. */
function gainTable(comparison: Comparison, agent: string): string[] {
  const lines: string[] = [];
  const span = ([low, high]: readonly [number, number], signed = false) => `[${significant(low, signed)}, ${significant(high, signed)}]`;
  for (const cell of comparison.cells) {
    const own = cell.methods[agent]!;
    lines.push(
      `${cell.track} B=${cell.budget} (${cell.conditions.length} condition(s), ${cell.sources} source(s)): ${printable(agent)} ${significant(own.recovery)} ${span(own.interval)}`,
    );
    for (const d of cell.differences) {
      if (d.a !== agent && d.b !== agent) continue;
      // the pair's difference is a − b: the gain over the other method, its sign turned when the agent is b
      const sign = d.a === agent ? 1 : -1;
      const gain = sign * d.difference;
      const interval: [number, number] = sign > 0 ? d.interval : [-d.interval[1], -d.interval[0]];
      lines.push(`  gain over ${printable(d.a === agent ? d.b : d.a)}: ${significant(gain, true)} ${span(interval, true)}`);
    }
  }
  return lines;
}

/**
 * The comparison report of the cohort against its controls in OUT/report/ (compare/outputs.ts), and
 * the terminal's table of it; undefined (said) when the cohort holds no result to compare.
 */
export function writeCohortReport(
  settings: Settings,
  out: string,
  definition: CohortDefinition,
  given: { results: readonly StoredResult[]; controls: readonly StoredRecord[]; leftOut: readonly LeftOut[]; command: string },
  log: (line: string) => void,
): { files?: ComparisonOutcome['files']; table: string[] } | undefined {
  if (!given.results.length) {
    log('cohort: no results line to compare: no report written');
    return undefined;
  }
  const methods = cohortMethods(out, definition, given.results, given.controls);
  const leftOut: ComparisonLeftOut[] = given.leftOut.map((l) => ({ from: out, what: `episode ${l.episode}`, why: l.reason }));
  // the table is wwref's whatever becomes of the files
  const table = gainTable(compareMethods(methods), methods[0]!.name);
  // written whole into a new folder of the cohort's own, then put in the place of the earlier report: no
  // file of an earlier report (or one an agent put there) outlives a report that could not be written
  const report = join(out, REPORT_FOLDER);
  const fresh = join(out, `.${REPORT_FOLDER}.${process.pid}.${randomBytes(8).toString('hex')}`);
  try {
    mkdirSync(fresh);
    const outcome = writeComparison(settings, fresh, methods, { command: given.command, leftOut });
    for (const warning of outcome.warnings) log(`cohort: warning: ${warning}`);
    const earlier = lstatOrNothing(report);
    if (earlier?.isDirectory())
      rmSync(report, { recursive: true, force: true }); // links inside are removed, never followed
    else if (earlier) setAsideEntry(out, report, `${report} was no folder of the cohort (a link, FIFO or file was put there)`, log);
    renameSync(fresh, report);
    const moved = Object.fromEntries(
      Object.entries(outcome.files).map(([k, v]) => [
        k,
        Array.isArray(v) ? v.map((f) => join(report, basename(f))) : join(report, basename(v)),
      ]),
    ) as unknown as ComparisonOutcome['files'];
    return { files: moved, table };
  } catch (error) {
    rmSync(fresh, { recursive: true, force: true });
    // like the figure: a report that cannot be written is a warning, the results and summaries stand
    if (!(error instanceof UserError) && !(error as NodeJS.ErrnoException).code) throw error;
    log(`cohort: warning: the report could not be written (${(error as Error).message.split('\n')[0]}); no report is left in ${report}`);
    if (lstatOrNothing(report)?.isDirectory()) rmSync(report, { recursive: true, force: true });
    return { table };
  }
}
