// The journal keeps each ok record's raw run under the identity of what produced it, and trusts none
// of it: resume returns only intact runs of the same identity (plan, input, runtime, code, versions,
// numerics) whose prediction was kept, and reverifyRun checks each as a fresh run is checked, plus the
// family's utility rule. Real files; the runs of every family come from real workers. An append
// never follows a symbolic link, nor writes through a hard link.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, readFileSync, symlinkSync, truncateSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allMasks } from '../../pipelines/catalog/masks.ts';
import { digest } from '../../pipelines/core/hashing.ts';

import type { PreparedInput } from '../../pipelines/execution/executor.ts';
import { Journal, JOURNAL_MAX_BYTES, KEPT_PREDICTION_BYTES, reverifyRun, type JournalIdentity } from '../../pipelines/execution/journal.ts';
import { LocalExecutor } from '../../pipelines/execution/local/local-executor.ts';
import type { RunResult } from '../../pipelines/execution/protocol.ts';
import type { Truth } from '../../pipelines/execution/verification/verify.ts';
import { readManifest } from '../../pipelines/sources/prepare.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings } from '../support/workspace.ts';

/** One cheap condition per family; the prepared inputs are the committed references' (read, never written). */
const CONDITIONS = ['banknote', 'yacht', 'seeds', 'nile', 'astronaut', 'scifact', 'mitdb_100__d6', 'graph_dolphins__d6'];
const catalog = loadCatalog(currentSettings());
// read before the temporary workspace points the generated folders elsewhere
const PREPARED = currentSettings().paths.prepared;
const INPUTS = new Map<string, PreparedInput>(
  CONDITIONS.map((id) => [
    id,
    { source: catalog.condition(id).source, files: readManifest(currentSettings().paths, catalog.condition(id).source).prepared_files },
  ]),
);

let ws: Workspace;
beforeAll(() => {
  ws = useTempWorkspace();
});
afterAll(() => ws.dispose());

const identity: JournalIdentity = {
  condition: 'c',
  plan: 'p',
  prepared: { 'arrays.npz': 'a'.repeat(64) },
  runtime: 'pinned',
  code: 'x',
  versions: { numpy: '2.2.6' },
  numerics: 'n',
};

/** A forecasting-like run whose prediction is `values` as little-endian float64. */
function run(values: number[], utility = 0.5): RunResult {
  const bytes = new Uint8Array(new Float64Array(values).buffer);
  return {
    prediction: { ndarray: { dtype: '<f8', shape: [values.length], bytes } },
    prediction_sha256: digest(bytes),
    native_metric: 'one_step_MAE',
    native_value: 1,
    utility,
    normalization_scale: 1,
    extras: {},
    warnings: [{ category: 'UserWarning', message: 'kept as reported' }],
    prediction_wall_seconds: 0.05,
    metric_wall_seconds: 0.01,
    wall_seconds: 0.1,
  };
}

const lines = (journal: Journal) => readFileSync(journal.path, 'utf8').trim().split('\n');

