// Replay's "cold" promise, checked on real workers: no state crosses records. Each record of several
// families gives the same prediction bytes computed alone in a fresh worker, after all the other
// masks of its condition, or after them in reverse order; and the decoded input a worker shares
// between records can be neither changed nor swapped for other bytes.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allMasks } from '../../pipelines/catalog/masks.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import type { PreparedInput } from '../../pipelines/execution/executor.ts';
import { LocalExecutor } from '../../pipelines/execution/local/local-executor.ts';
import type { Encoded } from '../../pipelines/execution/protocol.ts';
import { pythonEnvironment } from '../../pipelines/execution/launcher.ts';
import { readManifest } from '../../pipelines/sources/prepare.ts';
import { currentSettings, preparedFolder } from '../support/workspace.ts';

/** One cheap condition per array-predicting family (retrieval's records take seconds each). */
const CONDITIONS = ['wine__d6', 'spambase', 'concrete', 'co2__d6', 'astronaut', 'mitdb_100__d6', 'graph_lesmis__d6'];

function bytesOf(prediction: Encoded): string {
  return 'ndarray' in prediction
    ? `${prediction.ndarray.dtype} ${prediction.ndarray.shape.join('x')} ${Buffer.from(prediction.ndarray.bytes).toString('base64')}`
    : JSON.stringify(prediction.json);
}

describe('no state crosses records', () => {
  const catalog = loadCatalog(currentSettings());
  let executor: LocalExecutor;
  beforeAll(() => {
    executor = new LocalExecutor({ settings: currentSettings(), workers: 1 });
  });
  afterAll(() => executor.close());

  it.each(CONDITIONS)('%s: a record alone, after the other masks, or after them in reverse gives the same bytes', async (id) => {
    const condition = catalog.condition(id);
    const input: PreparedInput = {
      source: condition.source,
      files: readManifest(currentSettings().paths, condition.source).prepared_files,
    };
    const masks = allMasks(condition.dimensions);
    const run = async (mask: string, isolation: string) =>
      bytesOf((await executor.run({ family: condition.family, input, mask, isolation }, { timeoutSeconds: 120 })).prediction);

    const forward = new Map<string, string>();
    for (const mask of masks) forward.set(mask, await run(mask, `${id} forward`));
    const backward = new Map<string, string>();
    for (const mask of [...masks].reverse()) backward.set(mask, await run(mask, `${id} backward`));
    // Alone: every fourth mask in a worker of its own, plus the last one (which ran after all others).
    const alone = masks.filter((_, i) => i % 4 === 0 || i === masks.length - 1);
    for (const mask of alone) {
      expect(await run(mask, `${id} alone ${mask}`), `${id} ${mask} alone`).toBe(forward.get(mask));
    }
    for (const mask of masks) expect(backward.get(mask), `${id} ${mask} reverse order`).toBe(forward.get(mask));
    // The masks do differ: a constant prediction would make the comparison vacuous.
    expect(new Set(forward.values()).size).toBeGreaterThan(1);
  });

  it('an executor refuses input bytes other than the requested ones, naming the file', async () => {
    const condition = catalog.condition('nile');
    const files = { ...readManifest(currentSettings().paths, 'nile').prepared_files, 'arrays.npz': 'f'.repeat(64) };
    const attempt = executor.run(
      { family: condition.family, input: { source: 'nile', files }, mask: '0000', isolation: 'swapped' },
      { timeoutSeconds: 60 },
    );
    await expect(attempt).rejects.toThrow(/arrays\.npz/);
  });

  it('the shared decoded input is read-only: arrays and JSON values refuse changes', async () => {
    const script = [
      'import sys',
      'from workflows.container import load_prepared',
      'data = load_prepared(sys.argv[1], dict(a.split("=") for a in sys.argv[2:]))',
      'refused = []',
      'for attempt in (lambda: data["series"].__setitem__(0, 1.0), lambda: data.__setitem__("cut", 0), lambda: data.pop("cut")):',
      '    try:',
      '        attempt()',
      '    except (ValueError, TypeError) as error:',
      '        refused.append(type(error).__name__)',
      'print(",".join(refused))',
    ].join('\n');
    const files = Object.entries(readManifest(currentSettings().paths, 'nile').prepared_files).map(([name, sha]) => `${name}=${sha}`);
    const { stdout } = await execa(currentSettings().python.executable, ['-c', script, preparedFolder('nile'), ...files], {
      cwd: ROOT,
      env: pythonEnvironment(currentSettings()),
    });
    expect(stdout.trim()).toBe('ValueError,TypeError,TypeError');
  });

  it("the worker side alone refuses bytes other than the requested ones (the check after the orchestrator's)", async () => {
    const script = [
      'import sys',
      'from workflows.container import load_prepared',
      'try:',
      '    load_prepared(sys.argv[1], {"arrays.npz": "0" * 64, "metadata.json.gz": "0" * 64})',
      'except ValueError as error:',
      '    print(error)',
    ].join('\n');
    const { stdout } = await execa(currentSettings().python.executable, ['-c', script, preparedFolder('nile')], {
      cwd: ROOT,
      env: pythonEnvironment(currentSettings()),
    });
    expect(stdout).toMatch(/nile\/(arrays\.npz|metadata\.json\.gz) has sha256 [0-9a-f]{64}, not the requested 0{64}/);
  });
});
