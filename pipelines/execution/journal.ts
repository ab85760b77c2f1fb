// The journal of a rebuild: each finished record of a condition is appended as one JSON line with the
// identity of what produced it (plan, prepared input, code, versions, numerics). An interrupted run
// resumes from the ok records whose identity still holds (failed ones run again); the journal is
// dropped once the table is written.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { appendNoFollow } from '../core/fsutil.ts';
import { digest, type JsonValue } from '../core/hashing.ts';
import { cacheDir } from '../core/paths.ts';
import { ReferenceRecord } from './records.ts';

export interface JournalIdentity {
  condition: string;
  plan: string;
  prepared: Record<string, string>;
  code: string;
  versions: Record<string, string>;
  numerics: string;
}

export class Journal {
  readonly path: string;
  readonly identity: string;

  constructor(
    readonly condition: string,
    identity: JournalIdentity,
  ) {
    this.path = join(cacheDir(), 'journal', `${condition}.jsonl`);
    this.identity = digest({ ...identity });
  }

  /** The ok records of an earlier run with the same identity, by mask. */
  resume(): Map<string, ReferenceRecord> {
    const records = new Map<string, ReferenceRecord>();
    if (!existsSync(this.path)) return records;
    for (const line of readFileSync(this.path, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        const entry = JSON.parse(line) as { identity: string; sha256?: string; record: unknown };
        const record = ReferenceRecord.safeParse(entry.record);
        // A record edited after it was written no longer matches its checksum: it is run again.
        const intact = entry.sha256 === digest(entry.record as JsonValue);
        if (entry.identity === this.identity && intact && record.success && record.data.status === 'ok') records.set(record.data.mask, record.data);
      } catch {
        // a torn last line of an interrupted run: that record is simply run again
      }
    }
    return records;
  }

  append(record: ReferenceRecord): void {
    appendNoFollow(this.path, `${JSON.stringify({ identity: this.identity, sha256: digest(record as unknown as JsonValue), record })}\n`);
  }

  drop(): void {
    rmSync(this.path, { force: true });
  }
}
