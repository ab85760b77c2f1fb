// What a cohort leaves beside its results: summary.json (the cells and family-macro cells with the
// controls and gains, the bootstrap's settings), summary.csv and macro.csv (the same cells, one column
// per control and gain), and the figure cohort-recovery.svg/.png (family-macro recovery against
// budget: the agent with the controls, drawn by the controls' figure code; one that cannot be drawn is a
// warning). The summaries say how many episodes were planned and are held, and which were left out and
// why. Each file is written atomically.
import { join } from 'node:path';
import { UserError } from '../../core/errors.ts';
import { writeFileAtomic, writeJsonAtomic } from '../../core/fsutil.ts';
import { digest } from '../../core/hashing.ts';
import type { Settings } from '../../core/settings.ts';
import { drawRecoveryFigure } from '../controls/outputs.ts';
import type { StoredRecord } from '../controls/records.ts';
import { cellsCsv, macroCells } from '../controls/summary.ts';
import { type CohortDefinition, type PlannedEpisode, plannedEpisodes } from './plan.ts';
import type { StoredResult } from './results.ts';
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
const agentName = (definition: CohortDefinition) => `agent: ${definition.labels.agent ?? definition.agent.slice(0, 40)}`;

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
