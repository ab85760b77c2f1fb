// Hardening of `wwref audit` (pipelines/jobs/audit.ts, `reprepared`): every source, added ones
// included, is prepared afresh from its raw files and plan and compared byte for byte with
// prepared/<source>/ and the manifest's prepared_files.
// - an added source (the tiny camera plan, through add-source) audits ok, re-prepared, and the audit
//   changes nothing in prepared/, manifests/ or the raw cache, and leaves no folder in <cache>/audit;
// - its arrays.npz rewritten with an array altered and re-sealed into its source manifest
//   (prepared_files and content_sha256 recomputed) passes every other check, but fails `reprepared`,
//   naming arrays.npz and both hashes;
// - a raw file missing from the cache is acquired (here from its package) before re-preparing, and
//   one that cannot be acquired is reported 'missing' with the command to run;
// - audit folders of killed audits are removed without following links.
// Real workers, real files; every file under a temporary root, the committed folders checked unchanged.
import { execa } from 'execa';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { addSource } from '../../pipelines/jobs/add-source.ts';
import { reprepareSources } from '../../pipelines/jobs/audit.ts';
import { loadPlanFile } from '../../pipelines/catalog/catalog.ts';
import { rawCachePath } from '../../pipelines/sources/acquire.ts';
import { digest, sha256Hex } from '../../pipelines/core/hashing.ts';

import { cliInProcess } from '../support/cli.ts';
import { tinyCameraPlan } from '../support/fixtures.ts';
import { deadPid, filesUnder, useGuardedWorkspace, victim } from '../sources/hardening-support.ts';
import { currentSettings } from '../support/workspace.ts';

const SOURCE = 'tiny_audit';
const workspace = useGuardedWorkspace();

let planFile: string;
/** The prepared files, the source manifest and the raw cache as add-source left them. */
let snapshot: Map<string, Buffer>;

const preparedFile = (name: string) => join(workspace().prepared, SOURCE, name);
const manifestFile = () => join(workspace().manifests, `${SOURCE}.json`);

function restore(): void {
  for (const [file, bytes] of snapshot) {
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, bytes);
  }
}

/** The files the audit must leave as they are, with their bytes. */
function guarded(): Map<string, Buffer> {
  const ws = workspace();
  const files = [
    ...filesUnder(join(ws.prepared, SOURCE)).map((f) => join(ws.prepared, SOURCE, f)),
    manifestFile(),
    ...filesUnder(join(ws.cache, 'raw')).map((f) => join(ws.cache, 'raw', f)),
  ];
  return new Map(files.map((f) => [f, readFileSync(f)]));
}

/** `wwref audit --source tiny_audit` in this process; the row of the source split into its columns. */
async function audit(...extra: string[]) {
  const ws = workspace();
  const outcome = await cliInProcess(['audit', '--source', SOURCE, '--references', ws.references, '--workers', '1', ...extra], ws.root);
  const lines = outcome.stdout.split('\n');
  const header =
    lines
      .find((l) => l.startsWith('source '))
      ?.trim()
      .split(/\s+/) ?? [];
  const row =
    lines
      .find((l) => l.startsWith(`${SOURCE} `))
      ?.trim()
      .split(/\s+/) ?? [];
  const column = Object.fromEntries(header.map((h, i) => [h, row[i]]));
  return { ...outcome, column, problems: lines.filter((l) => l.startsWith('    ! ')) };
}

/** Rewrites arrays.npz with its first array altered (same keys, same order), as a tamperer would. */
async function alterArrays(file: string): Promise<void> {
  const script =
    'import sys, numpy as np\n' +
    'path = sys.argv[1]\n' +
    'with np.load(path, allow_pickle=False) as z:\n' +
    '    arrays = {k: z[k].copy() for k in z.files}\n' +
    'first = next(iter(arrays))\n' +
    'arrays[first] = np.zeros_like(arrays[first]) if arrays[first].any() else np.ones_like(arrays[first])\n' +
    'np.savez_compressed(path, **arrays)\n' +
    'print(first)\n';
  const child = await execa(currentSettings().python.executable, ['-c', script, file]);
  expect(String(child.stdout).trim()).not.toBe('');
}