describe('journal', () => {
  it('gives back the run as the worker reported it, the prediction bytes identical', () => {
    const journal = new Journal(currentSettings().paths.cache, 'roundtrip', identity);
    const original = run([0.1, -2.5e-300, Math.PI, 1e300]);
    journal.append('0000', original);
    const resumed = journal.resume().get('0000')!;
    expect(resumed).toEqual(original);
    if (!('ndarray' in resumed.prediction) || !('ndarray' in original.prediction)) throw new Error('array expected');
    expect(Buffer.from(resumed.prediction.ndarray.bytes).equals(Buffer.from(original.prediction.ndarray.bytes))).toBe(true);
  });

  it('resumes runs of the same identity only: another plan, input, runtime, code, versions or numerics resume nothing', () => {
    const journal = new Journal(currentSettings().paths.cache, 'c', identity);
    journal.append('0000', run([1]));
    journal.append('0001', run([2]));
    expect([...journal.resume().keys()]).toEqual(['0000', '0001']);
    const others: Partial<JournalIdentity>[] = [
      { plan: 'q' },
      { prepared: { 'arrays.npz': 'b'.repeat(64) } },
      { runtime: 'current' },
      { code: 'y' },
      { versions: { numpy: '2.5.5' } },
      { numerics: 'native' },
    ];
    for (const other of others)
      expect(
        [...new Journal(currentSettings().paths.cache, 'c', { ...identity, ...other }).resume().keys()],
        JSON.stringify(other),
      ).toEqual([]);
  });

  it('a torn last line, a damaged line and a line of another shape are run again', () => {
    const journal = new Journal(currentSettings().paths.cache, 'damaged', identity);
    journal.append('0000', run([1]));
    journal.append('0001', run([2]));
    journal.append('0010', run([3]));
    const [first, second, third] = lines(journal);
    const damaged = second!.replace('"wall_seconds":0.1', '"wall_seconds":9.1'); // checksum no longer matches
    const reshaped = JSON.parse(first!) as Record<string, unknown>;
    reshaped.record = {}; // an unknown field: the line is not a journal entry
    writeFileSync(journal.path, `${JSON.stringify(reshaped)}\n${damaged}\n${third!}\n${third!.slice(0, 200)}`);
    expect([...journal.resume().keys()]).toEqual(['0010']);
  });

  it(`a prediction over ${KEPT_PREDICTION_BYTES} bytes is journaled without its bytes and runs again`, () => {
    const journal = new Journal(currentSettings().paths.cache, 'large', identity);
    journal.append('0000', run(Array.from({ length: KEPT_PREDICTION_BYTES / 8 + 1 }, (_, i) => i)));
    journal.append('0001', run(Array.from({ length: KEPT_PREDICTION_BYTES / 8 }, (_, i) => i)));
    const [large, kept] = lines(journal).map((l) => JSON.parse(l) as { mask: string; run: { prediction: unknown } });
    expect(large!.run.prediction).toBeNull();
    expect(kept!.run.prediction).not.toBeNull();
    expect([...journal.resume().keys()]).toEqual(['0001']);
  });

  it('refuses to append through a symbolic link', () => {
    const victim = join(ws.root, 'victim.txt');
    writeFileSync(victim, 'untouched');
    const journal = new Journal(currentSettings().paths.cache, 'linked', identity);
    mkdirSync(join(ws.cache, 'journal'), { recursive: true });
    symlinkSync(victim, journal.path);
    expect(() => journal.append('0000', run([1]))).toThrow(/cannot append to .*linked\.jsonl: it is a symbolic link/);
    expect(readFileSync(victim, 'utf8')).toBe('untouched');
    expect(existsSync(victim)).toBe(true);
  });

  it('refuses to append through a hard link (another name of a file it did not make)', () => {
    const victim = join(ws.root, 'victim-hard.txt');
    writeFileSync(victim, 'untouched');
    const journal = new Journal(currentSettings().paths.cache, 'hard', identity);
    mkdirSync(join(ws.cache, 'journal'), { recursive: true });
    linkSync(victim, journal.path);
    expect(() => journal.append('0000', run([1]))).toThrow(
      /cannot append to .*hard\.jsonl: it has 2 hard links \(another file's name\); remove it/,
    );
    expect(readFileSync(victim, 'utf8')).toBe('untouched');
  });

  it('a FIFO, a link or an over-long file at the journal: refused with one line, never opened to read or blocked on', () => {
    mkdirSync(join(ws.cache, 'journal'), { recursive: true });
    const fifo = new Journal(currentSettings().paths.cache, 'fifo', identity);
    execFileSync('mkfifo', [fifo.path]);
    expect(() => fifo.resume()).toThrow(/^journal \S+fifo\.jsonl is a FIFO, not a regular file; refused; remove it/);
    expect(() => fifo.append('0000', run([1]))).toThrow(/^cannot append to \S+fifo\.jsonl: /);
    const linked = new Journal(currentSettings().paths.cache, 'to-zero', identity);
    symlinkSync('/dev/zero', linked.path);
    expect(() => linked.resume()).toThrow(/is a symbolic link, not a regular file; refused/);
    const big = new Journal(currentSettings().paths.cache, 'big', identity);
    writeFileSync(big.path, '');
    truncateSync(big.path, JOURNAL_MAX_BYTES + 1); // sparse: no disk used
    expect(() => big.resume()).toThrow(/is \d+ bytes, more than the \d+ allowed; refused; remove it/);
  });
});

describe('reverifyRun on real runs of every family', () => {
  let executor: LocalExecutor;
  const runs = new Map<string, { mask: string; run: RunResult }[]>();
  const truths = new Map<string, Truth>();
  beforeAll(async () => {
    executor = new LocalExecutor({ settings: currentSettings(), workers: 1, inputRoots: [PREPARED] });
    for (const id of CONDITIONS) {
      const { family, dimensions } = catalog.condition(id);
      const input = INPUTS.get(id)!;
      truths.set(id, await executor.truth({ family, input }, { timeoutSeconds: 120 }));
      // retrieval's records take seconds: its first mask only
      const masks = family === 'retrieval' ? [allMasks(dimensions)[0]!] : [allMasks(dimensions)[0]!, allMasks(dimensions).at(-1)!];
      runs.set(
        id,
        await Promise.all(masks.map(async (mask) => ({ mask, run: await executor.run({ family, input, mask }, { timeoutSeconds: 120 }) }))),
      );
    }
  });
  afterAll(() => executor.close());

  const check = (id: string, r: RunResult) => reverifyRun(catalog.condition(id).family, r, truths.get(id)!).problems;

  it.each(CONDITIONS)('%s: the runs pass, also after a round trip through the journal (the utility rule holds exactly)', (id) => {
    const journal = new Journal(currentSettings().paths.cache, id, { ...identity, condition: id });
    for (const { mask, run: r } of runs.get(id)!) {
      expect(check(id, r), `${id} ${mask} as computed`).toEqual([]);
      journal.append(mask, r);
    }
    const resumed = journal.resume();
    expect([...resumed.keys()]).toEqual(runs.get(id)!.map((r) => r.mask));
    for (const [mask, r] of resumed) expect(check(id, r), `${id} ${mask} resumed`).toEqual([]);
  });

  it('damage to a kept prediction, which the line checksum leaves out, fails its hash', () => {
    const journal = new Journal(currentSettings().paths.cache, 'astronaut-damaged', { ...identity, condition: 'astronaut' });
    journal.append('1111', runs.get('astronaut')!.at(-1)!.run);
    const line = readFileSync(journal.path, 'utf8');
    const at = line.indexOf('"base64":"') + 5000;
    writeFileSync(journal.path, `${line.slice(0, at)}${line[at] === 'A' ? 'B' : 'A'}${line.slice(at + 1)}`);
    const resumed = journal.resume().get('1111')!;
    expect(check('astronaut', resumed)[0]).toMatch(/^prediction hash/);
  });

  it.each(CONDITIONS)('%s: a forged utility, metric, scale, metric name or prediction is refused', (id) => {
    const { family } = catalog.condition(id);
    const r = runs.get(id)!.at(-1)!.run;
    const problems = (forged: Partial<RunResult>) => check(id, { ...r, ...forged });
    expect(problems({ utility: r.utility - 0.3 })).toEqual([expect.stringMatching(/^utility .* does not follow/)]);
    expect(problems({ utility: r.utility * (1 - 1e-15) })).not.toEqual([]); // not within a tolerance
    expect(problems({ native_metric: 'accuracy' })).toEqual([expect.stringMatching(/^metric accuracy/)]);
    expect(problems({ normalization_scale: (r.normalization_scale ?? 1) * 2 }).length).toBeGreaterThan(0);
    if (r.normalization_scale !== null) expect(problems({ normalization_scale: null }).length).toBeGreaterThan(0);
    // native value and utility forged together: the metric recomputed from the prediction disagrees
    const native = r.native_value * 0.5;
    const scale = r.normalization_scale;
    expect(problems({ native_value: native, utility: scale === null ? native : 1 / (1 + native / scale) })).toEqual([
      expect.stringMatching(/^independent /),
    ]);
    const prediction = r.prediction;
    if ('json' in prediction) {
      const json = structuredClone(prediction.json) as Record<string, string[]>;
      const query = Object.keys(json)[0]!;
      json[query] = [...json[query]!].reverse();
      expect(problems({ prediction: { json } })[0]).toMatch(/^prediction hash/);
    } else {
      // one changed byte: the bytes no longer hash to prediction_sha256
      const bytes = Uint8Array.from(prediction.ndarray.bytes); // a copy (a Buffer's slice() is a view)
      bytes[bytes.length - 2] = bytes[bytes.length - 2]! ^ 0x10;
      expect(problems({ prediction: { ndarray: { ...prediction.ndarray, bytes } } })[0]).toMatch(/^prediction hash/);
      // with the hash recomputed too, the metric disagrees where every value counts (a changed label
      // or score need not change an accuracy or a ranking)
      if (family === 'regression' || family === 'forecasting' || family === 'image_restoration') {
        const rehashed = { prediction: { ndarray: { ...prediction.ndarray, bytes } }, prediction_sha256: digest(bytes) };
        expect(problems(rehashed)).toEqual([expect.stringMatching(/^independent /)]);
      }
    }
    if (family === 'beat_detection') {
      const extras = structuredClone(r.extras) as { matching_tolerance_sensitivity: Record<string, Record<string, number>> };
      const at150 = extras.matching_tolerance_sensitivity['150']!;
      at150.precision = at150.precision! + 0.01;
      expect(problems({ extras })).toEqual(['extras do not follow from the prediction']);
    } else {
      expect(problems({ extras: { note: 'added' } })).toEqual(['extras do not follow from the prediction']);
    }
  });
});
