// The agent's tools of one episode, named and shaped as the benchmark's (../shared/spec/agent-protocol.md):
// `observe` ({masks}), `calculate_python` ({code}: Python in the sandbox, only where one can be made)
// and `submit_diagnosis` ({predictions_json} or {estimator}); `task` and `status` are read-only extras.
// Each is one episode action (episode.ts: under the folder's lock). Results are structured content
// checked against each tool's output schema, with the same JSON as text for older clients.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import * as z from 'zod';
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import { predictionFromJson } from '../analysis/grade.ts';
import { type Json, parseStrictJson } from '../analysis/strict-json.ts';
import { type CalculationResult, calculate, MAX_CODE_BYTES } from './calculations.ts';
import { episodeContext, episodeStatus, MAX_BATCH, MAX_OPTIONS, observe, submitPrediction } from './episode.ts';
import { submitEstimator } from './estimator-submission.ts';
import { taskView } from './task.ts';

export type ToolResult = { content: { type: 'text'; text: string }[]; structuredContent?: Record<string, unknown>; isError?: boolean };

/** What the tools of one episode need: where it is, its engine, and how a result (or refusal) is sent. */
export interface ToolContext {
  settings: Settings;
  folder: string;
  engine: 'native' | 'pyodide';
  /** Whether calculations can run here (and why not). */
  sandbox: { available: boolean; reason: string | null };
  tool: (body: () => Promise<object>) => Promise<ToolResult>;
}

/** What a calculation can import, by engine. */
export const ENVIRONMENT: Record<'native' | 'pyodide', string> = {
  native: 'CPython 3.12 with numpy, scipy and scikit-learn, one thread',
  pyodide: 'Pyodide: CPython in WebAssembly, standard library only, no NumPy',
};

/** The output schemas: what each tool's structured content holds (the fields agents read; more may follow). */
const Observation = z.looseObject({ mask: z.string(), utility: z.number() });
const EpisodeViewOut = z.looseObject({
  condition: z.string(),
  dimensions: z.number().int(),
  budget: z.number().int(),
  credits_remaining: z.number().int(),
  closed: z.boolean(),
  observations: z.array(Observation),
  calculations: z.looseObject({ limit: z.number().int(), used: z.number().int(), remaining: z.number().int() }),
  session: z.looseObject({ seconds_used: z.number(), seconds_left: z.number().nullable(), deadline_seconds: z.number().nullable() }),
});
const TaskOut = z.looseObject({
  condition: z.string(),
  family: z.string(),
  dimensions: z.number().int(),
  factor_order: z.array(z.string()),
  factors: z.record(z.string(), z.string()),
  mask_convention: z.string(),
  utility: z.string().nullable(),
  workflow_source: z.string(),
  free_observations: z.array(Observation),
  budget: z.number().int(),
  credits_remaining: z.number().int(),
  observations: z.array(Observation),
});
const ObserveOut = EpisodeViewOut.extend({ new_masks: z.array(z.string()) });
const SubmitOut = EpisodeViewOut.extend({
  submitted_at: z.string(),
  estimator: z.looseObject({ name: z.string(), parameters: z.record(z.string(), z.unknown()) }).optional(),
});
/** The benchmark's receipt fields first (returncode, timed_out, stdout, stderr, wall_seconds), then wwref's. */
const CalculateOut = z.looseObject({
  call: z.number().int(),
  returncode: z.number().int(),
  timed_out: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  wall_seconds: z.number(),
  status: z.enum(['ok', 'error', 'timed_out', 'over_memory', 'output_limit']),
  detail: z.string().nullable(),
  stdout_truncated: z.boolean(),
  stderr_truncated: z.boolean(),
  calculation_calls_remaining: z.number().int(),
  session_seconds_remaining: z.number().nullable(),
});
const readOnly = { readOnlyHint: true, openWorldHint: false } as const;
const acting = { readOnlyHint: false, destructiveHint: false, openWorldHint: false } as const;

/**
 * A call's result in the benchmark's receipt form: a call the supervisor killed (CPU, memory, output,
 * wall) returns 137 (SIGKILL), and `timed_out` is true for the wall clock alone, as the benchmark's
 * harness reported them; `status` and `detail` say which limit it was.
 */
export function benchmarkReceipt(result: CalculationResult): Record<string, unknown> {
  return {
    call: result.call,
    returncode: result.return_code ?? 137,
    timed_out: result.killed_by === 'wall',
    stdout: result.stdout,
    stderr: result.stderr,
    wall_seconds: result.wall_seconds,
    status: result.status,
    detail: result.detail,
    stdout_truncated: result.stdout_truncated,
    stderr_truncated: result.stderr_truncated,
    calculation_calls_remaining: result.calculations_remaining,
    session_seconds_remaining: result.session_seconds_remaining,
  };
}

