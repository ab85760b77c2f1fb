import { defineCommand } from '../../command.ts';
import { withReferences } from '../../options.ts';

export default defineCommand({
  command: 'list',
  describe: 'list the catalog: sources, families and conditions',
  builder: (y) => withReferences(y),
  run: async (_argv, { settings, out }) => {
    const { loadCatalog } = await import('../../../references/store.ts');
    const catalog = loadCatalog(settings);
    for (const c of catalog.conditions.values()) {
      const pub = c.plan.plan.published;
      out(`${c.id.padEnd(22)} ${c.family.padEnd(22)} ${String(c.dimensions)} options  source ${c.source.padEnd(18)} ${pub.prepared_match}`);
    }
    out(`${catalog.conditions.size} conditions on ${catalog.plans.size} sources`);
  },
});
