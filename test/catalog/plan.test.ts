import { loadCatalog } from '../../pipelines/references/store.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPlanFile } from '../../pipelines/catalog/catalog.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { allMasks } from '../../pipelines/catalog/masks.ts';
import { parsePlan } from '../../pipelines/catalog/plan.ts';
import { SOURCES_DIR } from '../../pipelines/core/paths.ts';
import { runPython } from '../../pipelines/execution/launcher.ts';
import { currentSettings } from '../support/workspace.ts';

const base = JSON.parse(readFileSync(join(SOURCES_DIR, 'co2.plan.json'), 'utf8'));

function invalid(mutate: (plan: any) => void): string {
  const plan = structuredClone(base);
  mutate(plan);
  try {
    parsePlan('sources/bad.plan.json', JSON.stringify(plan));
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return (error as Error).message;
  }
  throw new Error('the plan was accepted');
}

describe('construction plans', () => {
  it('the catalog has 30 sources, 36 conditions and 1,248 configurations', () => {
    const catalog = loadCatalog(currentSettings());
    expect(catalog.plans.size).toBe(30);
    expect(catalog.conditions.size).toBe(36);
    const masks = [...catalog.conditions.values()].reduce((n, c) => n + allMasks(c.dimensions).length, 0);
    expect(masks).toBe(1248);
  });

  it('rejects invalid plans with the file, the field and what was expected', () => {
    expect(invalid((p) => (p.family = 'astrology'))).toMatch(/sources\/bad\.plan\.json[\s\S]*family/);
    expect(invalid((p) => (p.conditions[1].equivalences = [{ option: 'G', inactive_when: { A: 0 } }]))).toMatch(
      /conditions\.1\.equivalences\.0\.option/,
    );
    expect(invalid((p) => (p.conditions[0].equivalences = [{ option: 'E', inactive_when: { A: 0 } }]))).toMatch(
      /unknown option E: a 4-option condition has ABCD/,
    );
    expect(invalid((p) => (p.conditions[0].dimensions = 5))).toMatch(/conditions\.0\.dimensions/);
    expect(invalid((p) => (p.raw_files[0].sha256 = 'abc'))).toMatch(/raw_files\.0\.sha256: expected a lowercase hex sha256/);
    expect(invalid((p) => delete p.licence)).toMatch(/licence/);
    expect(invalid((p) => (p.licence = ''))).toMatch(/licence: a licence is required/);
    expect(invalid((p) => (p.preparation.recipe = 'magic'))).toMatch(/unknown recipe 'magic'/);
    expect(invalid((p) => (p.unexpected = 1))).toMatch(/unexpected/);
  });

  it('rejects a plan that is not JSON', () => {
    expect(() => parsePlan('x.plan.json', '{')).toThrow(/invalid construction plan x\.plan\.json: not JSON/);
  });

  it('the plan hash is the sha256 of the canonical JSON, as Python computes it', () => {
    const file = join(SOURCES_DIR, 'co2.plan.json');
    const script =
      'import hashlib, json, sys\n' +
      'v = json.load(open(sys.argv[1]))\n' +
      'print(hashlib.sha256(json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest())';
    const { stdout } = runPython(currentSettings(), ['-c', script, file]);
    expect(loadPlanFile(file).sha256).toBe(String(stdout).trim());
  });
});
