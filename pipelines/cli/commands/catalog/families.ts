import { defineCommand } from '../../command.ts';
import { list } from '../../options.ts';

export default defineCommand({
  command: 'families',
  describe: 'print the workflow families: mask widths, prediction-hash rule and what each option does (docs/families.md)',
  builder: (y) => y.option('family', { type: 'string', array: true, describe: 'family name(s); default all' }),
  run: async (argv, { out }) => {
    const { familyLines } = await import('../../../catalog/families.ts');
    for (const line of familyLines(list(argv.family, 'family'))) out(line);
  },
});
