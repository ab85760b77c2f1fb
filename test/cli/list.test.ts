// `wwref list --json`: the catalog as data, for harnesses that must not parse the text listing.
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadCatalog } from '../../pipelines/references/store.ts';
import { cliInProcess } from '../support/cli.ts';
import { currentSettings } from '../support/workspace.ts';

describe('wwref list --json', () => {
  it('lists every condition of the catalog once, with the plan facts the text listing shows', async () => {
    const r = await cliInProcess(['list', '--json'], ROOT);
    expect(r.code, r.stderr).toBe(0);
    const listed = JSON.parse(r.stdout) as { conditions: Record<string, unknown>[]; sources: number };
    const catalog = loadCatalog(currentSettings());
    expect(listed.conditions.map((c) => c.condition)).toEqual([...catalog.conditions.keys()]);
    expect(listed.sources).toBe(catalog.plans.size);
    for (const entry of listed.conditions) {
      const c = catalog.condition(String(entry.condition));
      expect(entry).toEqual({
        condition: c.id,
        family: c.family,
        dimensions: c.dimensions,
        source: c.source,
        paired_with: c.condition.paired_with ?? null,
        equivalences: c.condition.equivalences.length,
        plan_file: c.plan.file,
        published: { comparable: c.plan.plan.published.comparable, prepared_match: c.plan.plan.published.prepared_match },
      });
    }
    // the text listing names the same conditions
    const text = await cliInProcess(['list'], ROOT);
    for (const entry of listed.conditions) expect(text.stdout).toContain(String(entry.condition));
  });
});
