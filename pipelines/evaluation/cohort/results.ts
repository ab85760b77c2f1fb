// The cohort's results, OUT/results.jsonl: one line per finished episode in the benchmark's
// agent-record form (results/agent_results.json: instance, family, budget, model, repeat, job_id,
// artifact_valid, observations as the list of {mask, utility} in acquisition order, credits_spent,
// the shared estimators' scores and the episode's score in the published agent-score form, cohort),
// then wwref's own fields beside them (the episode and its condition, labels, the reason an episode
// was not delivered, calculation calls, wall seconds, the shared GP and the gains over the shared
// estimators, how the agent's process ended, the reference). An undelivered episode (no valid
// submission: the agent crashed, hung, flooded its output or exited without submitting) is a line
// too, with its reason and the published undelivered score (an effect recovery of 0). Lines are
// appended one per episode; a run that resumes keeps a line only when it is a whole line of one of
// this cohort's episodes, once, naming its reference, with observations that are the reference's
// utilities (anchors first, no more purchases than the budget) and a score that grade gives again to
// the letter.
import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import * as z from 'zod';
import { readRegularFile } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import { writeFileAtomic } from '../../core/fsutil.ts';
import { canonicalJson } from '../../core/hashing.ts';
import type { Surface } from '../../analysis/effects.ts';
import { agentScore, UNDELIVERED_SCORE } from '../../analysis/grade-records.ts';
import { type GradeResult, gradeSurface, predictionFromJson } from '../../analysis/grade.ts';
import { isObject, type Json, parseStrictJson } from '../../analysis/strict-json.ts';
import { orderedJson, withMaskOrderedTables } from '../ordered-json.ts';
import { allMasks, maskIndex } from '../../catalog/masks.ts';
import { type EpisodeState, readEpisode } from '../episode.ts';
import type { SharedScores } from '../shared-scores.ts';
import type { AgentOutcome } from './agent.ts';
import type { PlannedEpisode } from './plan.ts';

export const RESULTS_FILE = 'results.jsonl';
/** The reason of an episode whose receipt could not be read after its agent ended (recorded with the anchors only). */
export const UNUSABLE_RECEIPT = 'the episode receipt is unusable';
const RESULTS_MAX_BYTES = 256 << 20;

export interface EpisodeResult {
  planned: PlannedEpisode;
  labels: Record<string, string>;
  agent: string;
  /** The record's `cohort` (recordCohort). */
  cohort: string;
  /** The condition's reference surface (for the published score's fields). */
  surface: Surface;
  observations: readonly (readonly [string, number])[];
  /** grade's result of the submission (undefined: undelivered). */
  score?: GradeResult;
  undeliveredReason?: string;
  calculationCalls: number;
  process: AgentOutcome;
  shared: SharedScores;
  startedAt: string;
  finishedAt: string;
}

/** A record's `model`: the cohort's `model` label, else its `agent` label, else the agent command. */
export function recordModel(labels: Record<string, string>, agent: string): string {
  return labels.model ?? labels.agent ?? agent;
}

/** A record's `cohort`: the cohort's `cohort` label, else the name of its folder. */
export function recordCohort(labels: Record<string, string>, out: string): string {
  return labels.cohort ?? basename(out);
}

/** Why an episode without a submission was not delivered, from how its agent ended. */
export function undeliveredReason(outcome: AgentOutcome, deadlineSeconds: number): string {
  if (outcome.stopped === 'deadline') return `no submission within the session's ${deadlineSeconds} s: the agent was stopped`;
  if (outcome.stopped === 'output') return 'the agent wrote more output than is kept (1 MiB a stream) and was stopped, without submitting';
  if (outcome.exit_code === 127) return 'the agent command was not found (exit status 127)';
  if (outcome.exit_code !== null && outcome.exit_code !== 0) return `the agent exited with status ${outcome.exit_code} without submitting`;
  if (outcome.signal) return `the agent was ended by ${outcome.signal} without submitting`;
  return 'the agent exited without submitting';
}

