// Output paths named by the user (--out, --report, --json, --html, --figures), named by their flag in
// messages: the one check of core/containment.ts (checkOutputPath, the rule that no output replaces
// part of the project), before any work. Every command writing a user-named output goes through it.
import { checkOutputPath, type OutputCheck } from '../core/containment.ts';
import type { Settings } from '../core/settings.ts';

/**
 * `inSources`: the output may be a plan or the plan schema under sources/; `ownFile`: a tracked file
 * this command wrote; `reads`: folders (or packs) the command reads, which its output may not be in.
 */
export function outputPath(
  settings: Settings,
  path: string,
  flag: string,
  kind: 'file' | 'folder' = 'file',
  options: Pick<OutputCheck, 'inSources' | 'ownFile'> & { reads?: readonly string[] } = {},
): string {
  const { reads, ...check } = options;
  return checkOutputPath(settings.paths, path, `--${flag}`, { kind, ...check, generated: reads });
}
