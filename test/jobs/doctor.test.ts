// `wwref doctor` on this machine (one worker started, no record run): the identity lines, string
// hashing among them, and the verdict for the committed references (reproduced, as every test that
// compares committed hashes assumes), for references built under another runtime (outputs/current:
// the differing versions named) and for a folder without a reference manifest.
import { readReferenceManifest } from '../support/raw-references.ts';
import { execa } from 'execa';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';

import { doctor } from '../../pipelines/jobs/doctor.ts';
import { currentSettings } from '../support/workspace.ts';

describe('wwref doctor', () => {
  it('describes the runtime and reproduces the committed references', async () => {
    const { lines, reproduces } = await doctor(currentSettings({ references: join(ROOT, 'outputs', 'references') }));
    expect(lines[0]).toMatch(/^python\s+3\.12\.\d+ \(.+\), string hashing fixed \(PYTHONHASHSEED=0\)$/);
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^profile\\s+${currentSettings().profile.name}: `)));
    expect(lines).toContain('            effective state matches the profile');
    expect(reproduces).toBe(true);
    expect(lines.at(-1)).toBe(
      `reproduces outputs/references bit for bit: same numerical profile (${currentSettings().profile.name}) and pinned versions`,
    );
  }, 60_000);

  it('names the versions that differ from references built under another runtime', async () => {
    const current = readReferenceManifest(join(ROOT, 'outputs', 'current'))!;
    const { lines, reproduces } = await doctor(currentSettings({ references: join(ROOT, 'outputs', 'current') }));
    expect(reproduces).toBe(false);
    expect(lines.at(-1)).toMatch(/^cannot reproduce outputs\/current bit for bit: installed versions differ from the references' \(/);
    expect(lines.at(-1)).toContain(`numpy: expected ${current.versions.numpy}, installed`);
  }, 60_000);

  it('cannot reproduce a folder without a reference manifest, and says so', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'wwref-doctor-'));
    try {
      const { lines, reproduces } = await doctor(currentSettings({ references: empty }));
      expect(reproduces).toBe(false);
      expect(lines.at(-1)).toBe(`cannot reproduce ${empty} bit for bit: no reference manifest in ${empty}`);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('wwref doctor with an interpreter that never answers', () => {
  it('waits for one hello only (not a second, native one), then says so in one line, exit 2', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wwref-doctor-silent-'));
    try {
      const silent = join(dir, 'python');
      writeFileSync(silent, '#!/bin/sh\nexec sleep 600\n');
      chmodSync(silent, 0o755);
      const started = Date.now();
      const r = await execa('node', [join(ROOT, 'bin', 'wwref.mjs'), 'doctor'], {
        cwd: dir,
        env: { WWREF_PYTHON: silent, WWREF_HELLO_TIMEOUT_SECONDS: '10' },
        reject: false,
        timeout: 60_000,
      });
      const waited = (Date.now() - started) / 1000;
      expect(r.timedOut).toBe(false);
      // one hello waited out (10 s), not two: the second would take the wait past 20 s
      expect(waited).toBeGreaterThanOrEqual(10);
      expect(waited).toBeLessThan(19);
      expect([r.exitCode, String(r.stderr).trim().split('\n')]).toEqual([
        2,
        [
          expect.stringMatching(
            /^wwref: the Python runtime \S+python did not start a wwref worker: .*did not answer its hello within 10 s/,
          ),
        ],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
