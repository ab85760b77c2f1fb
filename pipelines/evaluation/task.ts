// The public view of a task: what an agent may know before buying anything. The condition's family,
// its options in the public factor order with their descriptions, the utility, the data summary (the
// published catalog's public facts when it has the condition), the family's workflow source, the
// free observations, and, within an episode, the budget, the credits and the purchases. It holds no
// reference utility beyond the anchors and the purchases, and no path of this machine.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import { FAMILIES, type FamilyName, OPTION_LETTERS } from '../catalog/families.ts';
import { allMasks, maskIndex } from '../catalog/masks.ts';
import { publishedConditions } from '../catalog/published.ts';
import { ReferenceStore } from '../references/store.ts';
import { referenceSurface } from '../analysis/grade.ts';
import type { EpisodeView } from './episode.ts';

export interface TaskView {
  condition: string;
  family: string;
  source: string;
  dimensions: number;
  factor_order: string[];
  factors: Record<string, string>;
  mask_convention: string;
  utility: string | null;
  data_summary: unknown;
  workflow_module: string;
  workflow_source: string;
  free_observations: { mask: string; utility: number }[];
  /** Within an episode. */
  budget?: number;
  credits_remaining?: number;
  closed?: boolean;
  observations?: { mask: string; utility: number }[];
}

/** The public view of `condition`; with `episode`, its budget, credits and observations, and the anchors from it. */
export function taskView(
  settings: Settings,
  condition: string,
  references: string,
  family: string,
  source: string,
  episode?: EpisodeView,
): TaskView {
  if (!(family in FAMILIES)) throw new UserError(`condition '${condition}' has family '${family}', which this checkout does not know`);
  const notes = FAMILIES[family as FamilyName];
  const published = publishedConditions(settings.paths.published)[condition] as
    | { dimensions: number; factors?: Record<string, string>; factor_order?: string[]; utility?: string; data_summary?: unknown }
    | undefined;
  let dimensions: number;
  let anchors: { mask: string; utility: number }[];
  if (episode) {
    dimensions = episode.dimensions;
    const masks = allMasks(dimensions);
    anchors = episode.observations.filter((o) => o.mask === masks[0] || o.mask === masks.at(-1));
  } else {
    const surface = referenceSurface(settings, condition, references);
    dimensions = surface.dimensions;
    const masks = allMasks(dimensions);
    anchors = [masks[0]!, masks.at(-1)!].map((mask) => ({ mask, utility: surface.utilities[maskIndex(mask, dimensions)]! }));
  }
  const order = OPTION_LETTERS.slice(0, dimensions) as string[];
  const factors = Object.fromEntries(
    order.map((letter) => [letter, published?.factors?.[letter] ?? notes.options[letter as keyof typeof notes.options] ?? '']),
  );
  const module = `workflows/families/${family}.py`;
  return {
    condition,
    family,
    source,
    dimensions,
    factor_order: published?.factor_order ?? order,
    factors,
    mask_convention:
      `a mask is ${dimensions} characters 0/1, one per option in factor_order, ` +
      `option A first ("${'1'.padEnd(dimensions, '0')}" = only A on)`,
    utility: published?.utility ?? null,
    data_summary: published?.data_summary ?? null,
    workflow_module: module,
    workflow_source: readFileSync(join(settings.paths.workflows, 'families', `${family}.py`), 'utf8'),
    free_observations: anchors,
    ...(episode && {
      budget: episode.budget,
      credits_remaining: episode.credits_remaining,
      closed: episode.closed,
      observations: episode.observations,
    }),
  };
}

/** The public task of an episode, without its purchases, credits and budget (what a calculation's `task` and the prompt show). */
export function publicTask(
  settings: Settings,
  context: { condition: string; references: string; family: string; source: string; view: EpisodeView },
): Omit<TaskView, 'budget' | 'credits_remaining' | 'closed' | 'observations'> {
  const {
    budget: _b,
    credits_remaining: _c,
    closed: _d,
    observations: _o,
    ...task
  } = taskView(settings, context.condition, context.references, context.family, context.source, context.view);
  return task;
}

/** `wwref task --condition C`: the public view from the reference folder of the settings. */
export function conditionTask(settings: Settings, condition: string): TaskView {
  const store = new ReferenceStore(settings.paths.references, settings.paths);
  const entry = store.select(store.requireManifest(), [condition])[0]![1];
  return taskView(settings, condition, settings.paths.references, entry.family, entry.source);
}