/** The results line of one episode (without the newline): the published agent record's fields in its order, then wwref's. */
export function resultLine(result: EpisodeResult): string {
  const { planned, score } = result;
  // the tables in mask order (as objects, '1000' … would come before '0000')
  const { shared_degree1_score, shared_degree2_score, ...otherShared } = withMaskOrderedTables(result.shared) as Record<string, unknown>;
  return orderedJson({
    instance: planned.condition.instance,
    family: planned.condition.family,
    budget: planned.budget,
    model: recordModel(result.labels, result.agent),
    repeat: planned.repeat,
    job_id: planned.id,
    artifact_valid: score !== undefined,
    observations: result.observations.map(([mask, utility]) => ({ mask, utility })),
    credits_spent: result.observations.length - 2,
    shared_degree1_score,
    shared_degree2_score,
    // an undelivered episode counts as recovering nothing
    score: score ? withMaskOrderedTables(agentScore(result.surface, score)) : UNDELIVERED_SCORE,
    cohort: result.cohort,
    episode: planned.id,
    condition: planned.condition.id,
    track: planned.condition.track,
    labels: result.labels,
    agent: result.agent,
    undelivered_reason: result.undeliveredReason ?? null,
    acquisition_order: result.observations.map(([mask]) => mask),
    calculation_calls: result.calculationCalls,
    wall_seconds: result.process.wall_seconds,
    effect_recovery: score?.effect_recovery ?? 0,
    ...otherShared,
    process: result.process,
    reference: planned.condition.reference,
    started_at: result.startedAt,
    finished_at: result.finishedAt,
  });
}

const Shared = z.looseObject({ effect_recovery: z.number() });

/** What the summaries read of a results line. */
export const StoredResult = z.looseObject({
  episode: z.string(),
  job_id: z.string(),
  condition: z.string(),
  instance: z.string(),
  family: z.string(),
  track: z.string(),
  model: z.string(),
  cohort: z.string(),
  budget: z.number().int().nonnegative(),
  repeat: z.number().int().nonnegative(),
  artifact_valid: z.boolean(),
  observations: z.array(z.strictObject({ mask: z.string(), utility: z.number() })),
  credits_spent: z.number().int().nonnegative(),
  effect_recovery: z.number(),
  score: z.looseObject({ effect_recovery: z.number(), strict_effect_reconstruction: z.boolean() }),
  shared_degree1_score: Shared,
  shared_degree2_score: Shared,
  shared_gp_score: Shared,
});
export type StoredResult = z.infer<typeof StoredResult>;

/** Why a line's observations are not its episode's purchases (undefined: they are): the reference's utilities, anchors first, then its receipt's. */
function observationsProblem(
  json: Record<string, Json>,
  stored: StoredResult,
  surface: Surface,
  receipt?: EpisodeState,
): string | undefined {
  const width = surface.dimensions;
  const masks = stored.observations.map((o) => o.mask);
  if (
    masks[0] !== '0'.repeat(width) ||
    masks[1] !== '1'.repeat(width) ||
    new Set(masks).size !== masks.length ||
    canonicalJson(json.acquisition_order ?? null) !== canonicalJson(masks)
  )
    return 'observations that are not its acquisition order, anchors first';
  if (stored.credits_spent !== masks.length - 2 || stored.credits_spent > stored.budget) return 'credits that are not its purchases';
  for (const { mask, utility } of stored.observations)
    if (maskIndex(mask, width) < 0 || utility !== surface.utilities[maskIndex(mask, width)])
      return "an observation that is not the reference's";
  // the line must be what its episode's receipt gives: its purchases in order, closed, delivered or not
  // (a line copied from another episode, or written by an agent, is not)
  if (!receipt) return undefined;
  if (receipt.condition !== stored.condition || receipt.budget !== stored.budget || !receipt.closed)
    return 'not what its episode receipt records';
  const bought = receipt.observations.map((o) => ({ mask: o.mask, utility: o.utility }));
  if (canonicalJson(bought) !== canonicalJson(stored.observations)) return 'observations that its episode receipt does not record';
  if (stored.artifact_valid !== (receipt.submission !== null)) return 'a delivery its episode receipt does not record';
  return undefined;
}