function registerReading({ settings, folder, tool }: ToolContext, server: McpServer): void {
  server.registerTool(
    'task',
    {
      title: 'Task',
      description:
        'The public view: family, factor order and descriptions, utility, data summary, workflow source, free ' +
        'observations, budget, credits and purchases.',
      inputSchema: z.strictObject({}),
      outputSchema: TaskOut,
      annotations: readOnly,
    },
    () =>
      tool(async () => {
        const context = await episodeContext(settings, folder);
        return taskView(settings, context.view.condition, context.references, context.family, context.source, context.view);
      }),
  );
  server.registerTool(
    'status',
    {
      title: 'Status',
      description: 'Budget, credits remaining, observations, calculation calls and session time left, closed or not.',
      inputSchema: z.strictObject({}),
      outputSchema: EpisodeViewOut,
      annotations: readOnly,
    },
    () => tool(() => episodeStatus(settings, folder)),
  );
}

function registerObserve({ settings, folder, tool }: ToolContext, server: McpServer): void {
  server.registerTool(
    'observe',
    {
      title: 'Observe',
      description:
        'Measure masks (0/1 strings, option A first). Each new distinct mask costs one credit; known masks are free; ' +
        'a batch needing more credits than remain is refused whole.',
      inputSchema: z.strictObject({ masks: z.array(z.string().max(MAX_OPTIONS)).min(1).max(MAX_BATCH) }),
      outputSchema: ObserveOut,
      annotations: acting,
    },
    ({ masks }) => tool(() => observe(settings, folder, masks)),
  );
}

function registerCalculate({ settings, folder, engine, tool }: ToolContext, server: McpServer): void {
  const helpers =
    engine === 'native'
      ? '`from wwb_helpers import fit_surface, suggest_experiments`: fit_surface(observations, degree=1 or 2) fits the ' +
        'ridge on your observations only (penalty by leave-one-observation-out error), suggest_experiments(observations, ' +
        'count, degree) gives the next masks of the greedy design; '
      : '';
  server.registerTool(
    'calculate_python',
    {
      title: 'Calculate (Python)',
      description:
        `Run Python (${ENVIRONMENT[engine]}) in a fresh sandbox: no network, no new process, no files but its own ` +
        '(the working folder and /tmp are writable). Variables: `evidence` (also the file evidence.json), `task`, and ' +
        '`observations` (a list of {mask, utility} in the order bought). ' +
        helpers +
        '`import wwref_helpers` gives ridge_main, ridge_pair, ridge_table and greedy_design in plain Python. Every call ' +
        "starts fresh: print what you need later. Each call counts against the episode's limit (CPU and wall seconds per call).",
      inputSchema: z.strictObject({ code: z.string().max(MAX_CODE_BYTES).describe('Python source') }),
      outputSchema: CalculateOut,
      annotations: acting,
    },
    ({ code }) => tool(async () => benchmarkReceipt(await calculate(settings, folder, code))),
  );
}

/** A prediction table given as a JSON object, or as the text of one (strict JSON). */
function predictionsObject(given: unknown): Json {
  if (typeof given !== 'string') return given as Json;
  const parsed = parseStrictJson(given, 'predictions_json');
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new UserError('predictions_json must be a JSON object of mask -> utility');
  return parsed;
}

function registerSubmit({ settings, folder, tool }: ToolContext, server: McpServer): void {
  server.registerTool(
    'submit_diagnosis',
    {
      title: 'Submit diagnosis',
      description:
        'Close the episode with either `predictions_json`, a finite predicted utility for every mask ({"000000": 0.41, …}, ' +
        'an object or the JSON text of one), or `estimator`: ridge_main or ridge_pair, the public helper fitted by the ' +
        'evaluator on your measurements (recorded as such). Observed cells are replaced by their measurements; prose is not graded.',
      // the table's own rules are grade's (predictionFromJson), as for the command line: the schema only says its shape
      inputSchema: z.strictObject({
        predictions_json: z
          .union([z.record(z.string(), z.unknown()), z.string()])
          .optional()
          .describe('mask -> predicted utility for every mask of the condition: a JSON object or its text'),
        estimator: z.enum(['ridge_main', 'ridge_pair']).optional().describe('instead of predictions: the public helper to fit'),
      }),
      outputSchema: SubmitOut,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    ({ predictions_json: given, estimator }) =>
      tool(async () => {
        // an empty object or text is no table: form clients (the Inspector's web UI) send one for a field left alone
        const empty = given === '' || (typeof given === 'object' && given !== null && Object.keys(given).length === 0);
        const predictions = empty && estimator !== undefined ? undefined : given;
        if ((predictions === undefined) === (estimator === undefined))
          throw new UserError('submit_diagnosis takes either `predictions_json` or `estimator`');
        if (estimator !== undefined) return submitEstimator(settings, folder, estimator);
        const table = predictionsObject(predictions);
        return submitPrediction(settings, folder, (dimensions) => predictionFromJson(table, dimensions, 'predictions_json'));
      }),
  );
}

/** Registers the episode's tools on `server`: `calculate_python` only where the sandbox can be made. */
export function registerEpisodeTools(context: ToolContext, server: McpServer): void {
  registerReading(context, server);
  registerObserve(context, server);
  if (context.sandbox.available) registerCalculate(context, server);
  registerSubmit(context, server);
}
