// The architecture stays visible: data flows one way through the stage folders of pipelines/ (a
// folder imports only from the folders before it), every folder says what it holds, none grows large.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';

const ORDER = ['core', 'catalog', 'execution', 'sources', 'references', 'jobs', 'analysis', 'evaluation', 'cli'];
const PIPELINES = join(ROOT, 'pipelines');

/** A folder and all folders below it. */
function folderTree(folder: string): string[] {
  const below = readdirSync(folder, { withFileTypes: true }).filter((e) => e.isDirectory());
  return [folder, ...below.flatMap((e) => folderTree(join(folder, e.name)))];
}

describe('pipelines/ layout', () => {
  it('has exactly the stage folders; every folder (subfolders too) has a README and at most 12 source files', () => {
    const folders = readdirSync(PIPELINES, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    expect(folders.sort()).toEqual([...ORDER].sort());
    for (const folder of ORDER.flatMap((stage) => folderTree(join(PIPELINES, stage)))) {
      const files = readdirSync(folder);
      expect(files, folder).toContain('README.md');
      expect(files.filter((f) => f.endsWith('.ts')).length, folder).toBeLessThanOrEqual(12);
    }
  });

  it('imports flow one way: a stage imports only from itself and the stages before it', () => {
    const backwards: string[] = [];
    for (const stage of ORDER) {
      for (const folder of folderTree(join(PIPELINES, stage))) {
        for (const file of readdirSync(folder).filter((f) => f.endsWith('.ts'))) {
          const text = readFileSync(join(folder, file), 'utf8');
          for (const match of text.matchAll(/from '(\.\.?\/[^']+)'/g)) {
            const target = relative(PIPELINES, resolve(folder, match[1]!)).split('/')[0]!;
            if (ORDER.indexOf(target) > ORDER.indexOf(stage))
              backwards.push(`${relative(PIPELINES, join(folder, file))} imports ${target}/`);
          }
        }
      }
    }
    expect(backwards).toEqual([]);
  });
});
