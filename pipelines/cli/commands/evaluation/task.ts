import { defineCommand } from '../../command.ts';

export default defineCommand({
  command: 'task',
  describe:
    "a condition's public task view, as an agent sees it: family, factors, utility, data summary, workflow source, the free anchor observations",
  builder: (y) =>
    y
      .option('condition', { type: 'string', demandOption: true })
      .option('references', { type: 'string', describe: 'reference folder (default outputs/references)' }),
  run: async (argv, { settings, out }) => {
    const { conditionTask } = await import('../../../evaluation/task.ts');
    out(JSON.stringify(conditionTask(settings, argv.condition), null, 2));
  },
});
