// Shared by the hardening tests: a guard that the committed folders of the repository are left exactly
// as they were (nothing created, changed or deleted outside the test's temporary root), victim files
// placed in the temporary root outside the folder under test, and the id of a process that has ended.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { sha256Hex } from '../../pipelines/core/hashing.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import type { ReferenceManifest } from '../../pipelines/references/manifest.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';

/** Committed folders a hardening test must never touch (the other generated folders are busy with other work). */
const GUARDED = ['manifests', 'sources', 'outputs/examples'];

/** Names, sizes and modification times of everything under `dir` (links not followed). */
export function listing(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true })
    .map(String)
    .sort()
    .map((name) => {
      const stats = lstatSync(join(dir, name));
      return `${name} ${stats.isDirectory() ? 'dir' : `${stats.size} ${stats.mtimeMs}`}`;
    });
}

/**
 * A temporary workspace for the file's tests, with the repository guard around it: `workspace()`
 * gives the workspace once the tests run; after them it is removed and the guard checked.
 */
export function useGuardedWorkspace(): () => Workspace {
  let ws: Workspace;
  let guard: ReturnType<typeof guardRepository>;
  beforeAll(() => {
    guard = guardRepository();
    ws = useTempWorkspace();
  });
  afterAll(() => {
    ws.dispose();
    guard.check();
  });
  return () => ws;
}

/** A reference manifest with the given condition entries and placeholder runtime fields (lock and namespace tests). */
export function placeholderManifest(conditions: ReferenceManifest['conditions']): ReferenceManifest {
  return {
    manifest_version: 1,
    generator: 'hardening test',
    code: { git_commit: null, git_dirty: null, workflows_sha256: sha256Hex('workflows') },
    python: '3.12',
    versions: {},
    threads: { environment: {}, threadpoolctl_limit: 1 },
    conditions,
  };
}

/** Snapshot of the guarded folders; `check()` asserts that they are unchanged. */
export function guardRepository(): { check(): void } {
  const before = GUARDED.map((d) => listing(join(ROOT, d)));
  return {
    check() {
      GUARDED.forEach((d, i) => {
        expect(listing(join(ROOT, d)), `${d}/ must be unchanged`).toEqual(before[i]);
      });
    },
  };
}

/** A file with known content; `intact()` asserts that it still exists with that content. */
export function victim(path: string, content = `victim ${path}\n`): { path: string; content: string; intact(): void } {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, content);
  return {
    path,
    content,
    intact() {
      expect(existsSync(path), `${path} must still exist`).toBe(true);
      expect(readFileSync(path, 'utf8')).toBe(content);
    },
  };
}

/** The id of a process that has already exited (for stale staging folders). */
export function deadPid(): number {
  const child = spawnSync('true');
  expect(child.status).toBe(0);
  return child.pid!;
}

/** Every file (not folder) under `dir`, relative, sorted; [] when `dir` does not exist. */
export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true })
    .map(String)
    .filter((name) => !lstatSync(join(dir, name)).isDirectory())
    .sort();
}
