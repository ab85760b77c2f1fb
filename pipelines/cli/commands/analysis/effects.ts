import { defineCommand } from '../../command.ts';
import { list, withTables } from '../../options.ts';
import { outputPath } from '../../output-path.ts';

export default defineCommand({
  command: 'effects',
  describe: 'write conditional effects, pair interactions, per-condition figures and equivalence classes (Arrow + CSV) and summary.json',
  builder: (y) => withTables(y).option('out', { type: 'string', demandOption: true, describe: 'output directory' }),
  run: async (argv, { settings, out }) => {
    const { analyzeReferences, summaryLines, writeEffects } = await import('../../../analysis/effects.ts');
    const target = outputPath(settings, argv.out, 'out', 'folder');
    const { files, summary } = writeEffects(settings.paths, analyzeReferences(settings.paths, list(argv.condition, 'condition')), target);
    for (const line of summaryLines(summary)) out(line);
    out(`${files.length} files written to ${argv.out}`);
  },
});
