// A cohort's definition: the agent command, the (condition, budget) cells, the repeats, the labels,
// the session and calculation limits and the references' identity; and its episodes, one per (condition, budget,
// repeat). The definition is written to OUT/cohort.json before the first episode, with the folder the
// agents run in; a later run into the same folder resumes it only when its definition is the same
// (parallelism aside), and is refused with one line naming what differs otherwise (and the way out
// when an agent edited the file: remove it, and the folder is checked episode by episode).
import { existsSync, readdirSync } from 'node:fs';
import { basename, isAbsolute, join } from 'node:path';
import { lstatOrNothing } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import { writeJsonAtomic } from '../../core/fsutil.ts';
import { canonicalJson, digest } from '../../core/hashing.ts';
import type { Settings } from '../../core/settings.ts';
import type { Catalog, CatalogCondition } from '../../catalog/catalog.ts';
import { loadCatalog, ReferenceStore } from '../../references/store.ts';
import { LOCK_FILE } from '../../references/lock.ts';
import { type Track, TRACK_BUDGETS, trackOf } from '../controls/grid.ts';
import { isObject, type Json, readStrictJsonFile } from '../../analysis/strict-json.ts';
import { startLimits } from '../episode.ts';
import { checkLabels } from '../labels.ts';
import { printable, UNSHOWABLE } from '../compare/tables.ts';

export const COHORT_FILE = 'cohort.json';
export const EPISODES_FOLDER = 'episodes';
/** Where an episode cut short by a stopped run is kept when the run resumes and starts it again. */
export const INTERRUPTED_FOLDER = 'interrupted';
/** Where the folder of an undelivered episode is kept when `--retry-undelivered` plays it again. */
export const RETRIED_FOLDER = 'retried';
/** The comparison of the cohort with its controls (`cohort compare`'s files). */
export const REPORT_FOLDER = 'report';
const COHORT_FILE_MAX_BYTES = 4 << 20;
export const MAX_REPEATS = 1000;

export interface CohortRequest {
  agent: string;
  /** Condition ids (default: every condition with references). */
  conditions?: readonly string[];
  /** Budgets for every condition (default: the published budgets of each condition's track). */
  budgets?: readonly number[];
  repeats: number;
  labels: Record<string, string>;
  sessionSeconds: number;
  /** Calculation calls per episode and wall seconds per call (default: the episode's, 20 and 45). */
  calls?: number;
  callSeconds?: number;
  /** Each agent run in a sandbox of its own (sandbox.ts). */
  sandboxAgents?: boolean;
  /** With sandboxAgents: the agents' network (sandbox.ts; default none). */
  sandboxNetwork?: 'none' | 'shared';
}

export interface CohortCondition {
  id: string;
  instance: string;
  family: string;
  dimensions: number;
  track: Track;
  budgets: number[];
  reference: { table_sha256: string; plan_sha256: string };
}

/** What a cohort is: what resuming compares (cohort.json's `definition`). */
export interface CohortDefinition {
  /** 2: results lines in the published agent-record form (1: observations as an object, an undelivered score null). */
  cohort_version: 2;
  agent: string;
  /** The agents ran sandboxed (--sandbox-agents); absent: as the user (so a cohort.json written before the field keeps its digest). */
  agents_sandboxed?: true;
  /** Sandboxed: `none`, each agent's network its own (--sandbox-network none, the default); absent: the host's (shared, as before the field). */
  agents_network?: 'none';
  repeats: number;
  labels: Record<string, string>;
  session_seconds: number;
  /** Each episode's calculation limits (episode.ts `startLimits` checks them). */
  calls: number;
  call_seconds: number;
  references: string;
  conditions: CohortCondition[];
}

export interface PlannedEpisode {
  id: string;
  condition: CohortCondition;
  budget: number;
  repeat: number;
}

