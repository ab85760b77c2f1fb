import { defineCommand } from '../../command.ts';
import { list, withTables } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

export default defineCommand({
  command: 'report',
  describe: 'write a self-contained HTML report and/or figure files: response surfaces and conditional-effect heat maps per condition',
  builder: (y) =>
    withTables(y)
      .option('out', { type: 'string', describe: 'HTML file' })
      .option('figures', {
        type: 'string',
        describe: "folder for each condition's surface and heat map as SVG and PNG (drawn by matplotlib)",
      })
      .option('diff-with', {
        type: 'string',
        describe:
          'other references (a folder or a WhatWorkedBench pack): the page gets a "diff" section ' +
          'comparing these references with them (as wwref diff)',
      }),
  run: async (argv, { settings, out }) => {
    const { writeReportFiles } = await import('../../../analysis/report.ts');
    // never into the references it compares with (a pack is a folder the reference rule does not know)
    const reads = argv.diffWith === undefined ? [] : [argv.diffWith];
    const { summary, figures } = writeReportFiles(settings, {
      out: argv.out === undefined ? undefined : outputPath(settings, argv.out, 'out', 'file', { reads }),
      figures: argv.figures === undefined ? undefined : outputPath(settings, argv.figures, 'figures', 'folder', { reads }),
      conditions: list(argv.condition, 'condition'),
      diffWith: argv.diffWith,
    });
    if (argv.out !== undefined) out(`report of ${summary.conditions} condition(s) written to ${argv.out}`);
    if (argv.figures !== undefined)
      out(`${figures.length} figure file(s) of ${summary.conditions} condition(s) written to ${argv.figures}`);
  },
});
