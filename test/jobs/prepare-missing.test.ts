// Replay and audit prepare what is missing: with an empty prepared folder (a fresh clone, or after
// `rm -rf prepared`), `wwref replay --condition wine` acquires wine's raw file from the mirror,
// prepares it, checks both prepared files against the reference manifest and passes 16/16; `wwref
// audit` does the same against the source manifest. A prepared input that comes out different from
// the manifest is refused and not kept. Real workers, the committed references read only.
import { readReferenceManifest } from '../support/raw-references.ts';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { MANIFESTS_DIR, ROOT } from '../../pipelines/core/paths.ts';
import { UserError } from '../../pipelines/core/errors.ts';

import { prepareMissing } from '../../pipelines/sources/prepare.ts';
import { cliInProcess } from '../support/cli.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings } from '../support/workspace.ts';

const REFERENCES = join(ROOT, 'outputs', 'references');
const wine = readReferenceManifest(REFERENCES)!.conditions.wine!;
let ws: Workspace;
beforeAll(() => {
  ws = useTempWorkspace();
});
afterAll(() => ws.dispose());

const preparedHashes = () =>
  Object.fromEntries(Object.keys(wine.prepared_files).map((f) => [f, sha256Hex(readFileSync(join(ws.prepared, 'wine', f)))]));

describe('replay and audit prepare a missing input and verify it before use', () => {
  it('replay --condition wine with no prepared folder passes (the input is made and checked first)', async () => {
    expect(existsSync(ws.prepared)).toBe(false);
    const report = join(ws.root, 'replay.json');
    const outcome = await cliInProcess(['replay', '--condition', 'wine', '--references', REFERENCES, '--report', report], ws.root);
    expect(outcome.stderr).not.toMatch(/wwref:/);
    expect(outcome.code).toBe(0);
    expect(outcome.stdout).toContain('preparing 1 source(s) whose prepared input is missing: wine (checked against the manifest)');
    expect(outcome.stdout).toMatch(/wine +16\/16 passed/);
    expect(preparedHashes()).toEqual(wine.prepared_files);
    expect(JSON.parse(readFileSync(report, 'utf8')).all_passed).toBe(true);
  });

  it('audit prepares a missing input, keeping the source manifest it audits', async () => {
    const manifest = join(ws.manifests, 'wine.json');
    const before = readFileSync(manifest);
    rmSync(join(ws.prepared, 'wine'), { recursive: true });
    const outcome = await cliInProcess(['audit', '--source', 'wine'], ws.root);
    expect(outcome.code).toBe(0);
    expect(outcome.stdout).toContain('preparing 1 source(s) whose prepared input is missing: wine');
    expect(outcome.stdout).toMatch(/^wine +ok +ok +ok +ok /m);
    expect(readFileSync(manifest).equals(before)).toBe(true);
    expect(preparedHashes()).toEqual(wine.prepared_files);
  });

  it('a prepared input that differs from the manifest is refused and not kept', async () => {
    rmSync(join(ws.prepared, 'wine'), { recursive: true });
    const wrong = { ...wine.prepared_files, 'arrays.npz': '0'.repeat(64) };
    const error = await prepareMissing([{ source: 'wine', planFile: wine.plan_file, planSha256: wine.plan_sha256, files: wrong }], {
      settings: currentSettings(),
      log: () => {},
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserError);
    expect((error as Error).message).toMatch(
      /cannot prepare wine: the prepared input of wine made here differs from the one the manifest records \(arrays\.npz: [0-9a-f]{64}, expected 0{64}\); nothing was kept/,
    );
    expect(existsSync(join(ws.prepared, 'wine'))).toBe(false);
    // the committed source manifest was never the one written
    expect(existsSync(join(MANIFESTS_DIR, 'wine.json'))).toBe(true);
  });

  it('a plan changed since the manifest was written is refused, not prepared around', async () => {
    const error = await prepareMissing(
      [{ source: 'wine', planFile: wine.plan_file, planSha256: 'f'.repeat(64), files: wine.prepared_files }],
      { settings: currentSettings(), log: () => {} },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserError);
    expect((error as Error).message).toMatch(/plan sources\/wine\.plan\.json changed since the manifest was written/);
  });
});