function cohortCondition(condition: CatalogCondition, entry: { table_sha256: string; plan_sha256: string }, budgets?: readonly number[]) {
  const most = 2 ** condition.dimensions - 2;
  const chosen = budgets?.length ? [...new Set(budgets)].sort((a, b) => a - b) : [...TRACK_BUDGETS[trackOf(condition)]];
  const over = chosen.filter((b) => b > most);
  if (over.length)
    throw new UserError(`--budget ${over.join(', ')}: ${condition.id} has ${most} masks beyond the two free anchors (budgets 0 … ${most})`);
  return {
    id: condition.id,
    instance: condition.source,
    family: condition.family,
    dimensions: condition.dimensions,
    track: trackOf(condition),
    budgets: chosen,
    reference: { table_sha256: entry.table_sha256, plan_sha256: entry.plan_sha256 },
  };
}

/** The cohort's definition from what the user asked, checked against the catalog and the references. */
export function defineCohort(settings: Settings, request: CohortRequest): CohortDefinition {
  if (!request.agent.trim()) throw new UserError('--agent needs a command');
  if (!Number.isInteger(request.repeats) || request.repeats < 1 || request.repeats > MAX_REPEATS)
    throw new UserError(`--repeats takes a whole number from 1 to ${MAX_REPEATS}`);
  if (!(request.sessionSeconds > 0)) throw new UserError('--session-seconds takes a positive number of seconds');
  // every episode's limits, checked once before the first starts
  const limits = startLimits({ calls: request.calls, callSeconds: request.callSeconds, sessionSeconds: request.sessionSeconds });
  const catalog: Catalog = loadCatalog(settings);
  const store = new ReferenceStore(settings.paths.references, settings.paths);
  const entries = store.requireManifest().conditions;
  const ids = request.conditions ?? [];
  const chosen = ids.length ? catalog.selectConditions(ids) : catalog.selectConditions().filter((c) => Object.hasOwn(entries, c.id));
  const missing = chosen.filter((c) => !Object.hasOwn(entries, c.id)).map((c) => c.id);
  if (missing.length)
    throw new UserError(`no references for ${missing.join(', ')} in ${store.dir}; run 'wwref rebuild', or pass --references DIR`);
  if (!chosen.length) throw new UserError(`no condition has references in ${store.dir}`);
  return {
    cohort_version: 2,
    agent: request.agent,
    ...(request.sandboxAgents === true && { agents_sandboxed: true as const }),
    ...(request.sandboxAgents === true && request.sandboxNetwork !== 'shared' && { agents_network: 'none' as const }),
    repeats: request.repeats,
    labels: checkLabels(request.labels),
    session_seconds: request.sessionSeconds,
    calls: limits.calls,
    call_seconds: limits.call_seconds,
    references: store.dir,
    conditions: chosen.map((c) => cohortCondition(c, entries[c.id]!, request.budgets)),
  };
}

/** Every episode of the cohort, in order: condition, budget, repeat. */
export function plannedEpisodes(definition: CohortDefinition): PlannedEpisode[] {
  return definition.conditions.flatMap((condition) =>
    condition.budgets.flatMap((budget) =>
      Array.from({ length: definition.repeats }, (_, repeat) => ({
        id: `${condition.id}__b${budget}__r${repeat}`,
        condition,
        budget,
        repeat,
      })),
    ),
  );
}

/** What differs between two definitions, in words. */
function differences(earlier: Partial<CohortDefinition>, now: CohortDefinition): string[] {
  const fields: [keyof CohortDefinition, string][] = [
    ['agent', 'the agent command'],
    ['agents_sandboxed', 'whether the agents run sandboxed (--sandbox-agents)'],
    ['agents_network', "the agents' network (--sandbox-network)"],
    ['repeats', 'the repeats'],
    ['labels', 'the labels'],
    ['session_seconds', 'the session seconds'],
    ['calls', 'the calculation calls'],
    ['call_seconds', 'the seconds per calculation'],
    ['references', 'the reference folder'],
    ['conditions', 'the conditions, budgets or their references'],
    ['cohort_version', 'the cohort format'],
  ];
  return fields.filter(([key]) => canonicalJson(earlier[key] ?? null) !== canonicalJson(now[key] ?? null)).map(([, what]) => what);
}

