// A forged journal record never reaches a table. Real workers and real files, through rebuild on nile
// (16 forecasting records): the journal of an interrupted rebuild (its worker ends in the middle of
// mask 0011) is edited as a forger would, values changed and the line checksum recomputed, and the
// next rebuild resumes exactly the intact records, names how many it refused, and writes the values
// an uninterrupted rebuild wrote.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { allMasks } from '../../pipelines/catalog/masks.ts';
import { digest } from '../../pipelines/core/hashing.ts';
import type { ReferenceRecord } from '../../pipelines/execution/records.ts';
import { rebuild, type RebuildOptions } from '../../pipelines/jobs/rebuild.ts';
import { decodeTable } from '../../pipelines/references/tables.ts';
import { useGuardedWorkspace } from '../sources/hardening-support.ts';
import { currentSettings } from '../support/workspace.ts';
import { exitOnMask } from '../support/doubles.ts';

const catalog = loadCatalog(currentSettings());
const workspace = useGuardedWorkspace();
const journalPath = () => join(workspace().cache, 'journal', 'nile.jsonl');

/** A journal line as the forger sees it. */
interface Line {
  identity: string;
  mask: string;
  run: {
    prediction: { ndarray: { dtype: string; shape: number[]; base64: string } };
    prediction_sha256: string;
    native_value: number;
    utility: number;
    normalization_scale: number;
    [field: string]: unknown;
  };
  sha256: string;
}

/** One rebuild of nile in the workspace; `env` reaches its workers (test-only switches). */
async function rebuildNile(options: Partial<RebuildOptions> = {}, env: Record<string, string> = {}) {
  const logged: string[] = [];
  Object.assign(process.env, env);
  try {
    const summary = await rebuild(catalog, {
      settings: currentSettings(),
      conditions: ['nile'],
      workers: 1,
      quiet: true,
      log: (line) => logged.push(line),
      ...options,
    });
    return { summary, refusals: logged.filter((line) => line.startsWith('journal:')) };
  } finally {
    for (const key of Object.keys(env)) delete process.env[key];
  }
}

const essentials = (records: ReferenceRecord[]) =>
  records.map((r) => [
    r.mask,
    r.status,
    r.utility,
    r.native_value,
    r.independent_value,
    r.normalization_scale,
    r.prediction_sha256,
    r.native_metric,
    r.extras,
  ]);

function table(): ReferenceRecord[] {
  const path = join(workspace().references, 'nile.arrow');
  return decodeTable(readFileSync(path), path).records;
}

/** `journal` with the run of each named mask edited, and its checksum recomputed as the journal computes it. */
function forge(journal: string, masks: string[], edit: (run: Line['run']) => void): string {
  const lines = journal
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);
  expect(masks.every((m) => lines.some((l) => l.mask === m))).toBe(true);
  return `${lines
    .map((line) => {
      if (!masks.includes(line.mask)) return JSON.stringify(line);
      edit(line.run);
      const { sha256: _, ...content } = line;
      // the journal's checksum: its content without the prediction (checked by its hash instead)
      return JSON.stringify({ ...content, sha256: digest({ ...content, run: { ...content.run, prediction: null } }) });
    })
    .join('\n')}\n`;
}

/** The prediction's float64 values, and a setter writing changed values back as base64. */
function predictionOf(run: Line['run']): { values: Float64Array; store(): Uint8Array } {
  const bytes = new Uint8Array(Buffer.from(run.prediction.ndarray.base64, 'base64'));
  const values = new Float64Array(bytes.buffer);
  return {
    values,
    store() {
      run.prediction.ndarray.base64 = Buffer.from(bytes).toString('base64');
      return bytes;
    },
  };
}

let truth: ReferenceRecord[];
/** The journal of a rebuild whose worker ended in mask 0011: 15 records. */
let interrupted: string;
/** A journal of all 16 masks (the lines of two interrupted rebuilds). */
let complete: string;

