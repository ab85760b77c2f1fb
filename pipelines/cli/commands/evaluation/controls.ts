import { UserError } from '../../../core/errors.ts';
import { formatSeconds } from '../../../core/progress.ts';
import { defineCommand } from '../../command.ts';
import { list, wholeNumber, wholeNumbers, withReferences, withWorkers } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

const ACTIONS = ['run', 'summary'] as const;

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

export default defineCommand({
  command: 'controls <action>',
  describe:
    "the benchmark's numerical controls: run (fixed designs and estimators on the references, scored by grade) or summary (of records made elsewhere)",
  builder: (y) =>
    withWorkers(withReferences(y))
      .positional('action', { choices: ACTIONS, describe: 'run | summary' })
      .option('condition', { type: 'string', array: true, describe: 'run: condition(s); default every condition with references' })
      .option('method', { type: 'string', array: true, describe: 'run: method(s); default all eight' })
      .option('budget', {
        type: 'string',
        array: true,
        describe: 'run: budget(s) B, 0 … 2^d − 2; default the published budgets of the track',
      })
      .option('seeds', { type: 'string', describe: 'run: seeds of the random design, 0 … N−1 (default 20)' })
      .option('grid', {
        type: 'string',
        choices: ['published'],
        describe: "run: the published grid (4,206 records on the catalog's conditions)",
      })
      .option('records', { type: 'string', array: true, describe: 'summary: records files (JSON lines)' })
      .option('out', {
        type: 'string',
        demandOption: true,
        describe: 'output folder (records.jsonl, summary.json and .csv, macro.csv, figure)',
      }),
  run: async (argv, { settings, out }) => {
    const action = argv.action as (typeof ACTIONS)[number];
    const runOnly = ['condition', 'method', 'budget', 'seeds', 'grid'].filter((o) => argv[o] !== undefined);
    if (action === 'summary' && runOnly.length)
      throw new UserError(`controls summary does not take ${runOnly.map((o) => `--${o}`).join(', ')}`);
    if (action === 'run' && argv.records !== undefined)
      throw new UserError('controls run does not take --records (that is controls summary)');
    const folder = outputPath(settings, argv.out, 'out', 'folder');
    if (action === 'summary') {
      const files = list(argv.records, 'records');
      if (!files.length) throw new UserError('controls summary needs --records FILE…');
      const { readControlRecords } = await import('../../../evaluation/controls/records.ts');
      const { checkSummaryFolder, writeSummaries } = await import('../../../evaluation/controls/outputs.ts');
      const { verifyControlRecords } = await import('../../../evaluation/controls/verify.ts');
      const { catalogLookup } = await import('../../../evaluation/controls/job.ts');
      const { loadCatalog } = await import('../../../references/store.ts');
      const { makeDirs } = await import('../../../core/fsutil.ts');
      checkSummaryFolder(folder);
      const lookup = catalogLookup(loadCatalog(settings));
      const read = files.flatMap((f) => readControlRecords(f, lookup));
      // every record recomputed on the references before a number of it is used
      const verified = await verifyControlRecords(settings, read, {
        workers: argv.workers,
        requireReference: false,
        log: (line) => process.stderr.write(`${line}\n`),
      });
      const left = [...verified.left_out.values()].flat();
      for (const l of left.slice(0, 5)) process.stderr.write(`controls summary: ${l.record} left out: ${l.why}\n`);
      if (left.length > 5)
        process.stderr.write(`controls summary: … and ${left.length - 5} more second copies left out (summary.json lists them by cell)\n`);
      makeDirs(folder);
      const written = await writeSummaries(
        settings,
        folder,
        verified.records,
        { records_files: files, references: verified.references, records_read: read.length, left_out: left },
        true,
        verified.left_out,
      );
      out(
        `${plural(verified.records.length, 'record')} summarised, each recomputed on the references${left.length ? ` (${left.length} second cop${left.length === 1 ? 'y' : 'ies'} left out)` : ''}: ` +
          `${written.summary}, ${written.summary_csv}, ${written.macro_csv}`,
      );
      if (written.figures.length) out(`figure: ${written.figures.join(', ')}`);
      return 0;
    }
    const { parseMethod } = await import('../../../evaluation/controls/grid.ts');
    const { runControls } = await import('../../../evaluation/controls/job.ts');
    const outcome = await runControls(settings, {
      conditions: list(argv.condition, 'condition'),
      methods: list(argv.method, 'method').map(parseMethod),
      budgets: wholeNumbers(list(argv.budget, 'budget'), 'budget'),
      seeds: argv.seeds === undefined ? undefined : wholeNumber(argv.seeds, 'seeds'),
      grid: argv.grid as 'published' | undefined,
      out: folder,
      workers: argv.workers,
      log: (line) => process.stderr.write(`${line}\n`),
    });
    out(
      `${plural(outcome.records, 'control record')} (${plural(outcome.tasks, 'task')}${outcome.reused_tasks ? `, ${outcome.reused_tasks} resumed` : ''}) ` +
        `in ${formatSeconds(outcome.seconds)}: ${outcome.files.records}`,
    );
    out(`summary: ${outcome.files.summary}, ${outcome.files.summary_csv}, ${outcome.files.macro_csv}`);
    if (outcome.files.figures.length) out(`figure: ${outcome.files.figures.join(', ')}`);
    return 0;
  },
});
