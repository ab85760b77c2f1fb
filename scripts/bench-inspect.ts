// wwref's own cost per sample of the Inspect task, beside the model's time, from an eval log's events.
//
//   npx tsx scripts/bench-inspect.ts [LOG]
//
// Without LOG it runs the task first (inspect/scripted_eval.py: mockllm/model scripted to buy the greedy
// degree-2 design and submit ridge_pair) on wine and concrete at B = 4 and 8, one sample at a time, into a
// temporary folder. Per sample, in seconds, from the log's spans and events:
// - start: `wwref episode start` and the prompt (`prompts/get episode` from a served episode), the
//   solver's span until the agent's;
// - serve: the episode's MCP server as the agent meets it: its start-up (the agent's span until its first
//   model call) plus every tool call's working time;
// - score: the scorer's span (`wwref episode status`, `end` when left open, `score` with the shared estimators);
// - model: every model call's working time (mockllm: none to speak of; a provider's: its answers);
// and the medians. The machine's load average is printed beside them: time on a loaded machine is not
// the work's. Not a test: nothing is asserted.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { ROOT } from '../pipelines/core/paths.ts';

const VENV = join(ROOT, 'inspect', '.venv');

interface Event {
  event: string;
  name?: string;
  type?: string;
  working_start: number;
  working_time?: number;
}

/** Runs the scripted eval (the design behaviour) into `dir`; returns its log. */
async function scriptedLog(dir: string): Promise<string> {
  const controls = join(dir, 'controls');
  const args = [
    'controls',
    'run',
    '--condition',
    'wine',
    'concrete',
    '--budget',
    '4',
    '8',
    '--method',
    'design_degree2',
    '--out',
    controls,
  ];
  await execa('node', [join(ROOT, 'bin', 'wwref.mjs'), ...args]);
  const records = readFileSync(join(controls, 'records.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const designs = Object.fromEntries(records.map((r) => [`${r.condition}__b${r.budget}`, r.acquisition_order.slice(2)]));
  const plan = join(dir, 'plan.json');
  writeFileSync(
    plan,
    JSON.stringify({
      task_args: { conditions: 'wine,concrete', budgets: '4,8', repeats: 1 },
      log_dir: join(dir, 'logs'),
      designs,
      behaviours: { '0': 'design' },
      max_samples: 1,
    }),
  );
  const run = await execa(join(VENV, 'bin', 'python'), [join(ROOT, 'inspect', 'scripted_eval.py'), plan], { cwd: ROOT });
  return String(run.stdout).trim().split('\n').at(-1)!;
}

/** The seconds of one sample's parts. */
function costs(events: Event[]): { start: number; serve: number; score: number; model: number } {
  const span = (name: string) => events.findIndex((e) => e.event === 'span_begin' && e.name === name);
  const begin = (name: string) => events[span(name)]?.working_start ?? Number.NaN;
  /** Where the span opened at `index` ends (its matching span_end, by nesting). */
  const end = (index: number) => {
    let depth = 0;
    for (let k = index; k < events.length; k++) {
      if (events[k]!.event === 'span_begin') depth++;
      if (events[k]!.event === 'span_end' && --depth === 0) return events[k]!.working_start;
    }
    return Number.NaN;
  };
  const models = events.filter((e) => e.event === 'model');
  const tools = events.filter((e) => e.event === 'tool');
  const sum = (list: Event[]) => list.reduce((total, e) => total + (e.working_time ?? 0), 0);
  const react = begin('react');
  const firstModel = models[0] ? models[0].working_start - (models[0].working_time ?? 0) : react;
  return {
    start: react - begin('episode_agent'),
    serve: firstModel - react + sum(tools),
    score: end(span('scorers')) - begin('scorers'),
    model: sum(models),
  };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'wwref-bench-inspect-'));
  try {
    const log = process.argv[2] ?? (await scriptedLog(dir));
    const dumped = await execa(join(VENV, 'bin', 'inspect'), ['log', 'dump', log], { maxBuffer: 1 << 30 });
    const samples = (JSON.parse(String(dumped.stdout)).samples ?? []) as { id: string; events: Event[]; total_time: number }[];
    const rows = samples.map((s) => ({ id: s.id, ...costs(s.events), total: s.total_time }));
    const parts = ['start', 'serve', 'score', 'model', 'total'] as const;
    const fmt = (n: number) => n.toFixed(2).padStart(7);
    console.log(`${'sample'.padEnd(24)}${parts.map((p) => p.padStart(7)).join('')}`);
    for (const row of rows) console.log(`${row.id.padEnd(24)}${parts.map((p) => fmt(row[p])).join('')}`);
    console.log(`${'median'.padEnd(24)}${parts.map((p) => fmt(median(rows.map((r) => r[p])))).join('')}`);
    console.log(
      `log: ${process.argv[2] ? log : 'a scripted eval in a temporary folder (removed)'}; load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} (2 cores: a loaded machine slows every part)`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
