// Benchmark of the execute stage: records/s with 1 and 2 workers, total wall time against the sum of
// per-record native seconds (orchestration overhead), the slowest conditions, and the cost of the
// portable numerical profile (the same records under `native` and under the default profile).
//   npx tsx scripts/bench.ts [--condition C ...] [--workers 1,2] [--no-profile-cost]
// Default conditions: one published condition of each family (retrieval, the catalog's dominant cost,
// included). Prepared inputs are taken from prepared/ (run `npx wwref prepare` first);
// tables and journals go to a temporary folder, so outputs/references is never touched.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Catalog } from '../pipelines/catalog/catalog.ts';
import { DEFAULT_PROFILE, profileByName, type NumericalProfile } from '../pipelines/execution/numerics.ts';
import { rebuild, type RebuildSummary } from '../pipelines/jobs/rebuild.ts';

const DEFAULT = ['scifact', 'wine', 'spambase', 'concrete', 'co2', 'astronaut', 'mitdb_100__d6', 'graph_lesmis__d6'];

function arg(name: string): string[] {
  const values: string[] = [];
  process.argv.forEach((a, i) => {
    if (a === `--${name}`) for (const v of process.argv.slice(i + 1)) { if (v.startsWith('--')) break; values.push(v); }
  });
  return values;
}

const conditions = arg('condition').length ? arg('condition') : DEFAULT;
const workerCounts = (arg('workers')[0] ?? '1,2').split(',').map(Number);
const catalog = Catalog.load();

async function run(workers: number, profile?: NumericalProfile): Promise<RebuildSummary> {
  const dir = mkdtempSync(join(tmpdir(), 'wwref-bench-'));
  process.env.WWREF_REFERENCES_DIR = join(dir, 'references');
  process.env.WWREF_CACHE_DIR = join(dir, 'cache');
  try {
    return await rebuild(catalog, { conditions, workers, profile, quiet: true, fresh: true, log: () => {} });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`conditions: ${conditions.join(', ')}`);
const results = new Map<number, RebuildSummary>();
for (const workers of workerCounts) {
  const s = await run(workers);
  results.set(workers, s);
  const overhead = s.wallSeconds / s.nativeSeconds;
  console.log(
    `workers ${workers}: ${s.records} records in ${s.wallSeconds.toFixed(1)} s wall = ${(s.records / s.wallSeconds).toFixed(2)} records/s; ` +
      `native sum ${s.nativeSeconds.toFixed(1)} s; wall/native ${overhead.toFixed(3)}${workers > 1 ? ` (ideal ${(1 / workers).toFixed(2)})` : ''}`,
  );
}
const one = results.get(1);
const two = results.get(2);
if (one && two) console.log(`speed-up with 2 workers: ${(one.wallSeconds / two.wallSeconds).toFixed(2)}x`);
const last = [...results.values()].at(-1)!;
console.log('slowest conditions (native seconds):');
for (const c of [...last.conditions].sort((a, b) => b.nativeSeconds - a.nativeSeconds).slice(0, 5)) {
  console.log(`  ${c.condition.padEnd(22)} ${c.nativeSeconds.toFixed(2)} s over ${c.records} records`);
}

if (!process.argv.includes('--no-profile-cost')) {
  // One worker each, back to back: the computation time of the same records under both profiles.
  const native = await run(1, profileByName('native'));
  const portable = await run(1, profileByName(DEFAULT_PROFILE));
  console.log(`numerical profile cost (1 worker, native seconds of the same ${portable.records} records):`);
  console.log(
    `  native ${native.nativeSeconds.toFixed(2)} s, ${DEFAULT_PROFILE} ${portable.nativeSeconds.toFixed(2)} s: ratio ${(portable.nativeSeconds / native.nativeSeconds).toFixed(3)} ` +
      `(wall ${native.wallSeconds.toFixed(1)} s vs ${portable.wallSeconds.toFixed(1)} s)`,
  );
  const nativeBy = new Map(native.conditions.map((c) => [c.condition, c.nativeSeconds]));
  for (const c of portable.conditions) {
    const n = nativeBy.get(c.condition)!;
    console.log(`  ${c.condition.padEnd(22)} ${n.toFixed(3)} s -> ${c.nativeSeconds.toFixed(3)} s  (${(c.nativeSeconds / n).toFixed(2)}x)`);
  }
}
