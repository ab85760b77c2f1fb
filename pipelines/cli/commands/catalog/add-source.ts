import { defineCommand } from '../../command.ts';
import { executorChoice, withExecutor, withMirror, withWorkers } from '../../options.ts';

export default defineCommand({
  command: 'add-source <plan>',
  describe:
    'add a new source from its construction plan: validate, freeze (sha256), acquire, prepare, execute every mask, verify, append its references',
  builder: (y) =>
    withExecutor(withWorkers(withMirror(y)))
      .positional('plan', { type: 'string', demandOption: true, describe: 'construction plan (JSON, see sources/plan.schema.json)' })
      .option('references', { type: 'string', describe: 'target reference folder (default outputs/references)' })
      .option('force', {
        type: 'boolean',
        default: false,
        describe: 'rebuild a source already added; a changed plan is recorded as superseding the old hash',
      })
      .option('dry-run', { type: 'boolean', default: false, describe: 'only validate the plan, check the target and print its sha256' })
      .option('allow-version-drift', { type: 'boolean', default: false, describe: 'run even if installed versions differ from the pins' }),
  // --references is the target folder; the catalog the command sees stays the default one
  ownReferences: () => true,
  run: async (argv, { settings, out }) => {
    const { addSource, addSourceLines, checkAddSource } = await import('../../../jobs/add-source.ts');
    const options = {
      settings,
      referencesDir: argv.references,
      force: argv.force,
      workers: argv.workers,
      allowVersionDrift: argv.allowVersionDrift,
      executor: executorChoice(argv),
    };
    if (argv.dryRun) {
      for (const line of checkAddSource(argv.plan!, options)) out(line);
      return 0;
    }
    const result = await addSource(argv.plan!, { ...options, log: (line) => out(line) });
    for (const line of addSourceLines(result)) out(line);
    return result.written ? 0 : 1;
  },
});
