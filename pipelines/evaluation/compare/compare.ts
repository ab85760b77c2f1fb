// `wwref cohort compare`: reads the methods (methods.ts), compares them on the cells they share
// (statistics.ts) and writes the comparison (outputs.ts); returns the family-macro table the terminal
// shows. Nothing is written into the folders and files read.
import { dirname, join } from 'node:path';
import { lstatOrNothing } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import type { Settings } from '../../core/settings.ts';
import { readVerifiedCohort } from '../cohort/verified.ts';
import { cohortMethodName, controlMethods, type LeftOut, methodRow, publishedMethods, uniqueNames } from './methods.ts';
import { type ComparisonOutcome, writeComparison } from './outputs.ts';
import type { Method } from './statistics.ts';
import { printable, significant } from './tables.ts';

export interface CompareRequest {
  cohorts: readonly string[];
  controls?: string;
  published: readonly string[];
  /** The output folder, already checked (cli/output-path.ts). */
  out: string;
  command: string;
  log: (line: string) => void;
}

/** A cohort folder as one method: the results lines its own check vouches for. */
async function cohortMethod(
  settings: Settings,
  dir: string,
  leftOut: LeftOut[],
  log: (line: string) => void,
  cells: { condition: string; budget: number }[],
): Promise<Method> {
  const cohort = await readVerifiedCohort(settings, dir, log);
  for (const c of cohort.definition.conditions) for (const budget of c.budgets) cells.push({ condition: c.id, budget });
  for (const [episode, why] of cohort.leftOut) leftOut.push({ from: dir, what: `episode ${episode}`, why });
  const rows = cohort.results.map((r) => methodRow(r, r.effect_recovery, r.artifact_valid));
  if (!rows.length) throw new UserError(`cohort ${dir} has no result its receipts vouch for (${cohort.leftOut.size} left out)`);
  return { name: cohortMethodName(cohort.definition.labels, cohort.name), kind: 'cohort', from: dir, rows };
}

/** The terminal's table: each cell's methods, best first, with their intervals. */
function terminalTable(outcome: ComparisonOutcome): string[] {
  const lines: string[] = [];
  for (const cell of outcome.comparison.cells) {
    lines.push(`${cell.track} B=${cell.budget} (${cell.conditions.length} condition(s), ${cell.sources} source(s)):`);
    for (const name of cell.ranking) {
      const m = cell.methods[name]!;
      lines.push(
        `  ${m.rank}. ${printable(name)}: ${significant(m.recovery)} [${significant(m.interval[0])}, ${significant(m.interval[1])}]`,
      );
    }
  }
  return lines;
}

export async function compareCohorts(settings: Settings, request: CompareRequest): Promise<ComparisonOutcome & { table: string[] }> {
  // a folder of its own: never a cohort's, a controls run's, or a cohort's report (each rewritten by its command)
  const own = [join(request.out, 'cohort.json'), join(request.out, 'run.json'), join(dirname(request.out), 'cohort.json')].find((f) =>
    lstatOrNothing(f),
  );
  if (own)
    throw new UserError(
      `--out ${request.out} is part of a cohort's or a controls run's folder (${own} is there); name a folder of its own`,
    );
  const leftOut: LeftOut[] = [];
  const methods: Method[] = [];
  const cells: { condition: string; budget: number }[] = [];
  for (const dir of request.cohorts) methods.push(await cohortMethod(settings, dir, leftOut, request.log, cells));
  if (request.controls !== undefined) methods.push(...(await controlMethods(settings, request.controls, leftOut, request.log, cells)));
  for (const file of request.published) methods.push(...publishedMethods(settings, file, leftOut));
  if (methods.length < 2 && leftOut.length)
    throw new UserError(
      `nothing to compare: ${methods.length} method(s), ${leftOut.length} run(s) left out (e.g. ${leftOut[0]!.what}: ${leftOut[0]!.why})`,
    );
  const outcome = writeComparison(settings, request.out, uniqueNames(methods), { command: request.command, leftOut });
  for (const warning of outcome.warnings) request.log(`compare: ${warning}`);
  if (leftOut.length)
    request.log(`compare: ${leftOut.length} run(s) left out (compare.json, left_out), e.g. ${leftOut[0]!.what}: ${leftOut[0]!.why}`);
  return { ...outcome, table: terminalTable(outcome) };
}
