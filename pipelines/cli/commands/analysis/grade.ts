import { UserError } from '../../../core/errors.ts';
import { defineCommand } from '../../command.ts';

export default defineCommand({
  command: 'grade',
  describe:
    "score a prediction table (CSV or JSON, mask -> utility) against the reference surface with the benchmark's scorer: " +
    'JSON on stdout, readable summary on stderr; or, with --records, every stored submission of a JSON-lines file',
  builder: (y) =>
    y
      .option('condition', { type: 'string', describe: 'the condition the table predicts' })
      .option('table', { type: 'string', describe: 'prediction table: CSV (mask,utility) or JSON ({"0000": 0.4, …})' })
      .option('observed', {
        type: 'string',
        describe:
          'observations: masks (JSON array or one per line), or JSON mask -> utility / [{mask, ' +
          'utility}]; their cells are scored with the measured values, which must be the reference ones',
      })
      .option('tolerances', { type: 'string', describe: 'extra strict-reconstruction tolerances, comma-separated (0.1 is always scored)' })
      .option('records', {
        type: 'string',
        describe:
          'JSON lines of {condition|instance, observations, prediction_table, score?}: ' +
          'each scored again, a stored score compared key by key (exit 1 on a difference)',
      })
      .option('shared', {
        type: 'boolean',
        describe:
          "with --records: refit the shared estimators (ridge degree 1 and 2, GP) on every record's observations " +
          '(records that store shared_*_score are refitted and compared without it)',
      })
      .option('references', { type: 'string', describe: 'reference folder (default outputs/references)' }),
  run: async (argv, { settings, out }) => {
    if (argv.records !== undefined) {
      if (argv.condition !== undefined || argv.table !== undefined || argv.observed !== undefined || argv.tolerances !== undefined) {
        throw new UserError(
          '--records takes the condition, table and observations from each record: leave out --condition, --table, --observed and --tolerances',
        );
      }
      const { differenceLines, gradeRecords, MAX_DIFFERENCES_KEPT } = await import('../../../analysis/grade-records.ts');
      // stdout is one JSON object written as the records are scored (its scores first): memory stays bounded
      let first = true;
      const outcome = gradeRecords(
        settings,
        argv.records,
        undefined,
        (scored) => {
          process.stdout.write(`${first ? '{\n  "scores": [\n' : ',\n'}    ${JSON.stringify(scored)}`);
          first = false;
        },
        { shared: argv.shared === true },
      );
      const { scores: _none, shared_requests: requests, ...summary } = outcome;
      let shared: unknown[] = [];
      if (requests.length) {
        // the controls' estimators in their worker (pinned runtime), refitted on each record's observations
        const { sharedForRecords } = await import('../../../evaluation/shared-scores.ts');
        const { startControlsWorker } = await import('../../../evaluation/controls/worker.ts');
        const { referenceSurface } = await import('../../../analysis/grade.ts');
        const worker = await startControlsWorker(settings);
        try {
          shared = await sharedForRecords(
            worker,
            requests,
            (condition) => referenceSurface(settings, condition),
            (d) => {
              outcome.differences_total++;
              if (outcome.differences.length < MAX_DIFFERENCES_KEPT) outcome.differences.push(d);
            },
          );
          summary.differences_total = outcome.differences_total;
        } finally {
          await worker.close();
        }
      }
      const rest = JSON.stringify({ ...summary, ...(requests.length && { shared_scores: shared }) }, null, 2).slice(1); // after the scores
      process.stdout.write(`${first ? '{\n  "scores": [' : '\n  ]'},${rest}\n`);
      for (const line of differenceLines(outcome)) process.stderr.write(`${line}\n`);
      process.stderr.write(
        `${outcome.records} record(s) scored, ${outcome.scores_compared} stored score(s) compared: ${outcome.differences_total} difference(s)\n`,
      );
      return outcome.differences_total ? 1 : 0;
    }
    if (argv.shared !== undefined) throw new UserError('--shared is for --records');
    if (argv.condition === undefined || argv.table === undefined)
      throw new UserError('grade needs --condition C and --table FILE (or --records FILE)');
    const { gradeFile, gradeSummaryLines, parseTolerances } = await import('../../../analysis/grade.ts');
    const result = gradeFile(settings, {
      condition: argv.condition,
      table: argv.table,
      observed: argv.observed,
      tolerances: parseTolerances(argv.tolerances),
    });
    out(JSON.stringify(result, null, 2));
    for (const line of gradeSummaryLines(result)) process.stderr.write(`${line}\n`);
  },
});
