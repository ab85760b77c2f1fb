// The journal of a rebuild: each finished record of a condition is appended as one JSON line with the
// identity of what produced it (plan, prepared input, code, versions, numerics). An interrupted run
// resumes from the ok records whose identity still holds (failed ones run again); the journal is
// dropped once the table is written.
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { digest } from '../core/hashing.ts';
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
        const entry = JSON.parse(line) as { identity: string; record: unknown };
        const record = ReferenceRecord.safeParse(entry.record);
        if (entry.identity === this.identity && record.success && record.data.status === 'ok') records.set(record.data.mask, record.data);
      } catch {
        // a torn last line of an interrupted run: that record is simply run again
      }
    }
    return records;
  }

  append(record: ReferenceRecord): void {
    mkdirSync(dirname(this.path), { recursive: true });
    appendFileSync(this.path, `${JSON.stringify({ identity: this.identity, record })}\n`);
  }

  drop(): void {
    rmSync(this.path, { force: true });
  }
}
