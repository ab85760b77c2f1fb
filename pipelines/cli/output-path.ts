// Output paths named by the user (--out, --report, --json, --html, --figures), named by their flag in
// messages: the one check of core/containment.ts (checkOutputPath), before any work.
import { checkOutputPath } from '../core/containment.ts';
import type { Settings } from '../core/settings.ts';

/** `inSources`: the output may be a plan or the plan schema under sources/. */
export function outputPath(settings: Settings, path: string, flag: string, kind: 'file' | 'folder' = 'file', inSources = false): string {
  return checkOutputPath(settings.paths, path, `--${flag}`, { kind, inSources });
}
