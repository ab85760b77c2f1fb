import { existsSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import { ROOT } from '../../../core/paths.ts';
import { UserError } from '../../../core/errors.ts';
import { formatSeconds } from '../../../core/progress.ts';
import { type CommandContext, defineCommand } from '../../command.ts';
import { list, wholeNumber, wholeNumbers, withReferences } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

/** Agents at once: more than this is no cohort a machine runs well. */
const MAX_PARALLEL = 64;

export default defineCommand({
  command: 'cohort <action> [folders..]',
  describe:
    'run: an agent command over conditions × budgets × repeats, one episode each, served by one MCP server; ' +
    'results, summaries beside the controls, a figure. compare: cohort folders, controls and published agent records ' +
    'on the cells they share (tables, paired intervals, a figure, a report page)',
  builder: (y) =>
    withReferences(y)
      .positional('action', { choices: ['run', 'compare', 'import'] as const, describe: 'run | compare | import' })
      .positional('folders', { type: 'string', array: true, describe: 'compare: the cohort folders to compare' })
      .option('agent', {
        type: 'string',
        describe: 'run: the agent command, run by /bin/sh in the current folder once per episode (its endpoint in WWREF_MCP_*)',
      })
      .option('out', {
        type: 'string',
        demandOption: true,
        describe: 'run: the cohort folder (episodes, results.jsonl, summaries), a re-run resumes it; compare: the folder of the comparison',
      })
      .option('published', {
        type: 'string',
        array: true,
        describe: "compare: published agent-record files (the benchmark's results/agent_results.json form), one method per model",
      })
      .option('inspect-log', {
        type: 'string',
        describe: 'import: an Inspect AI log of the whatworked task (inspect/whatworked.py), .eval or .json, made a cohort folder (--out)',
      })
      .option('condition', { type: 'string', array: true, describe: 'condition(s); default every condition with references' })
      .option('budget', { type: 'string', array: true, describe: "budget(s) B for every condition; default the track's published budgets" })
      .option('repeats', { type: 'string', describe: 'episodes per (condition, budget) (default 1)' })
      .option('parallel', { type: 'string', describe: 'agents at once (default 1)' })
      .option('label', { type: 'string', array: true, describe: 'KEY=VALUE recorded with every episode (e.g. agent=pair_ridge)' })
      .option('session-seconds', {
        type: 'string',
        describe: "the deadline of each agent run, seconds (default 1800, the benchmark's session)",
      })
      .option('retry-undelivered', {
        type: 'boolean',
        describe: 'run: play again the episodes an earlier run of this cohort recorded undelivered (their folders kept under OUT/retried/)',
      })
      .option('sandbox-agents', {
        type: 'boolean',
        describe:
          'run: each agent in a bubblewrap sandbox of its own: a read-only view of /, a private /tmp, a network reaching only ' +
          "its endpoint (--sandbox-network), the cohort's folder, the references and the data they are computed from hidden " +
          "(part of the cohort's definition)",
      })
      .option('sandbox-network', {
        type: 'string',
        describe:
          "run, with --sandbox-agents: none (default): each agent's network its own, reaching only its episode's endpoint; " +
          "shared: the host's (an agent that must reach its model's API; every port of the host's loopback too)",
      })
      .option('sandbox-hide', {
        type: 'string',
        array: true,
        describe:
          'run, with --sandbox-agents: more folders the agents see empty (another copy of the references, other cohorts, a benchmark pack)',
      })
      .option('calls', { type: 'string', describe: 'calculation calls allowed per episode (default 20)' })
      .option('call-seconds', { type: 'string', describe: 'wall seconds a calculation may run (default 45; 30 CPU seconds)' })
      .option('controls', {
        type: 'string',
        describe:
          "a finished 'wwref controls run' folder: run: holding the cohort's cells (default: computed); compare: its methods compared too",
      }),
  run: async (argv, context) => {
    if (argv.retryUndelivered !== undefined && argv.action !== 'run') throw new UserError('--retry-undelivered is an option of cohort run');
    if (argv.sandboxAgents !== undefined && argv.action !== 'run') throw new UserError('--sandbox-agents is an option of cohort run');
    if (argv.sandboxHide !== undefined && argv.sandboxAgents !== true)
      throw new UserError('--sandbox-hide is an option of --sandbox-agents');
    if (argv.sandboxNetwork !== undefined && argv.sandboxAgents !== true)
      throw new UserError('--sandbox-network is an option of --sandbox-agents');
    if (argv.sandboxNetwork !== undefined && argv.sandboxNetwork !== 'none' && argv.sandboxNetwork !== 'shared')
      throw new UserError(`--sandbox-network takes none or shared, not '${argv.sandboxNetwork}'`);
    if (argv.action === 'compare') return compare(argv, context);
    if (argv.action === 'import') return importInspect(argv, context);
    if (argv.inspectLog !== undefined) throw new UserError('--inspect-log is an option of cohort import');
    const { settings, out } = context;
    if ((argv.folders ?? []).length) throw new UserError(`cohort run takes no folder (${argv.folders![0]}); the cohort's folder is --out`);
    if (argv.agent === undefined || argv.agent.trim() === '') throw new UserError('cohort run needs --agent COMMAND');
    if (argv.published !== undefined) throw new UserError('--published is an option of cohort compare');
    const folder = outputPath(settings, argv.out, 'out', 'folder');
    // agents are told this folder (and their output, receipts and calls land in it): never in the checkout
    const inside = relative(ROOT, folder);
    if (inside === '' || (!inside.startsWith('..') && !isAbsolute(inside)))
      throw new UserError(`--out ${argv.out} is inside the repository (${ROOT}); name a folder outside it, e.g. ~/cohorts/NAME`);
    const parallel = argv.parallel === undefined ? 1 : wholeNumber(argv.parallel, 'parallel');
    if (parallel < 1 || parallel > MAX_PARALLEL) throw new UserError(`--parallel takes a whole number from 1 to ${MAX_PARALLEL}`);
    const seconds = argv.sessionSeconds === undefined ? 1800 : Number(argv.sessionSeconds);
    if (!/^\d+(\.\d+)?$/.test(String(argv.sessionSeconds ?? '1800')) || !(seconds > 0))
      throw new UserError(`--session-seconds takes a positive number of seconds, not '${argv.sessionSeconds}'`);
    const { parseLabels } = await import('../../../evaluation/labels.ts');
    const { runCohort } = await import('../../../evaluation/cohort/run.ts');
    const outcome = await runCohort(settings, {
      agent: argv.agent,
      conditions: list(argv.condition, 'condition'),
      budgets: wholeNumbers(list(argv.budget, 'budget'), 'budget'),
      repeats: argv.repeats === undefined ? 1 : wholeNumber(argv.repeats, 'repeats'),
      labels: parseLabels(list(argv.label, 'label')),
      sessionSeconds: seconds,
      ...(argv.calls !== undefined && { calls: wholeNumber(argv.calls, 'calls') }),
      ...(argv.callSeconds !== undefined && { callSeconds: wholeNumber(argv.callSeconds, 'call-seconds') }),
      out: folder,
      parallel,
      controls: argv.controls,
      retryUndelivered: argv.retryUndelivered === true,
      sandboxAgents: argv.sandboxAgents === true,
      ...(argv.sandboxNetwork !== undefined && { sandboxNetwork: argv.sandboxNetwork as 'none' | 'shared' }),
      sandboxHide: sandboxHide(list(argv.sandboxHide, 'sandbox-hide')),
      command: commandLine(process.argv.slice(2)),
      log: (line) => process.stderr.write(`${line}\n`),
    });
    for (const line of outcome.report?.table ?? []) out(line);
    out(
      `${outcome.episodes} episode(s) (${outcome.delivered} delivered${outcome.reused ? `, ${outcome.reused} from an earlier run` : ''}) ` +
        `in ${formatSeconds(outcome.seconds)}: ${outcome.files.results}`,
    );
    const network = argv.sandboxNetwork === 'shared' ? "the host's network shared" : 'a network reaching only its endpoint';
    out(
      argv.sandboxAgents === true
        ? `agents: each ran in a sandbox of its own (--sandbox-agents; ${network})`
        : 'agents: ran unsandboxed, as you',
    );
    out(`summary: ${outcome.files.summary}, ${outcome.files.summary_csv}, ${outcome.files.macro_csv}`);
    out(`figure: ${outcome.files.figures.join(', ')}`);
    if (outcome.report?.files)
      out(`report: ${outcome.report.files.report}, ${outcome.report.files.markdown}, ${outcome.report.files.latex}`);
    if (outcome.delivered === 0) {
      // nothing to compare an agent by: said in one line, and a non-zero status for scripts
      const why = outcome.undelivered;
      process.stderr.write(
        `cohort: no episode delivered: ${why?.count ?? 0} undelivered; the most common reason (${why?.sharing ?? 0} of them): ${why?.reason ?? 'none run'}${why?.said ? `; its stderr ends: ${JSON.stringify(why.said)}` : ''}\n`,
      );
      return 1;
    }
    return 0;
  },
});

/** `wwref cohort compare DIR… [--controls DIR] [--published FILE…] --out DIR`. */
async function compare(
  argv: { folders?: string[]; controls?: string; published?: string[]; out: string; agent?: string },
  { settings, out }: CommandContext,
): Promise<number> {
  if (argv.agent !== undefined) throw new UserError('--agent is an option of cohort run');
  const cohorts = list(argv.folders, 'folders');
  const published = list(argv.published, 'published');
  const inputs = [...cohorts, ...(argv.controls === undefined ? [] : [argv.controls]), ...published];
  const folder = outputPath(settings, argv.out, 'out', 'folder', { reads: inputs });
  const { compareCohorts } = await import('../../../evaluation/compare/compare.ts');
  const outcome = await compareCohorts(settings, {
    cohorts,
    controls: argv.controls,
    published,
    out: folder,
    command: commandLine(process.argv.slice(2)),
    log: (line) => process.stderr.write(`${line}\n`),
  });
  for (const line of outcome.table) out(line);
  out(`compare: ${outcome.files.json}, ${outcome.files.csv}, ${outcome.files.markdown}, ${outcome.files.latex}`);
  out(`report: ${outcome.files.report}`);
  return 0;
}

/** --sandbox-hide's folders, each one that exists (a folder that is not there needs no hiding: a typo is said). */
function sandboxHide(folders: readonly string[] | undefined): string[] {
  for (const folder of folders ?? []) if (!existsSync(folder)) throw new UserError(`--sandbox-hide ${folder}: no such file or folder`);
  return (folders ?? []).map((f) => resolve(f));
}

/** The command line as a shell would take it back (each word quoted when it needs to be). */
function commandLine(args: readonly string[]): string {
  return ['wwref', ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(' ');
}

/** `wwref cohort import --inspect-log LOG --out DIR [--controls DIR]`. */
async function importInspect(
  argv: { inspectLog?: string; out: string; agent?: string; label?: string[]; controls?: string; folders?: string[] },
  { settings, out }: CommandContext,
): Promise<number> {
  if (argv.inspectLog === undefined || argv.inspectLog.trim() === '') throw new UserError('cohort import needs --inspect-log LOG');
  if (argv.agent !== undefined || argv.label !== undefined || (argv.folders ?? []).length)
    throw new UserError("cohort import takes --inspect-log LOG and --out DIR, no agent, label or folder (its labels are its episodes')");
  const folder = outputPath(settings, argv.out, 'out', 'folder', { reads: [argv.inspectLog] });
  const { importInspectLog } = await import('../../../evaluation/cohort/import.ts');
  const outcome = await importInspectLog(settings, {
    inspectLog: argv.inspectLog,
    out: folder,
    controls: argv.controls,
    log: (line) => process.stderr.write(`${line}\n`),
  });
  out(`${outcome.episodes} episode(s) of ${outcome.model} (${outcome.delivered} delivered): ${outcome.files.results}`);
  out(`summary: ${outcome.files.summary}, ${outcome.files.summary_csv}, ${outcome.files.macro_csv}`);
  out(`figure: ${outcome.files.figures.join(', ')}`);
  return 0;
}
