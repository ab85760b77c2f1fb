import { defineCommand } from '../../command.ts';
import { list, withMirror, withWorkers } from '../../options.ts';

export default defineCommand({
  command: 'prepare',
  describe: 'acquire raw files and write prepared/<source>/ and manifests/<source>.json',
  builder: (y) => withWorkers(withMirror(y.option('source', { type: 'string', array: true, describe: 'source(s); default all' }))),
  run: async (argv, { settings, out }) => {
    const { loadCatalog } = await import('../../../references/store.ts');
    const { prepareSources } = await import('../../../sources/prepare.ts');
    const selected = loadCatalog(settings).selectSources(list(argv.source, 'source'));
    const outcomes = await prepareSources(selected, { settings, workers: argv.workers, log: (line) => out(line) });
    const failed = outcomes.filter((o) => !o.ok);
    out(`${outcomes.length - failed.length}/${outcomes.length} sources prepared`);
    return failed.length ? 1 : 0;
  },
});
