import { defineCommand } from '../../command.ts';
import { list, withTables } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

export default defineCommand({
  command: 'export',
  describe: 'write all records of the reference tables as one file',
  builder: (y) =>
    withTables(y)
      .option('format', {
        choices: ['csv', 'wwb'] as const,
        default: 'csv' as const,
        describe: 'csv: one file; wwb: a WhatWorkedBench pack folder',
      })
      .option('out', { type: 'string', demandOption: true, describe: 'output file (csv) or folder (wwb)' }),
  run: async (argv, { settings, out }) => {
    const target = outputPath(settings, argv.out, 'out', argv.format === 'wwb' ? 'folder' : 'file');
    const conditions = list(argv.condition, 'condition');
    const count =
      argv.format === 'wwb'
        ? (await import('../../../jobs/wwb.ts')).exportPack(settings, target, conditions)
        : (await import('../../../references/export.ts')).exportCsv(settings, target, conditions);
    out(`${count} records written to ${argv.out}`);
  },
});
