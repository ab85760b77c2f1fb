import { existsSync } from 'node:fs';
import { UserError } from '../../../core/errors.ts';
import { defineCommand } from '../../command.ts';
import { withReferences } from '../../options.ts';

export default defineCommand({
  command: 'list',
  describe: 'list the catalog: sources, families and conditions',
  builder: (y) =>
    withReferences(y).option('json', {
      type: 'boolean',
      default: false,
      describe: 'one JSON document: every condition with its family, width, source, pairing and published comparability',
    }),
  run: async (argv, { settings, out }) => {
    // the plans listed are those the named folder was built from: a folder that is not there is a mistake, not "none"
    if (argv.references !== undefined && !existsSync(settings.paths.references))
      throw new UserError(`reference folder ${argv.references} does not exist`);
    const { loadCatalog } = await import('../../../references/store.ts');
    const catalog = loadCatalog(settings);
    if (argv.json) {
      const conditions = [...catalog.conditions.values()].map((c) => ({
        condition: c.id,
        family: c.family,
        dimensions: c.dimensions,
        source: c.source,
        paired_with: c.condition.paired_with ?? null,
        equivalences: c.condition.equivalences.length,
        plan_file: c.plan.file,
        published: { comparable: c.plan.plan.published.comparable, prepared_match: c.plan.plan.published.prepared_match },
      }));
      out(JSON.stringify({ conditions, sources: catalog.plans.size }, null, 2));
      return;
    }
    for (const c of catalog.conditions.values()) {
      const pub = c.plan.plan.published;
      out(`${c.id.padEnd(22)} ${c.family.padEnd(22)} ${String(c.dimensions)} options  source ${c.source.padEnd(18)} ${pub.prepared_match}`);
    }
    out(`${catalog.conditions.size} conditions on ${catalog.plans.size} sources`);
  },
});
