import { loadCatalog } from '../../pipelines/references/store.ts';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { acquireFile, rawCachePath } from '../../pipelines/sources/acquire.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import type { RawFile } from '../../pipelines/catalog/plan.ts';
import { currentSettings, useTempWorkspace, type Workspace } from '../support/workspace.ts';

const settings = currentSettings();
const co2 = loadCatalog(settings).source('co2').plan.raw_files[0]!;
const sharedRaw = settings.mirrors.find((d) => existsSync(join(d, co2.mirror_path)));

describe.skipIf(!sharedRaw)('acquisition (needs the raw mirror ../shared/raw)', () => {
  let ws: Workspace;
  let mirror: string;
  beforeEach(() => {
    ws = useTempWorkspace();
    mirror = join(ws.root, 'mirror');
  });
  afterEach(() => ws.dispose());

  it('copies a mirror file into the content-addressed cache, then serves it from the cache', async () => {
    const first = await acquireFile(co2, { settings: ws.settings, online: false });
    expect(first.origin).toBe('mirror');
    expect(first.path).toBe(rawCachePath(ws.settings, co2.sha256));
    const second = await acquireFile(co2, { settings: ws.settings, online: false });
    expect(second.origin).toBe('cache');
  });

  it('rejects a tampered mirror file and caches nothing', async () => {
    const bytes = readFileSync(join(sharedRaw!, co2.mirror_path));
    bytes[100] = bytes[100]! ^ 1;
    mkdirSync(join(mirror, 'elsewhere'), { recursive: true });
    writeFileSync(join(mirror, 'elsewhere', 'co2.csv'), bytes);
    const file: RawFile = { ...co2, mirror_path: 'elsewhere/co2.csv', package: undefined, upstream_url: undefined };
    const error = await acquireFile(file, { settings: ws.settings, mirrors: [mirror], online: false }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserError);
    expect((error as Error).message).toMatch(/sha256 mismatch for co2\.csv/);
    expect(
      existsSync(join(ws.cache, 'raw'))
        ? readdirSync(join(ws.cache, 'raw'), { recursive: true }).filter((f) => !String(f).endsWith('/')).length
        : 0,
    ).toBe(0);
  });

  it('says where it looked when a file is nowhere', async () => {
    const file: RawFile = { ...co2, mirror_path: 'nowhere/co2.csv', package: undefined, upstream_url: undefined };
    const error = (await acquireFile(file, { settings: ws.settings, mirrors: [mirror], online: false }).catch((e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(UserError);
    expect(error.message).toContain(join(mirror, 'nowhere/co2.csv'));
    expect(error.message).toContain('cache');
  });

  it('falls back to the file shipped inside the pinned statsmodels package', async () => {
    const file: RawFile = { ...co2, mirror_path: 'nowhere/co2.csv', upstream_url: undefined };
    const got = await acquireFile(file, { settings: ws.settings, mirrors: [mirror], online: false });
    expect(got.origin).toBe('package');
    expect(got.from).toMatch(/site-packages\/statsmodels\/datasets\/co2\/co2\.csv$/);
  });
});
