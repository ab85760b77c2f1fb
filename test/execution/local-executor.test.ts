// The local executor (a pool of Python processes on this machine) keeps the executor contract.
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { Catalog } from '../../pipelines/catalog/catalog.ts';
import { LocalExecutor } from '../../pipelines/execution/local/local-executor.ts';
import { prepareSources, readManifest } from '../../pipelines/sources/prepare.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { executorContract } from './executor-contract.ts';

let ws: Workspace;
beforeAll(async () => {
  ws = useTempWorkspace();
  const [outcome] = await prepareSources([Catalog.load().source('nile')], { workers: 1, online: false });
  expect(outcome!.ok).toBe(true);
});
afterAll(() => ws.dispose());

describe('local executor', () => {
  executorContract((options) => new LocalExecutor(options), () => ({ source: 'nile', files: readManifest('nile').prepared_files }));
});