/** What a cohort writes into its folder: a folder holding only these (and no cohort.json) is taken as a cohort's whose file was removed. */
const COHORT_ENTRIES = new Set([
  COHORT_FILE,
  LOCK_FILE,
  'results.jsonl',
  'written.jsonl',
  EPISODES_FOLDER,
  INTERRUPTED_FOLDER,
  RETRIED_FOLDER,
  REPORT_FOLDER,
  'controls',
  'summary.json',
  'summary.csv',
  'macro.csv',
  'cohort-recovery.svg',
  'cohort-recovery.png',
]);

/** What the cohort itself renames aside in OUT (folders.ts asideFolder: an `interrupted` or `retried` that was no real folder), or leaves of a report a killed run was writing (outputs.ts). */
const COHORT_ASIDE = /^(?:(?:interrupted|retried)\.planted\.\d+\.[0-9a-f]{12}|\.report\.\d+\.[0-9a-f]{16})$/;
const isCohortEntry = (name: string) => COHORT_ENTRIES.has(name) || COHORT_ASIDE.test(name);

/** The way out of a cohort.json an agent (or anyone) edited. */
const REMOVE_HINT = `if an agent edited it, remove ${COHORT_FILE} and run again: the folder is then checked episode by episode against this cohort`;

/** The longest cohort name (its characters): it is printed in tables and stored in every line. */
const NAME_MAX = 200;

/**
 * Why `name` cannot be a cohort's name (undefined: it can): printable (no control character, nor one a
 * table cannot show as itself: a format or invisible one such as U+2060 could make a name look like a
 * control's), no '/', 1 to 200 characters.
 */
export function cohortNameProblem(name: string): string | undefined {
  if (name === '' || [...name].length > NAME_MAX) return `it must have 1 to ${NAME_MAX} characters`;
  if (/\p{Cc}/u.test(name)) return 'it holds a control character';
  const hidden = UNSHOWABLE.exec(name)?.[0];
  if (hidden !== undefined)
    return `it holds U+${hidden.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}, a format, invisible, private-use or unassigned character`;
  if (name.includes('/')) return "it holds a '/'";
  return undefined;
}

/** The digest cohort.json stores beside the cohort's name, so that an edited name is seen (as definition_sha256 for the definition). */
export const nameDigest = (name: string): string => digest({ cohort: name });

/**
 * The cohort's name (its records' `cohort`), fixed when it was created and stored in cohort.json beside
 * the definition (its `cohort` label, else its folder's name then) with its digest (`name_sha256`), so
 * that a copied or renamed folder keeps it; a cohort.json without either (an older folder): the label,
 * else the folder's name now. An edited name (or digest) is handed to `refuse` with why.
 */
export function storedCohortName(cohortFile: unknown, labels: Record<string, string>, out: string, refuse: (why: string) => never): string {
  const json = isObject(cohortFile as Json) ? (cohortFile as Record<string, unknown>) : {};
  const [stored, sha] = [json.cohort, json.name_sha256];
  if (stored === undefined && sha === undefined) return labels.cohort ?? basename(out);
  if (typeof stored !== 'string' || typeof sha !== 'string' || nameDigest(stored) !== sha)
    return refuse('its cohort name is not the one its name_sha256 records (the file was edited)');
  const problem = cohortNameProblem(stored);
  return problem ? refuse(`its cohort name cannot be one (${problem})`) : stored;
}

/** cohort.json's definition and working folder; a UserError (one line, with the way out) when it is no cohort's. */
function readCohortFile(out: string): { definition: Partial<CohortDefinition>; working_folder?: unknown; cohort?: unknown } {
  const file = join(out, COHORT_FILE);
  let earlier: Json;
  try {
    earlier = readStrictJsonFile(file, 'cohort file', COHORT_FILE_MAX_BYTES);
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    throw new UserError(`--out ${out}: ${error.message.split('\n')[0]}; ${REMOVE_HINT}`);
  }
  if (!isObject(earlier) || !isObject(earlier.definition))
    throw new UserError(`--out ${out}: its ${COHORT_FILE} is not a cohort's; name another folder, or ${REMOVE_HINT}`);
  return earlier as unknown as { definition: Partial<CohortDefinition>; working_folder?: unknown; cohort?: unknown };
}

