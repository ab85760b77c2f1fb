import { defineCommand } from '../../command.ts';

export default defineCommand({
  command: 'grade',
  describe:
    'score a prediction table (CSV or JSON, mask -> utility) against the reference surface: JSON on stdout, readable summary on stderr',
  builder: (y) =>
    y
      .option('condition', { type: 'string', demandOption: true })
      .option('table', { type: 'string', demandOption: true, describe: 'prediction table: CSV (mask,utility) or JSON ({"0000": 0.4, …})' })
      .option('observed', {
        type: 'string',
        describe: 'masks measured by the submitter (JSON array or one per line): scored with the reference values',
      })
      .option('tolerances', { type: 'string', describe: 'extra strict-reconstruction tolerances, comma-separated (0.1 is always scored)' })
      .option('references', { type: 'string', describe: 'reference folder (default outputs/references)' }),
  run: async (argv, { settings, out }) => {
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
