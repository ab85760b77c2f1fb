// Prepared inputs on this machine: a request names an input by source and content hashes; it is
// found as <root>/<source>/ in the input roots (prepared/ by default; a pack's inputs/ for a pack
// replay) and its files are verified against those hashes before its first use by an executor.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { checkFileHashes } from '../core/hashing.ts';
import type { PreparedInput } from './executor.ts';
import type { InputFiles } from './python-worker.ts';

export class LocalInputs {
  private readonly verified = new Map<string, string>();
  private readonly roots: string[];

  /** `roots` in the order they are searched; the first is also where a missing input is reported. */
  constructor(roots: readonly string[]) {
    this.roots = [...roots];
  }

  /** The local folder of `input` and its hashes, once its files match them (UserError otherwise). */
  resolve(input: PreparedInput): InputFiles {
    const key = JSON.stringify([input.source, Object.entries(input.files).sort()]);
    let folder = this.verified.get(key);
    if (!folder) {
      folder = join(this.roots.find((root) => existsSync(join(root, input.source))) ?? this.roots[0]!, input.source);
      checkFileHashes(folder, input.files, 'prepared input', `run 'wwref prepare --source ${input.source}'`);
      this.verified.set(key, folder);
    }
    return { folder, files: input.files };
  }
}
