import { defineCommand } from '../../command.ts';
import { list, withMirror, withReferences, withWorkers } from '../../options.ts';

const COLUMNS = ['manifest', 'plan', 'raw', 'prepared', 'reprepared', 'published', 'equivalences'];

export default defineCommand({
  command: 'audit',
  describe:
    'check source manifests against themselves, their plans, the raw cache, the prepared files ' +
    '(each source re-prepared from its raw files and compared byte for byte) and the published facts',
  builder: (y) =>
    withWorkers(withMirror(withReferences(y)))
      .option('source', { type: 'string', array: true, describe: 'source(s); default all' })
      .option('verbose', { type: 'boolean', default: false }),
  run: async (argv, { settings, out }) => {
    const { auditFailed, auditNeeds, auditWithReprepare } = await import('../../../jobs/audit.ts');
    const { loadCatalog } = await import('../../../references/store.ts');
    const { prepareMissing } = await import('../../../sources/prepare.ts');
    const catalog = loadCatalog(settings);
    const sources = list(argv.source, 'source');
    const options = { settings, workers: argv.workers, log: (line: string) => out(line) };
    // prepared inputs that are missing are made first and checked against their source manifests
    await prepareMissing(auditNeeds(settings, catalog, sources), options);
    // then every source is re-prepared from its raw files and plan and compared (`reprepared`)
    const audits = await auditWithReprepare(catalog, sources, options);
    out(`${'source'.padEnd(20)} ${COLUMNS.map((h) => h.padEnd(10)).join(' ')}`);
    for (const a of audits) {
      out(
        `${a.source.padEnd(20)} ${Object.values(a.checks)
          .map((v) => v.padEnd(10))
          .join(' ')}`,
      );
      for (const p of a.problems) out(`    ! ${p}`);
      if (argv.verbose) for (const n of a.notes) out(`    - ${n}`);
    }
    const failed = audits.filter(auditFailed);
    out(`${audits.length - failed.length}/${audits.length} sources pass the audit`);
    return failed.length ? 1 : 0;
  },
});
