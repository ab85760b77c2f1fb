import { UserError } from '../../../core/errors.ts';
import { defineCommand } from '../../command.ts';
import { list, withMirror } from '../../options.ts';

export default defineCommand({
  command: 'acquire',
  describe: 'fetch and sha256-check raw source files into the cache',
  builder: (y) => withMirror(y.option('source', { type: 'string', array: true, describe: 'source(s); default all' })),
  run: async (argv, { settings, out }) => {
    const { loadCatalog } = await import('../../../references/store.ts');
    const { acquirePlan } = await import('../../../sources/acquire.ts');
    let failed = 0;
    for (const loaded of loadCatalog(settings).selectSources(list(argv.source, 'source'))) {
      try {
        const files = await acquirePlan(loaded.plan, { settings });
        out(`${loaded.plan.source}: ${files.map((f) => `${f.name} (${f.origin})`).join(', ')}`);
      } catch (error) {
        if (!(error instanceof UserError)) throw error;
        failed++;
        out(`${loaded.plan.source}: FAILED\n${error.message}`);
      }
    }
    return failed ? 1 : 0;
  },
});
