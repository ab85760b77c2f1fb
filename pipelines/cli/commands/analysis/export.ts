import { exportPack } from '../../../jobs/wwb.ts';
import { exportCsv } from '../../../references/export.ts';
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
  run: (argv, { settings, out }) => {
    const target = outputPath(settings, argv.out, 'out', argv.format === 'wwb' ? 'folder' : 'file');
    const conditions = list(argv.condition, 'condition');
    const count = argv.format === 'wwb' ? exportPack(settings, target, conditions) : exportCsv(settings, target, conditions);
    out(`${count} records written to ${argv.out}`);
  },
});