/**
 * Refuses (UserError, one line) a folder this cohort must not write into: another cohort's, or one
 * holding files of its own. Writes cohort.json (the definition and the folder the agents run in) for
 * a new cohort, or for a cohort folder whose cohort.json was removed (its lines are then each checked
 * against their receipts and this definition, as always). Returns the folder the agents run in: the one
 * the cohort was first started in (a relative agent command means the same on every resume), and the
 * cohort's name (storedCohortName).
 */
export function claimCohortFolder(
  out: string,
  definition: CohortDefinition,
  cwd: string = process.cwd(),
  log: (line: string) => void = () => {},
): { resumed: boolean; workingFolder: string; name: string } {
  const file = join(out, COHORT_FILE);
  if (lstatOrNothing(file)) {
    const earlier = readCohortFile(out);
    const name = storedCohortName(earlier, definition.labels, out, (why) => {
      throw new UserError(`--out ${out}: ${why}; ${REMOVE_HINT}`);
    });
    const changed = differences(earlier.definition, definition);
    const before = earlier.definition.repeats;
    // more repeats extend the cohort (its episodes keep their ids); fewer are refused
    const extended = changed.length === 1 && changed[0] === 'the repeats' && typeof before === 'number';
    if (extended && definition.repeats < before)
      throw new UserError(
        `--repeats ${definition.repeats}: the cohort in ${out} has ${before} repeats; a cohort is extended, never shortened (--repeats ${before} or more); ${REMOVE_HINT}`,
      );
    if (changed.length && !extended)
      throw new UserError(
        `--out ${out} holds another cohort (${changed.join(', ')} differ); name another folder to run this one, or ${REMOVE_HINT}`,
      );
    if (extended) {
      writeJsonAtomic(file, { ...earlier, definition, definition_sha256: digest(definition) });
      log(`cohort: extended from ${before} to ${definition.repeats} repeat(s) (${file} updated); the earlier episodes are kept`);
    }
    const folder = earlier.working_folder;
    if (typeof folder !== 'string' || !isAbsolute(folder)) return { resumed: true, workingFolder: cwd, name };
    if (!lstatOrNothing(folder)?.isDirectory())
      throw new UserError(
        `--out ${out}: this cohort's agents run in ${folder} (where it was started), which is no folder any more; restore it, or set "working_folder" in ${file}`,
      );
    if (folder !== cwd) log(`cohort: the agents run in ${folder}, where this cohort was started (not in ${cwd})`);
    return { resumed: true, workingFolder: folder, name };
  }
  const present = existsSync(out) ? readdirSync(out).filter((f) => f !== LOCK_FILE) : [];
  const adopted = present.length > 0 && present.includes(EPISODES_FOLDER) && present.every(isCohortEntry);
  if (present.length && !adopted)
    throw new UserError(
      `--out ${out} holds files of its own (${present.slice(0, 3).join(', ')}${present.length > 3 ? ', …' : ''}) and no cohort; name a new or empty folder`,
    );
  if (adopted)
    log(`cohort: ${out} has no ${COHORT_FILE}: taken as this cohort's folder (every results line is checked against its receipt)`);
  const name = definition.labels.cohort ?? basename(out);
  const problem = cohortNameProblem(name);
  if (problem)
    throw new UserError(
      `the cohort's name ${printable(JSON.stringify(name).slice(0, 80))} (${definition.labels.cohort === undefined ? "--out's folder name" : 'its cohort label'}) cannot be used: ${problem}`,
    );
  // the labels that may name the cohort in a comparison instead (compare/methods.ts cohortMethodName)
  for (const key of ['agent', 'model'] as const) {
    const label = definition.labels[key];
    const hidden = label === undefined ? undefined : UNSHOWABLE.exec(label)?.[0];
    if (hidden !== undefined)
      throw new UserError(
        `label ${key}: it names the cohort in comparisons and holds U+${hidden.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}, a character a table cannot show as itself`,
      );
  }
  writeJsonAtomic(file, {
    definition,
    definition_sha256: digest(definition),
    working_folder: cwd,
    cohort: name,
    name_sha256: nameDigest(name),
  });
  return { resumed: adopted, workingFolder: cwd, name };
}
