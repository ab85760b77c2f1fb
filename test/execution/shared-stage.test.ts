// The retrieval shared stage (term counts reused across masks) must give the same bits as the cold
// path, on the real scifact input.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { WorkerPool } from '../../pipelines/execution/local/local-pool.ts';
import { prepareSources, readManifest } from '../../pipelines/sources/prepare.ts';

import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings, preparedFolder } from '../support/workspace.ts';

const haveRaw = currentSettings().mirrors.some((d) => existsSync(join(d, 'beir_scifact', 'corpus.jsonl')));
// Masks that vary every option that changes the counts (A, B, E) and the weighting (C, D, F).
const MASKS = ['000000', '110000', '101010', '011101', '111111', '100011'];

describe.skipIf(!haveRaw)('retrieval shared stage (needs the raw mirror)', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = useTempWorkspace();
    const [outcome] = await prepareSources([loadCatalog(currentSettings()).source('scifact')], {
      settings: currentSettings(),
      workers: 1,
      online: false,
    });
    expect(outcome!.ok).toBe(true);
  });
  afterAll(() => ws.dispose());

  it('reusing the term counts across masks is bit-identical to the cold path', async () => {
    const pool = new WorkerPool(1, { settings: currentSettings() });
    const input = { folder: preparedFolder('scifact'), files: readManifest(currentSettings().paths, 'scifact').prepared_files };
    try {
      for (const mask of MASKS) {
        const cold = await pool.submit((w) => w.run('retrieval', input, mask), 180);
        const warm = await pool.submit((w) => w.run('retrieval', input, mask, { reuseSharedStage: true }), 180);
        expect(warm.prediction_sha256, mask).toBe(cold.prediction_sha256);
        expect(warm.utility, mask).toBe(cold.utility);
      }
    } finally {
      await pool.close();
    }
  });
});