/** Why a results line is not a verified result of its planned episode (undefined: it is). */
function resultProblem(
  json: Record<string, Json>,
  stored: StoredResult,
  plan: PlannedEpisode,
  surface: Surface,
  receipt?: EpisodeState,
): string | undefined {
  if (plan.condition.id !== stored.condition || plan.budget !== stored.budget || plan.repeat !== stored.repeat || plan.id !== stored.job_id)
    return 'not its episode';
  if (canonicalJson(json.reference ?? null) !== canonicalJson(plan.condition.reference)) return 'another reference';
  const problem = observationsProblem(json, stored, surface, receipt);
  if (problem) return problem;
  if (!stored.artifact_valid)
    return canonicalJson(json.score) === canonicalJson(UNDELIVERED_SCORE) && stored.effect_recovery === 0
      ? undefined
      : 'an undelivered score that is not the published one';
  if (!isObject(json.score)) return 'a delivery without a score';
  // the receipt's submission when there is one, else the line's own table
  const table = receipt?.submission?.prediction_table;
  const width = surface.dimensions;
  const predicted = table
    ? allMasks(width).map((m) => table[m]!)
    : predictionFromJson(json.score.prediction_table ?? null, width, 'prediction_table');
  const again = gradeSurface(surface, predicted, { observed: stored.observations.map((o) => o.mask) });
  // every field to the letter (the key order aside)
  if (canonicalJson(json.score) !== canonicalJson(agentScore(surface, again))) return 'a score that grade does not give';
  return stored.effect_recovery === again.effect_recovery ? undefined : 'an effect recovery that is not its score';
}

export interface KeptResults {
  results: StoredResult[];
  /** Lines left out (torn, not of this cohort, repeated). */
  dropped: number;
}

/**
 * The verified lines of `file` that are results of `planned` episodes, once each (the first), the file
 * rewritten without the others; none when the file is missing. With `episodes` (the folder of the
 * episodes' folders), each line must also agree with its episode's receipt.
 */
export function keepResults(
  file: string,
  planned: readonly PlannedEpisode[],
  surfaceOf: (condition: string) => Surface,
  episodes?: string,
): KeptResults {
  const kept: KeptResults = { results: [], dropped: 0 };
  if (!existsSync(file)) return kept;
  const byId = new Map(planned.map((p) => [p.id, p]));
  const lines: string[] = [];
  for (const line of readRegularFile(file, 'results file', RESULTS_MAX_BYTES).toString('utf8').split('\n')) {
    if (line.trim() === '') continue;
    let json: Json;
    try {
      json = parseStrictJson(line, 'a results line');
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      kept.dropped++;
      continue;
    }
    const parsed = StoredResult.safeParse(json);
    const plan = parsed.success ? byId.get(parsed.data.episode) : undefined;
    if (!parsed.success || !isObject(json) || !plan || kept.results.some((r) => r.episode === parsed.data.episode)) {
      kept.dropped++;
      continue;
    }
    let problem: string | undefined;
    try {
      let receipt: EpisodeState | undefined;
      try {
        receipt = episodes === undefined ? undefined : readEpisode(join(episodes, plan.id));
      } catch (error) {
        // an unreadable receipt backs only its own line: undelivered, the anchors alone
        const reason = typeof json.undelivered_reason === 'string' ? json.undelivered_reason : '';
        if (!(error instanceof UserError) || !reason.startsWith(UNUSABLE_RECEIPT) || parsed.data.credits_spent !== 0) throw error;
      }
      problem = resultProblem(json, parsed.data, plan, surfaceOf(plan.condition.id), receipt);
    } catch (error) {
      if (!(error instanceof UserError)) throw error;
      problem = 'an invalid prediction table or episode receipt';
    }
    if (problem) {
      kept.dropped++;
      continue;
    }
    kept.results.push(parsed.data);
    lines.push(line);
  }
  if (kept.dropped) writeFileAtomic(file, lines.map((l) => `${l}\n`).join(''));
  return kept;
}