beforeAll(async () => {
  const clean = await rebuildNile();
  expect(clean.summary.failed).toBe(0);
  truth = table();
  const first = await rebuildNile({ fresh: true }, exitOnMask('0011'));
  expect(first.summary.failed).toBe(1);
  interrupted = readFileSync(journalPath(), 'utf8');
  const masks = interrupted
    .trim()
    .split('\n')
    .map((l) => (JSON.parse(l) as Line).mask);
  expect(masks).toHaveLength(15);
  expect(masks).not.toContain('0011');
  await rebuildNile({ fresh: true }, exitOnMask('0100'));
  const line0011 = readFileSync(journalPath(), 'utf8')
    .trim()
    .split('\n')
    .find((l) => (JSON.parse(l) as Line).mask === '0011')!;
  complete = `${interrupted}${line0011}\n`;
});

/** Rebuilds from `journal` and checks that the table holds the true values. */
async function resumeFrom(journal: string) {
  writeFileSync(journalPath(), journal);
  const result = await rebuildNile();
  expect(result.summary.failed).toBe(0);
  expect(essentials(table())).toEqual(essentials(truth));
  expect(existsSync(journalPath())).toBe(false);
  return result;
}

describe('an intact journal', () => {
  it('of an interrupted rebuild: its 15 records are resumed, none refused, the table is the true one', async () => {
    const { summary, refusals } = await resumeFrom(interrupted);
    expect(summary.resumed).toBe(15);
    expect(refusals).toEqual([]);
  });

  it('of every mask: all 16 are resumed (their scale checked against one record computed now)', async () => {
    const { summary, refusals } = await resumeFrom(complete);
    expect(summary.resumed).toBe(16);
    expect(refusals).toEqual([]);
  });
});

describe('a forged journal record never reaches a table', () => {
  it("the issue's forgery: 0.3 added to the utility of 0000, the checksum recomputed; it is run again and the table gets 0.747", async () => {
    const { summary, refusals } = await resumeFrom(forge(interrupted, ['0000'], (run) => (run.utility += 0.3)));
    expect(summary.resumed).toBe(14);
    expect(refusals).toEqual(['journal: 1 record(s) of nile failed re-verification and run again']);
    expect(table()[0]!.utility).toBeCloseTo(0.747, 3);
  });

  it('native value and utility forged consistently (the utility follows from the forged MAE): the metric recomputed from the prediction refuses it', async () => {
    const forged = forge(interrupted, ['0001'], (run) => {
      run.native_value *= 0.5;
      run.utility = 1 / (1 + run.native_value / run.normalization_scale);
    });
    const { summary, refusals } = await resumeFrom(forged);
    expect(summary.resumed).toBe(14);
    expect(refusals).toEqual(['journal: 1 record(s) of nile failed re-verification and run again']);
  });

  it('a prediction whose bytes no longer hash to prediction_sha256, and one whose hash was recomputed too, are refused', async () => {
    let forged = forge(interrupted, ['0010'], (run) => {
      const prediction = predictionOf(run);
      prediction.values[0] = prediction.values[0]! + 1;
      prediction.store();
    });
    forged = forge(forged, ['0101'], (run) => {
      const prediction = predictionOf(run);
      prediction.values[0] = prediction.values[0]! + 1;
      run.prediction_sha256 = digest(prediction.store());
    });
    const { summary, refusals } = await resumeFrom(forged);
    expect(summary.resumed).toBe(13);
    expect(refusals).toEqual(['journal: 2 record(s) of nile failed re-verification and run again']);
  });

  it('scale and utility forged consistently: the scale of a record computed now refuses it', async () => {
    const forged = forge(interrupted, ['0100'], (run) => {
      run.normalization_scale *= 2;
      run.utility = 1 / (1 + run.native_value / run.normalization_scale);
    });
    const { summary, refusals } = await resumeFrom(forged);
    expect(summary.resumed).toBe(14);
    expect(refusals).toEqual(['journal: 1 record(s) of nile failed re-verification and run again']);
  });

  it('every record of a complete journal with a forged scale: none is resumed', async () => {
    const forged = forge(complete, allMasks(4), (run) => {
      run.normalization_scale *= 2;
      run.utility = 1 / (1 + run.native_value / run.normalization_scale);
    });
    const { summary, refusals } = await resumeFrom(forged);
    expect(summary.resumed).toBe(0);
    expect(refusals).toEqual(['journal: 16 record(s) of nile failed re-verification and run again']);
  });
});
