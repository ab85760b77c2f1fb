// The journal resumes only intact records of the same identity: a hand-edited record is run again,
// and an append never follows a symbolic link.
import { mkdirSync, readFileSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Journal } from '../../pipelines/execution/journal.ts';
import type { ReferenceRecord } from '../../pipelines/execution/records.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';

let ws: Workspace;
beforeAll(() => {
  ws = useTempWorkspace();
});
afterAll(() => ws.dispose());

const identity = { condition: 'c', plan: 'p', prepared: {}, code: 'x', versions: {}, numerics: 'n' };
const record = (mask: string, utility: number): ReferenceRecord => ({
  condition: 'c', source: 's', family: 'forecasting', dimensions: 4, mask, status: 'ok', error: null, utility,
  native_metric: 'm', native_value: 1, independent_value: 1, normalization_scale: null, prediction_sha256: 'a'.repeat(64),
  warnings: [], wall_seconds: 0.1, prediction_wall_seconds: 0.05, metric_wall_seconds: 0.05, plan_sha256: 'p', extras: {},
});

describe('journal', () => {
  it('resumes intact records only: an edited record is dropped', () => {
    const journal = new Journal('c', identity);
    journal.append(record('0000', 0.5));
    journal.append(record('0001', 0.25));
    expect([...journal.resume().keys()]).toEqual(['0000', '0001']);
    const lines = readFileSync(journal.path, 'utf8').trim().split('\n');
    writeFileSync(journal.path, `${lines[0]!.replace('"utility":0.5', '"utility":0.99')}\n${lines[1]}\n`);
    expect([...journal.resume().keys()]).toEqual(['0001']);
    expect([...new Journal('c', { ...identity, code: 'other' }).resume().keys()]).toEqual([]);
  });

  it('refuses to append through a symbolic link', () => {
    const victim = join(ws.root, 'victim.txt');
    writeFileSync(victim, 'untouched');
    const journal = new Journal('linked', identity);
    mkdirSync(join(ws.cache, 'journal'), { recursive: true });
    symlinkSync(victim, journal.path);
    expect(() => journal.append(record('0000', 0.5))).toThrow(/cannot append to .*linked\.jsonl: it is a symbolic link/);
    expect(readFileSync(victim, 'utf8')).toBe('untouched');
    expect(existsSync(victim)).toBe(true);
  });
});
