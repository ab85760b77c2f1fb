// The local executor (a pool of Python processes on this machine) keeps the executor contract, and
// gives each isolation key fresh worker processes (forked from its template).
import { loadCatalog } from '../../pipelines/references/store.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalExecutor } from '../../pipelines/execution/local/local-executor.ts';
import { prepareSources, readManifest } from '../../pipelines/sources/prepare.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { executorContract } from './executor-contract.ts';
import { currentSettings } from '../support/workspace.ts';

let ws: Workspace;
beforeAll(async () => {
  ws = useTempWorkspace();
  const [outcome] = await prepareSources([loadCatalog(currentSettings()).source('nile')], {
    settings: currentSettings(),
    workers: 1,
    online: false,
  });
  expect(outcome!.ok).toBe(true);
});
afterAll(() => ws.dispose());

describe('local executor', () => {
  executorContract(
    (options) => new LocalExecutor(options),
    () => ({ source: 'nile', files: readManifest(currentSettings().paths, 'nile').prepared_files }),
  );

  it('runs requests of another isolation key in a fresh worker process, and those of the same key in one', async () => {
    const executor = new LocalExecutor({ settings: currentSettings(), workers: 1 });
    try {
      const run = (mask: string, isolation: string) =>
        executor.run(
          {
            family: 'forecasting',
            input: { source: 'nile', files: readManifest(currentSettings().paths, 'nile').prepared_files },
            mask,
            isolation,
          },
          { timeoutSeconds: 60 },
        );
      await run('0000', 'a');
      const afterA = (await executor.describe()).length;
      await run('0001', 'a');
      expect((await executor.describe()).length).toBe(afterA);
      await run('0000', 'b');
      const hellos = await executor.describe();
      expect(hellos.length).toBe(afterA + 1);
      expect(new Set(hellos.map((h) => h.pid)).size).toBe(hellos.length);
    } finally {
      await executor.close();
    }
  });
});
