// A finished cohort folder read by another command (`wwref cohort compare`): its definition
// (cohort.json, strict JSON of the definition's form whose definition_sha256 is its digest: an edited
// file is refused), its name (fixed in cohort.json at its creation), the results lines its own check
// vouches for (each made again from its episode's receipt and the plan, the shared estimators
// refitted: results.ts `earlierResults`), and what was left out, with why: the planned episodes
// without such a line, and the lines that are no planned episode's. Nothing is written into the folder.
import { join, resolve } from 'node:path';
import { digest } from '../../core/hashing.ts';
import * as z from 'zod';
import { lstatOrNothing } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import type { Settings } from '../../core/settings.ts';
import { readStrictJsonFile } from '../../analysis/strict-json.ts';
import { startControlsWorker } from '../controls/worker.ts';
import { sharedScores } from '../shared-scores.ts';
import { COHORT_FILE, type CohortDefinition, EPISODES_FOLDER, MAX_REPEATS, plannedEpisodes, storedCohortName } from './plan.ts';
import { earlierResults, RESULTS_FILE, StoredResult } from './results.ts';
import { fixedSurfaces } from './run.ts';

const Sha = z.string().regex(/^[0-9a-f]{64}$/);
const Definition = z.looseObject({
  cohort_version: z.literal(2),
  agent: z.string(),
  repeats: z.number().int().min(1).max(MAX_REPEATS),
  labels: z.record(z.string(), z.string()),
  session_seconds: z.number().positive(),
  calls: z.number().int().nonnegative(),
  call_seconds: z.number().positive(),
  references: z.string(),
  conditions: z
    .array(
      z.strictObject({
        id: z.string(),
        instance: z.string(),
        family: z.string(),
        dimensions: z.number().int().positive(),
        track: z.enum(['four', 'six', 'six_added']),
        budgets: z.array(z.number().int().nonnegative()).min(1),
        reference: z.strictObject({ table_sha256: Sha, plan_sha256: Sha }),
      }),
    )
    .min(1),
});

export interface VerifiedCohort {
  /** The cohort's name (the records' `cohort`), as cohort.json fixed it at its creation (plan.ts storedCohortName). */
  name: string;
  definition: CohortDefinition;
  /** The lines its receipts vouch for, in the plan's order. */
  results: StoredResult[];
  /** Each planned episode without such a line, and each line that is no planned episode's (`<episode> (line N)`), and why. */
  leftOut: Map<string, string>;
}

/** The verified results of the cohort folder `dir`; a UserError (one line) when it is no readable cohort. */
export async function readVerifiedCohort(settings: Settings, dir: string, log: (line: string) => void): Promise<VerifiedCohort> {
  const file = join(dir, COHORT_FILE);
  if (!lstatOrNothing(file)) throw new UserError(`${dir} is no cohort folder (no ${COHORT_FILE})`);
  const { definition, name } = readDefinition(file, resolve(dir));
  const planned = plannedEpisodes(definition);
  const surfaceOf = fixedSurfaces(settings, definition);
  const worker = startControlsWorker(settings);
  worker.catch(() => undefined);
  try {
    const kept = await earlierResults(join(dir, RESULTS_FILE), planned, {
      definition,
      cohort: name,
      episodes: join(dir, EPISODES_FOLDER),
      surfaceOf,
      refit: async (surface, observations, own) => sharedScores(await worker, surface, observations, own),
    });
    if (kept.unreadable) throw new UserError(kept.unreadable);
    // no receipt is read through a link: an `episodes` that is no real folder vouches for no line
    const episodes = lstatOrNothing(join(dir, EPISODES_FOLDER));
    if (episodes && !episodes.isDirectory()) {
      const why = `its ${EPISODES_FOLDER} is not a real folder (a link or a file was put there): no receipt is read through it`;
      kept.lines.clear();
      for (const p of planned) kept.problems.set(p.id, why);
    }
    if (kept.dropped)
      log(`cohort ${dir}: ${kept.dropped} line(s) of its ${RESULTS_FILE} left out (not what their episode's receipt gives)`);
    const results: StoredResult[] = [];
    const leftOut = new Map<string, string>();
    for (const p of planned) {
      const line = kept.lines.get(p.id);
      if (line === undefined) leftOut.set(p.id, kept.problems.get(p.id) ?? 'no results line');
      else results.push(StoredResult.parse(JSON.parse(line)));
    }
    for (const [what, why] of kept.strays) leftOut.set(what, why);
    return { name, definition, results, leftOut };
  } finally {
    await (await worker.catch(() => undefined))?.close();
  }
}

/** cohort.json's definition (of the form `cohort run` writes, its digest the one stored) and name; a UserError naming what is wrong otherwise. */
function readDefinition(file: string, dir: string): { definition: CohortDefinition; name: string } {
  const json = readStrictJsonFile(file, 'cohort file', 4 << 20);
  const parsed = z.looseObject({ definition: Definition, definition_sha256: Sha }).safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`cohort file ${file} is not a cohort's definition (at ${issue.path.join('.') || '(top)'}: ${issue.message})`);
  }
  // the digest of the definition as read (not as zod returns it): an edit anywhere in it is seen
  if (digest((json as { definition: unknown }).definition) !== parsed.data.definition_sha256)
    throw new UserError(`cohort file ${file}: its definition is not the one its definition_sha256 records (the file was edited); refused`);
  const definition = parsed.data.definition as unknown as CohortDefinition;
  const name = storedCohortName(json, definition.labels, dir, (why) => {
    throw new UserError(`cohort file ${file}: ${why}; refused`);
  });
  return { definition, name };
}
