// The numerical controls beside a cohort: the control records of exactly the cohort's conditions and
// budgets, either read from a finished `wwref controls run` folder (--controls DIR: its records.jsonl,
// which must hold every cell, on the cohort's references, each record recomputed and used only as
// recomputation gives it, verify.ts) or computed by the controls job into
// OUT/controls/ (one run per set of budgets: conditions of different tracks have different default
// budgets), which resumes like any controls run.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Interrupted, UserError } from '../../core/errors.ts';
import type { Settings } from '../../core/settings.ts';
import { loadCatalog } from '../../references/store.ts';
import { catalogLookup, runControls } from '../controls/job.ts';
import { readControlRecords, type StoredRecord } from '../controls/records.ts';
import { RECORDS_FILE } from '../controls/resume.ts';
import { checkCompleteRun, verifyControlRecords } from '../controls/verify.ts';
import { ownFolder, setAsideEntry } from './folders.ts';
import type { CohortDefinition } from './plan.ts';

export const CONTROLS_FOLDER = 'controls';

/** The control records of the cohort's cells. */
export async function cohortControls(
  settings: Settings,
  definition: CohortDefinition,
  options: { out: string; controls?: string; workers: number; log: (line: string) => void; warn?: (line: string) => void },
): Promise<StoredRecord[]> {
  const wanted = new Map(definition.conditions.map((c) => [c.id, c]));
  const inCells = (r: StoredRecord) => wanted.get(r.condition)?.budgets.includes(r.budget) ?? false;
  if (options.controls !== undefined) {
    const file = join(options.controls, RECORDS_FILE);
    if (!existsSync(file)) throw new UserError(`--controls ${options.controls} holds no ${RECORDS_FILE} (a finished 'wwref controls run')`);
    const catalog = loadCatalog(settings);
    const all = readControlRecords(file, catalogLookup(catalog));
    // every control method at the default seeds in every cell of the cohort: a folder cut down is refused before any of it is used
    const cells = definition.conditions.flatMap((c) => {
      const condition = catalog.conditions.get(c.id);
      if (!condition) throw new UserError(`--controls ${options.controls}: the cohort's condition ${c.id} is not in the catalog`);
      return c.budgets.map((budget) => ({ condition, budget }));
    });
    checkCompleteRun(options.controls, all, cells);
    const read = all.filter(inCells);
    const other = read.find((r) => {
      const reference = (r as { reference?: { table_sha256?: unknown } }).reference;
      return reference?.table_sha256 !== wanted.get(r.condition)!.reference.table_sha256;
    });
    if (other)
      throw new UserError(
        `--controls ${options.controls}: ${other.read_from}: the control of ${other.condition} names reference table ` +
          `${String((other as { reference?: { table_sha256?: unknown } }).reference?.table_sha256 ?? 'none').slice(0, 12)}, the cohort's is ` +
          `${wanted.get(other.condition)!.reference.table_sha256.slice(0, 12)}`,
      );
    // used only as recomputation on the references gives them: an edited score, a forged table, a second copy are refused
    const verified = await verifyControlRecords(settings, read, {
      workers: options.workers,
      requireReference: true,
      duplicates: 'refuse',
      log: options.log,
    });
    return verified.records;
  }
  const groups = new Map<string, string[]>();
  for (const c of definition.conditions) groups.set(c.budgets.join('-'), [...(groups.get(c.budgets.join('-')) ?? []), c.id]);
  const warn = options.warn ?? options.log;
  const root = join(options.out, CONTROLS_FOLDER);
  ownFolder(options.out, root, warn); // never followed through a link an agent put there
  const records: StoredRecord[] = [];
  for (const [budgets, conditions] of groups) {
    const folder = groups.size === 1 ? root : join(root, `b${budgets}`);
    const run = () => {
      ownFolder(options.out, folder, warn);
      return runControls(settings, {
        conditions,
        budgets: budgets.split('-').map(Number),
        out: folder,
        workers: options.workers,
        log: options.log,
        quiet: true,
        figures: false, // the cohort's figure draws the controls beside the agent
      });
    };
    let outcome: Awaited<ReturnType<typeof runControls>>;
    try {
      outcome = await run();
    } catch (error) {
      if (!(error instanceof UserError) || error instanceof Interrupted) throw error;
      // the cohort's own controls folder, which its agents can write into (a FIFO at run.json…): set
      // aside and computed afresh, once, so that nothing an agent left makes the cohort unresumable
      setAsideEntry(options.out, folder, `${folder} could not be resumed (${error.message.split('\n')[0]})`, warn);
      outcome = await run();
    }
    records.push(...readControlRecords(outcome.files.records));
  }
  return records;
}
