// Declared equivalences (inactive options, paired six-option subcubes) checked against prediction
// hashes, and the equivalence classes actually observed.
import { inactivePairs, pairedSubcubeMask } from '../catalog/masks.ts';
import type { Equivalence } from '../catalog/plan.ts';
import type { ReferenceRecord } from '../execution/records.ts';

/** What the checks read of a record: its mask, prediction hash and utility. */
export type HashedRecord = Pick<ReferenceRecord, 'mask' | 'prediction_sha256' | 'utility'>;

export interface Violation {
  condition: string;
  declaration: string;
  masks: [string, string];
  detail: string;
}

function describe(eq: Equivalence): string {
  const when = Object.entries(eq.inactive_when)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
  return `option ${eq.option} inactive when ${when}`;
}

/** Every pair of masks that a declaration says must give the same prediction, and whether it does. */
export function checkDeclared(condition: string, equivalences: Equivalence[], records: HashedRecord[]): Violation[] {
  const byMask = new Map(records.map((r) => [r.mask, r]));
  const dimensions = records[0]?.mask.length ?? 0;
  const violations: Violation[] = [];
  for (const eq of equivalences) {
    for (const [off, on] of inactivePairs(eq, dimensions)) {
      const record = byMask.get(off);
      const twin = byMask.get(on);
      if (!record || !twin) continue;
      if (record.prediction_sha256 !== twin.prediction_sha256 || record.utility !== twin.utility) {
        violations.push({
          condition,
          declaration: describe(eq),
          masks: [off, on],
          detail: `hashes ${record.prediction_sha256?.slice(0, 12)} vs ${twin.prediction_sha256?.slice(0, 12)}`,
        });
      }
    }
  }
  return violations;
}

/** The E=F=0 subcube of a paired six-option condition must repeat the four-option records. */
export function checkPaired(condition: string, paired: string, six: HashedRecord[], four: HashedRecord[]): Violation[] {
  const sixByMask = new Map(six.map((r) => [r.mask, r]));
  const violations: Violation[] = [];
  for (const record of four) {
    const twin = sixByMask.get(pairedSubcubeMask(record.mask));
    if (!twin) continue;
    if (twin.prediction_sha256 !== record.prediction_sha256 || twin.utility !== record.utility) {
      violations.push({
        condition,
        declaration: `E=F=0 subcube repeats ${paired}`,
        masks: [pairedSubcubeMask(record.mask), record.mask],
        detail:
          `hashes ${twin.prediction_sha256?.slice(0, 12)} vs ${record.prediction_sha256?.slice(0, 12)}, ` +
          `utilities ${twin.utility} vs ${record.utility}`,
      });
    }
  }
  return violations;
}

/** Groups of two or more masks with identical prediction hashes, in ascending mask order. */
export function equivalenceClasses(records: HashedRecord[]): string[][] {
  const groups = new Map<string, string[]>();
  for (const record of records) {
    if (!record.prediction_sha256) continue;
    const group = groups.get(record.prediction_sha256) ?? [];
    group.push(record.mask);
    groups.set(record.prediction_sha256, group);
  }
  return [...groups.values()]
    .filter((g) => g.length > 1)
    .map((g) => g.sort())
    .sort((a, b) => a[0]!.localeCompare(b[0]!));
}
