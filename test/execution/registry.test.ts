// One source of truth for the family registry and the packages that decide bits: the Python workers
// and the TypeScript orchestrator must agree, and a worker that disagrees is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAMILIES, FAMILY_NAMES, registryProblems } from '../../pipelines/catalog/families.ts';
import { pinnedVersions, REPLAY_PACKAGES } from '../../pipelines/execution/identity.ts';
import { WorkerPool } from '../../pipelines/execution/local/local-pool.ts';
import type { HelloResult } from '../../pipelines/execution/protocol.ts';
import { currentSettings } from '../support/workspace.ts';

let hello: HelloResult;
const pool = new WorkerPool(1, { settings: currentSettings() });
beforeAll(async () => {
  hello = await pool.hello();
});
afterAll(() => pool.close());

describe('family registry', () => {
  it('the Python workers implement exactly the families of the TypeScript registry, with the same widths and hash rules', () => {
    expect(Object.keys(hello.families).sort()).toEqual([...FAMILY_NAMES].sort());
    expect(registryProblems(hello.families)).toEqual([]);
  });

  it('a disagreeing registry is reported, family by family', () => {
    const missing: HelloResult['families'] = {
      ...hello.families,
      retrieval: { dimensions: [4, 6], hash_rule: 'raw_bytes' },
      extra: { dimensions: [4], hash_rule: 'json' },
    };
    delete missing.beat_detection;
    expect(registryProblems(missing)).toEqual([
      expect.stringMatching(/^family retrieval: worker .*raw_bytes.*orchestrator .*"json"/),
      'family beat_detection is missing in the worker',
      'family extra is unknown to the orchestrator',
    ]);
    expect(FAMILIES.beat_detection.dimensions).toEqual([6]);
  });
});

describe('packages that decide bits', () => {
  it('workers report the versions of exactly the packages marked in workflows/requirements.txt, at their pins', () => {
    expect(REPLAY_PACKAGES).toEqual(['numpy', 'scipy', 'scikit-learn', 'threadpoolctl', 'networkx']);
    expect(Object.keys(hello.versions)).toEqual([...REPLAY_PACKAGES]);
    for (const p of REPLAY_PACKAGES) expect(hello.versions[p], p).toBe(pinnedVersions(currentSettings().runtime)[p]);
  });
});
