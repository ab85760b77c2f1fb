// The episode's instructions for a model, as an MCP prompt (`prompts/get episode`): every fact of the
// benchmark's prompt (../shared/spec/agent-protocol.md: the objective and what is checked, the limits,
// the calculation environment and helpers, how to submit, the free observations, the task) in the
// project's own words. A template of one's own (`wwref serve --prompt FILE`) replaces the text: it names
// the facts as {{placeholders}}, and a placeholder that is not one of them is refused.
import { readBoundedText } from '../analysis/strict-json.ts';
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import { episodeContext, fixedAtStart } from './episode.ts';
import { publicTask } from './task.ts';
import { ENVIRONMENT } from './tools.ts';

const DEFAULT_TEMPLATE = `Predict the utility of every one of the {{configurations}} configurations of a deterministic CPU workflow. A configuration is a mask of {{dimensions}} characters 0/1, one per option {{letters}} from left to right; every mask is legal, and a utility lies in [0, 1]. Two anchors (all options off, all on) are measured for free; you may buy {{budget}} more distinct masks, and a mask you already have costs nothing again.

What is graded first: the conditional component effects of your final table. Every edge difference of the table (the {{edges}} pairs of masks that differ in one option) is compared with the reference; mean pair interactions and the configuration you would choose are recorded too. Finding a good configuration is not enough.

Time: {{session}}. Each tool result says how much is left; submit with about two minutes to spare. Calculations: at most {{calls}} calls of calculate_python, each with {{cpu_seconds}} CPU seconds and {{wall_seconds}} wall seconds; these are ceilings, a few purposeful calls suffice.

calculate_python runs Python ({{environment}}). The variables evidence, task and observations (the masks bought so far with their utilities, in order) are defined, and evidence.json is in the working folder. The public helpers:
    from wwb_helpers import fit_surface, suggest_experiments
    fit_surface(observations, degree=1)   # main effects: a prediction for every mask
    fit_surface(observations, degree=2)   # main and pair effects
    suggest_experiments(observations, count=1, degree=2)
fit only the values you observed and choose their penalty by leave-one-observation-out error. Any other method is yours to write, and anything in the task may be used. There is no network and no hidden label. Nothing persists from one call to the next: print what you will need.

To finish, call submit_diagnosis with predictions_json (a finite predicted utility for all {{configurations}} masks) or with estimator "ridge_main" or "ridge_pair" to submit that public helper fitted on your measurements (recorded as helper use). Your measured masks keep their measured values whatever you predict for them; prose is not graded.

FREE OBSERVATIONS:
{{free_observations}}

TASK:
{{task}}
`;

const PLACEHOLDER = /\{\{([^{}]*)\}\}/g;

/** A template's text, checked: its placeholders must be the prompt's facts (one-line refusal otherwise). */
export function readPromptTemplate(path: string, known: readonly string[] = PROMPT_FACTS): string {
  // the project's bounded reader: a regular file of at most 1 MiB of UTF-8 (a FIFO or a device is refused, never waited on)
  const text = readBoundedText(path, '--prompt', 1 << 20);
  const unknown = [...text.matchAll(PLACEHOLDER)].map((m) => m[1]!).filter((name) => !known.includes(name));
  if (unknown.length)
    throw new UserError(`--prompt ${path} names {{${unknown[0]}}}, which is not one of ${known.map((k) => `{{${k}}}`).join(', ')}`);
  return text;
}

export const PROMPT_FACTS = [
  'configurations',
  'dimensions',
  'letters',
  'budget',
  'edges',
  'session',
  'calls',
  'cpu_seconds',
  'wall_seconds',
  'environment',
  'free_observations',
  'task',
] as const;

/** The episode's facts as the prompt's placeholders fill them. */
async function promptFacts(settings: Settings, folder: string): Promise<Record<(typeof PROMPT_FACTS)[number], string>> {
  const { limits, engine } = fixedAtStart(folder);
  const context = await episodeContext(settings, folder);
  const task = publicTask(settings, { ...context, condition: context.view.condition });
  const d = context.view.dimensions;
  const session = limits.session_seconds;
  return {
    configurations: String(2 ** d),
    dimensions: String(d),
    letters: task.factor_order.join(','),
    budget: String(context.view.budget),
    edges: String(d * 2 ** (d - 1)),
    session:
      session === null
        ? 'no deadline in this episode (the benchmark gave 1800 seconds), deliberation included'
        : `${session} seconds in all, deliberation, tools and submission included`,
    calls: String(limits.calls),
    cpu_seconds: String(limits.cpu_seconds),
    wall_seconds: String(limits.call_seconds),
    environment: ENVIRONMENT[engine],
    free_observations: JSON.stringify(task.free_observations),
    task: JSON.stringify(task),
  };
}

/** The prompt of the episode in `folder`: the default text, or `template` with its placeholders filled. */
export async function episodePrompt(settings: Settings, folder: string, template: string = DEFAULT_TEMPLATE): Promise<string> {
  const facts = await promptFacts(settings, folder);
  return template.replace(PLACEHOLDER, (whole, name: string) => (name in facts ? facts[name as keyof typeof facts] : whole));
}
