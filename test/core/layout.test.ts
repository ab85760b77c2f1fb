// The architecture stays visible: data flows one way through the stage folders of pipelines/ (a
// folder imports only from the folders before it), every folder says what it holds, none grows large.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';

const ORDER = ['core', 'catalog', 'execution', 'sources', 'references', 'jobs', 'analysis', 'cli'];
const PIPELINES = join(ROOT, 'pipelines');

describe('pipelines/ layout', () => {
  it('has exactly the stage folders, each with a README and at most 12 source files', () => {
    const folders = readdirSync(PIPELINES, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect(folders.sort()).toEqual([...ORDER].sort());
    for (const folder of ORDER) {
      const files = readdirSync(join(PIPELINES, folder));
      expect(files, folder).toContain('README.md');
      expect(files.filter((f) => f.endsWith('.ts')).length, folder).toBeLessThanOrEqual(12);
    }
  });

  it('imports flow one way: a folder imports only from itself and the folders before it', () => {
    const backwards: string[] = [];
    for (const folder of ORDER) {
      for (const file of readdirSync(join(PIPELINES, folder)).filter((f) => f.endsWith('.ts'))) {
        const text = readFileSync(join(PIPELINES, folder, file), 'utf8');
        for (const match of text.matchAll(/from '\.\.\/(\w+)\//g)) {
          if (ORDER.indexOf(match[1]!) > ORDER.indexOf(folder)) backwards.push(`${folder}/${file} imports ${match[1]}/`);
        }
      }
    }
    expect(backwards).toEqual([]);
  });
});