/** Re-seals the source manifest over the prepared files as they are now: prepared_files and content_sha256 recomputed. */
function reseal(): void {
  const manifest = JSON.parse(readFileSync(manifestFile(), 'utf8'));
  for (const name of Object.keys(manifest.prepared_files)) manifest.prepared_files[name] = sha256Hex(readFileSync(preparedFile(name)));
  const { content_sha256: _old, ...body } = manifest;
  writeFileSync(manifestFile(), `${JSON.stringify({ ...body, content_sha256: digest(body) }, null, 2)}\n`);
}

beforeAll(async () => {
  const ws = workspace();
  mkdirSync(join(ws.root, 'plans'), { recursive: true });
  planFile = join(ws.root, 'plans', `${SOURCE}.plan.json`);
  writeFileSync(planFile, `${JSON.stringify(tinyCameraPlan(SOURCE), null, 2)}\n`);
  const result = await addSource(planFile, { settings: currentSettings(), workers: 2, quiet: true, log: () => {} });
  expect(result.problems).toEqual([]);
  expect(result.written).toBe(true);
  snapshot = guarded();
});

describe('audit re-prepares an added source from its raw files and plan', () => {
  it('an untampered added source audits ok, re-prepared; nothing in prepared/, manifests/ or the raw cache changes, no audit folder is left', async () => {
    restore();
    // the leftovers of two killed audits: a folder holding a link out, and a link itself
    const ws = workspace();
    const outside = victim(join(ws.root, 'outside-audit', 'keep.txt'));
    const auditDir = join(ws.cache, 'audit');
    const [dead1, dead2] = [deadPid(), deadPid()];
    mkdirSync(join(auditDir, `${SOURCE}.audit-${dead1}`), { recursive: true });
    symlinkSync(join(ws.root, 'outside-audit'), join(auditDir, `${SOURCE}.audit-${dead1}`, 'out'));
    symlinkSync(join(ws.root, 'outside-audit'), join(auditDir, `nile.audit-${dead2}`));

    const outcome = await audit();
    expect(outcome.stderr).not.toMatch(/wwref:/);
    expect(outcome.problems).toEqual([]);
    expect(outcome.code).toBe(0);
    expect(outcome.column).toMatchObject({ manifest: 'ok', plan: 'ok', raw: 'ok', prepared: 'ok', reprepared: 'ok' });
    expect(outcome.stdout).toContain('re-preparing 1 source(s) from their raw files and plans (1 worker(s))');
    expect(outcome.stdout).toContain(`re-prepared ${SOURCE} (1/1): identical to prepared/ and the manifest`);
    expect(outcome.stdout).toContain('1/1 sources pass the audit');

    const after = guarded();
    expect([...after.keys()].sort()).toEqual([...snapshot.keys()].sort());
    for (const [file, bytes] of snapshot) expect(after.get(file)!.equals(bytes), file).toBe(true);
    expect(readdirSync(auditDir)).toEqual([]);
    outside.intact();
  });

  it('arrays.npz altered and re-sealed into its manifest passes every other check, but fails `reprepared` naming arrays.npz and both hashes', async () => {
    restore();
    const original = sha256Hex(readFileSync(preparedFile('arrays.npz')));
    await alterArrays(preparedFile('arrays.npz'));
    const tampered = sha256Hex(readFileSync(preparedFile('arrays.npz')));
    expect(tampered).not.toBe(original);
    reseal();
    const sealed = { prepared: readFileSync(preparedFile('arrays.npz')), manifest: readFileSync(manifestFile()) };

    const outcome = await audit();
    expect(outcome.code).toBe(1);
    // what the issue saw: the re-sealed manifest is consistent with itself, its plan, the raw cache and the prepared files
    expect(outcome.column).toMatchObject({ manifest: 'ok', plan: 'ok', raw: 'ok', prepared: 'ok', reprepared: 'FAIL' });
    expect(outcome.problems).toHaveLength(1);
    expect(outcome.problems[0]).toContain(`arrays.npz re-prepared from the raw files and plan has sha256 ${original}`);
    expect(outcome.problems[0]).toContain(`${preparedFile('arrays.npz')} has ${tampered}`);
    expect(outcome.problems[0]).toContain(`${manifestFile()} records ${tampered}`);
    expect(outcome.problems.join('\n')).not.toContain('metadata.json.gz');
    expect(outcome.stdout).toContain(`re-prepared ${SOURCE} (1/1): FAIL: 1 problem(s)`);
    expect(outcome.stdout).toContain('0/1 sources pass the audit');
    // the audit reports; it repairs nothing
    expect(readFileSync(preparedFile('arrays.npz')).equals(sealed.prepared)).toBe(true);
    expect(readFileSync(manifestFile()).equals(sealed.manifest)).toBe(true);
    expect(readdirSync(join(workspace().cache, 'audit'))).toEqual([]);
  });

  it('a FIFO in prepared/ and a raw cache entry linked to /dev/zero: reported, never opened or read (audit ends)', async () => {
    restore();
    const raw = JSON.parse(readFileSync(manifestFile(), 'utf8')).raw_files as { name: string; sha256: string }[];
    const cached = rawCachePath(currentSettings(), raw[0]!.sha256);
    rmSync(cached);
    symlinkSync('/dev/zero', cached);
    const prepared = preparedFile('metadata.json.gz');
    rmSync(prepared);
    await execa('mkfifo', [prepared]);
    try {
      const outcome = await audit();
      expect(outcome.code).toBe(1);
      expect(outcome.column).toMatchObject({ raw: 'FAIL', prepared: 'FAIL' });
      expect(outcome.stdout).toMatch(/raw cache file \S+ is a symbolic link, not a regular file; refused/);
      expect(outcome.stdout).toMatch(/prepared file \S+metadata\.json\.gz is a FIFO, not a regular file; refused/);
    } finally {
      rmSync(cached, { force: true });
      rmSync(prepared, { force: true });
      restore();
    }
  });

  it('a raw file missing from the cache is acquired (from its package) and the source re-prepared', async () => {
    restore();
    const raw = JSON.parse(readFileSync(manifestFile(), 'utf8')).raw_files as { name: string; sha256: string }[];
    for (const file of raw) rmSync(rawCachePath(currentSettings(), file.sha256));
    const outcome = await audit('--verbose');
    expect(outcome.problems).toEqual([]);
    expect(outcome.code).toBe(0);
    expect(outcome.column).toMatchObject({ raw: 'ok', reprepared: 'ok' });
    for (const file of raw) {
      expect(outcome.stdout).toMatch(new RegExp(`- raw file ${file.name} was not in the cache: acquired from package `));
      expect(sha256Hex(readFileSync(rawCachePath(currentSettings(), file.sha256)))).toBe(file.sha256);
    }
    expect(lstatSync(join(workspace().cache, 'audit')).isDirectory()).toBe(true);
    expect(existsSync(join(workspace().cache, 'audit', `${SOURCE}.audit-${process.pid}`))).toBe(false);
  });

  it("a raw file that can be acquired from nowhere is 'missing', with the command to run, and nothing is re-prepared", async () => {
    restore();
    // the same plan (its recorded hash unchanged), its raw file reachable from no mirror and no package
    const loaded = structuredClone(loadPlanFile(planFile));
    const file = loaded.plan.raw_files[0]!;
    delete file.package;
    file.mirror_path = 'nowhere/camera.png';
    rmSync(rawCachePath(currentSettings(), file.sha256));
    const lines: string[] = [];
    const outcome = (
      await reprepareSources([loaded], { settings: currentSettings(), mirrors: [], online: false, log: (line) => lines.push(line) })
    ).get(SOURCE)!;
    expect(outcome.state).toBe('missing');
    expect(outcome.problems).toHaveLength(1);
    expect(outcome.problems[0]).toMatch(
      new RegExp(
        `not re-prepared, its raw files cannot be acquired: raw file ${file.name} \\(sha256 ${file.sha256}\\) could not be acquired`,
      ),
    );
    expect(outcome.problems[0]).toContain(`run 'wwref acquire --source ${SOURCE}'`);
    expect(lines).toEqual([
      expect.stringContaining('re-preparing 1 source(s)'),
      expect.stringMatching(new RegExp(`^re-prepared ${SOURCE} \\(1/1\\): missing: 1 problem\\(s\\) \\(\\d+\\.\\d s\\)$`)),
    ]);
    expect(existsSync(rawCachePath(currentSettings(), file.sha256))).toBe(false);
    expect(readdirSync(join(workspace().cache, 'audit'))).toEqual([]);
  });
});
