// Benchmarks of the execute stage. Each section prints figures measured in this one run:
//   overhead    per-record orchestration overhead, (wall × workers − native seconds) / records, of a
//               rebuild and a cold replay with one worker, on cheap conditions (384 records); then a replay
//               traced on both sides: where its overhead goes, each part's milliseconds and share
//               (--against DIR: the same trace of another checkout too, --rounds N times, alternating)
//   verify      the orchestrator's exact sums: fsum against Shewchuk's partials on an image's squared
//               errors and on a million values, and pixelRmse of an image (milliseconds a call)
//   catalog     the whole catalog: replay with 1 and 2 workers (wall against replayed native
//               seconds, and the 2-worker wall against the 1-worker wall), rebuild with 1 worker
//   throughput  records/s with 1 and 2 workers on one condition of each family, slowest conditions
//   profile     cost of the portable numerical profile: the same records under `native` and the default,
//               and of its libm pin: the default profile without and with it
//   dask        the same records on the local pool, on a running local Dask cluster (`--executor dask`)
//               and on one started by the job (`dask-local`), 1 and 2 workers, in alternating rounds
//               (wall ratios per round and over all rounds), and the Dask path's
//               per-record dispatch overhead from 2,080 small records (nile's 16 masks, 130 times)
//   controls    the numerical controls' published grid (4,206 records: purchases, estimators, grading,
//               records and summaries) with 1 and 2 workers: wall seconds and records per second
//   sandbox     the calculation sandbox (pipelines/evaluation/sandbox/): start-up and a trivial call, and a
//               22-observation pair-effect ridge fit (wwref_helpers, 6 options) in it; medians of --rounds runs;
//               then through `wwref serve` with the SDK's client: the observe and calculate round trips
//   episode     milliseconds per episode action (status, a refused observe) on a fresh receipt, on one
//               filled with notes up to its cap, and past the cap (notes only counted)
//   cohort      `wwref cohort run` of the example agent (examples/agents/pair_ridge.py, started by its environment's Python) on the 22 four-option
//               conditions at B = 4 and 8 (44 episodes), --parallel 2, as a user runs it: wall seconds,
//               episodes per minute, the agents' share of the time and wwref's per-episode overhead, the
//               agent's own start (Python with the MCP SDK and NumPy imported), and how many records
//               equal the design_degree2 controls the same run computed
//   startup     how long a `wwref` command takes to start and finish, as a user runs it (`node bin/wwref.mjs`):
//               --help, --version, list, task, episode status and grade of one table, each against
//               `node -e 0`; median wall and CPU seconds of --runs runs (default 7) and the peak RSS.
//               --bin FILE times another checkout's entry point; several (--bin A B) are timed in the same
//               rounds, each ratio to the same `node -e 0` (a before/after on a shared machine)
//   ab          before and after in one run: cold 1-worker replays of the overhead section's records (or
//               --condition C ..., or --condition all: the whole catalog) by this checkout and by --against DIR,
//               alternating for --rounds N (default 5); each run's wall from the call, native, overhead and ratio
//   npx tsx scripts/bench.ts [--section overhead,verify,throughput,profile,dask,sandbox,catalog,controls,episode,cohort,startup,ab]
//                            [--condition C ...] [--workers 1,2] [--rounds N (dask, default 3; sandbox, default 5)]
//                            [--runs N --bin FILE ... (startup)]
// Default sections: overhead, throughput, profile, dask, sandbox (catalog takes ~10 min on 2 cores; ask for
// it, and for controls, episode, cohort and startup).
// Prepared inputs come from prepared/ (run `npx wwref prepare` first); rebuilds write to a temporary
// folder and replays read outputs/references, which is never written.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadCatalog } from '../pipelines/references/store.ts';
import { loadSettings } from '../pipelines/core/settings.ts';
import { ROOT } from '../pipelines/core/paths.ts';
import { allMasks } from '../pipelines/catalog/masks.ts';
import { DEFAULT_PROFILE, profileByName, type NumericalProfile } from '../pipelines/core/profiles.ts';
import { startLocalCluster } from '../pipelines/execution/dask/cluster.ts';
import { DaskExecutor } from '../pipelines/execution/dask/dask-executor.ts';
import type { ExecutorChoice } from '../pipelines/execution/executors.ts';
import { rebuild, type RebuildSummary } from '../pipelines/jobs/rebuild.ts';
import { readManifest } from '../pipelines/sources/prepare.ts';
import { replay, type ReplayReport } from '../pipelines/jobs/replay.ts';
import { partialsSum } from '../pipelines/execution/verification/exact-sum.ts';
import { fsum, pixelRmse } from '../pipelines/execution/verification/metrics.ts';
import { overheadProfile } from './bench-overhead.ts';
import { runPython } from '../pipelines/execution/launcher.ts';
import { runControls } from '../pipelines/evaluation/controls/job.ts';
import { calculationEngine } from '../pipelines/evaluation/calculations.ts';
import { runCalculation } from '../pipelines/evaluation/sandbox/calculation.ts';
import { sandboxAvailable } from '../pipelines/evaluation/sandbox/isolation.ts';

/** Nanoseconds per element of NumPy's float64 log1p and expm1 (the best of 7 passes over 2 million inputs). */
const LIBM_CALL_SCRIPT = `
import json, time, numpy as np
x = np.random.default_rng(1).uniform(-0.9, 3.0, 2_000_000)
def best(f):
    times = []
    for _ in range(7):
        t = time.perf_counter(); f(x); times.append(time.perf_counter() - t)
    return min(times) / x.size * 1e9
print(json.dumps({"log1p": best(np.log1p), "expm1": best(np.expm1)}))
`;

const THROUGHPUT = ['scifact', 'wine', 'spambase', 'concrete', 'co2', 'astronaut', 'mitdb_100__d6', 'graph_lesmis__d6'];
/** Six cheap 64-mask conditions of six families: the records where overhead shows. */
const CHEAP = ['wine__d6', 'spambase__d6', 'graph_lesmis__d6', 'mitdb_100__d6', 'co2__d6', 'astronaut__d6'];

function arg(name: string): string[] {
  const values: string[] = [];
  process.argv.forEach((a, i) => {
    if (a === `--${name}`)
      for (const v of process.argv.slice(i + 1)) {
        if (v.startsWith('--')) break;
        values.push(v);
      }
  });
  return values;
}

const sections = new Set((arg('section')[0] ?? 'overhead,throughput,profile,dask,sandbox').split(','));
const workerCounts = (arg('workers')[0] ?? '1,2').split(',').map(Number);
// the settings of this shell; each rebuild writes into a temporary folder of its own
const settings = loadSettings({}, process.env);
const catalog = loadCatalog(settings);

async function rebuildInTemp(
  conditions: string[] | undefined,
  workers: number,
  profile?: NumericalProfile,
  executor?: ExecutorChoice,
): Promise<RebuildSummary> {
  const dir = mkdtempSync(join(tmpdir(), 'wwref-bench-'));
  const temporary = { ...settings, paths: { ...settings.paths, references: join(dir, 'references'), cache: join(dir, 'cache') } };
  try {
    return await rebuild(catalog, { settings: temporary, conditions, workers, profile, executor, quiet: true, fresh: true, log: () => {} });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** User + system CPU seconds a process has used so far (Linux /proc). */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

/** Orchestration milliseconds per record: the wall time all workers spent beyond their computation. */
function overheadMs(wall: number, workers: number, native: number, records: number): string {
  return (((wall * workers - native) / records) * 1000).toFixed(2);
}

function describeRebuild(label: string, s: RebuildSummary): void {
  console.log(
    `  ${label}: ${s.records} records, wall ${s.wallSeconds.toFixed(2)} s, native ${s.nativeSeconds.toFixed(2)} s, ` +
      `wall/native ${(s.wallSeconds / s.nativeSeconds).toFixed(3)}, overhead ${overheadMs(s.wallSeconds, s.workers, s.nativeSeconds, s.records)} ms/record`,
  );
}

function describeReplay(label: string, r: ReplayReport): void {
  const afterStart = r.wall_seconds - r.startup_seconds;
  console.log(
    `  ${label}: ${r.passed}/${r.total} passed, wall ${r.wall_seconds.toFixed(2)} s, replayed native ${r.replayed_native_seconds.toFixed(2)} s, ` +
      `wall/native ${(r.wall_seconds / r.replayed_native_seconds).toFixed(3)}, overhead ${overheadMs(r.wall_seconds, r.workers, r.replayed_native_seconds, r.total)} ms/record; ` +
      `after the start-up (${r.startup_seconds.toFixed(2)} s: tables checked, first worker ready; where the benchmark's replay starts its clock) ` +
      `wall/native ${(afterStart / r.replayed_native_seconds).toFixed(4)}, overhead ${overheadMs(afterStart, r.workers, r.replayed_native_seconds, r.total)} ms/record`,
  );
}

if (sections.has('overhead')) {
  const conditions = arg('condition').length ? arg('condition') : CHEAP;
  console.log(`per-record overhead, 1 worker, ${conditions.join(', ')}:`);
  describeRebuild('rebuild', await rebuildInTemp(conditions, 1));
  describeReplay('replay ', await replay({ settings, conditions, workers: 1, quiet: true }));
  // --against DIR: the same trace of another checkout (e.g. the previous commit's worktree), alternating
  const traced: [string, string][] = arg('against').length
    ? [
        ['after (this checkout)', ROOT],
        [`before (${arg('against')[0]})`, arg('against')[0]!],
      ]
    : [['this checkout', ROOT]];
  for (let round = 0; round < Number(arg('rounds')[0] ?? 1); round++)
    for (const [label, root] of round % 2 ? [...traced].reverse() : traced) {
      console.log(`  where the replay's overhead goes, ${label} (load average ${loadavg()[0]!.toFixed(2)} before):`);
      await overheadProfile(conditions, root);
    }
}

if (sections.has('verify')) {
  // The orchestrator's exact sums (verification/exact-sum.ts): fsum's fixed-point path against
  // Shewchuk's partials (CPython's algorithm, what fsum was before), on an image's squared errors and
  // on a million values across every exponent, and pixelRmse of an image; best of 5 passes of 20.
  const best = (f: () => unknown): number => {
    let fastest = Infinity;
    for (let pass = 0; pass < 5; pass++) {
      const start = performance.now();
      for (let i = 0; i < 20; i++) f();
      fastest = Math.min(fastest, (performance.now() - start) / 20);
    }
    return fastest;
  };
  const clean = Float64Array.from({ length: 65_536 }, () => Math.random());
  const restored = clean.map((x) => x + (Math.random() - 0.5) * 0.1);
  const squared = clean.map((x, i) => (x - restored[i]!) ** 2);
  const spread = Float64Array.from({ length: 1_000_000 }, () => (Math.random() - 0.5) * 2 ** Math.floor(Math.random() * 400 - 200));
  console.log('exact sums of the verification, milliseconds a call (best of 5 passes):');
  for (const [label, values] of [
    ["an image's 65,536 squared errors", squared],
    ['1,000,000 values over 400 binary orders', spread],
  ] as const) {
    const [fast, partials] = [best(() => fsum(values)), best(() => partialsSum(values))];
    const same = Object.is(fsum(values), partialsSum(values));
    console.log(
      `  ${label.padEnd(42)} fsum ${fast.toFixed(3)} ms, partials ${partials.toFixed(3)} ms: ${(partials / fast).toFixed(2)}x; same bits: ${same}`,
    );
  }
  console.log(`  pixelRmse of a 256 x 256 image: ${best(() => pixelRmse(clean, restored)).toFixed(3)} ms`);
}

if (sections.has('ab')) {
  // Before and after in one run: cold one-worker replays of the same records by this checkout and by
  // --against DIR (another worktree, e.g. of the previous commit), alternating (AB, BA, AB, ...) so that
  // a busy spell of a shared machine falls on both; each run in a fresh process, timed from the call.
  const against = arg('against')[0];
  if (!against) throw new Error('--section ab needs --against DIR (a checkout to compare with, prepared inputs in place)');
  const rounds = Number(arg('rounds')[0] ?? 5);
  const named = arg('condition');
  const conditions = named[0] === 'all' ? [] : named.length ? named : CHEAP;
  const checkouts: [string, string][] = [
    ['before', against],
    ['after', ROOT],
  ];
  // Two clocks: from the call (everything), and from the end of the start-up (the tables checked, the
  // first worker ready), where the benchmark's own replay starts its clock (after its imports and checks).
  type Run = { wall: number; startup: number | null; native: number; records: number };
  const runs = new Map<string, Run[]>(checkouts.map(([label]) => [label, []]));
  // the wall on either clock (null: the checkout reports no start-up), and what follows from it
  const clockWall = (r: Run, afterStart: boolean) => (!afterStart ? r.wall : r.startup === null ? null : r.wall - r.startup);
  const overheadOf = (r: Run, afterStart: boolean) => {
    const wall = clockWall(r, afterStart);
    return wall === null ? null : ((wall - r.native) / r.records) * 1000;
  };
  const ratioOf = (r: Run, afterStart: boolean) => {
    const wall = clockWall(r, afterStart);
    return wall === null ? null : wall / r.native;
  };
  console.log(
    `before/after, cold replay with 1 worker of ${conditions.length ? conditions.join(', ') : 'the whole catalog'}, ${rounds} rounds, alternating:`,
  );
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 ? [...checkouts].reverse() : checkouts;
    for (const [label, root] of order) {
      const load = loadavg()[0]!.toFixed(2);
      const child = spawnSync(
        process.execPath,
        [
          '--import',
          'tsx',
          join(ROOT, 'scripts', 'bench-replay-once.ts'),
          '--root',
          root,
          ...(conditions.length ? ['--condition', ...conditions] : []),
        ],
        { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
      );
      if (child.status !== 0) throw new Error(`replay of ${root} failed: ${child.stderr}`);
      const result = JSON.parse(child.stdout.trim().split('\n').at(-1)!) as Run & { passed: number };
      const run: Run = { wall: result.wall, startup: result.startup ?? null, native: result.native, records: result.records };
      runs.get(label)!.push(run);
      const clock =
        run.startup === null
          ? 'start-up not reported by this checkout'
          : `after the start-up (${run.startup.toFixed(2)} s) wall/native ${ratioOf(run, true)!.toFixed(4)}, overhead ${overheadOf(run, true)!.toFixed(2)} ms/record`;
      console.log(
        `  round ${round + 1} ${label.padEnd(6)} ${result.passed}/${result.records} passed, wall ${result.wall.toFixed(2)} s, native ${result.native.toFixed(2)} s, ` +
          `wall/native ${ratioOf(run, false)!.toFixed(4)}, overhead ${overheadOf(run, false)!.toFixed(2)} ms/record; ${clock} (load average ${load} before)`,
      );
    }
    const [before, after] = [overheadOf(runs.get('before')!.at(-1)!, false)!, overheadOf(runs.get('after')!.at(-1)!, false)!];
    console.log(`  round ${round + 1} overhead after/before ${(after / before).toFixed(3)}`);
  }
  const middle = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  // the median of a figure over a checkout's runs (null when no run has it)
  const medianOf = (label: string, figure: (r: Run) => number | null) => {
    const values = runs.get(label)!.flatMap((r) => figure(r) ?? []);
    return values.length ? middle(values) : null;
  };
  for (const [label, root] of checkouts) {
    const afterStart = medianOf(label, (r) => overheadOf(r, true));
    console.log(
      `  ${label.padEnd(6)} (${root}): median overhead ${medianOf(label, (r) => overheadOf(r, false))!.toFixed(2)} ms/record, median wall/native ` +
        `${medianOf(label, (r) => ratioOf(r, false))!.toFixed(4)}` +
        (afterStart === null
          ? ''
          : `; after the start-up: median overhead ${afterStart.toFixed(2)} ms/record, median wall/native ${medianOf(label, (r) => ratioOf(r, true))!.toFixed(4)}`),
    );
  }
  for (const [afterStart, what] of [
    [false, 'median overhead after/before'],
    [true, 'median overhead after the start-up, after/before'],
  ] as const) {
    const [after, before] = [medianOf('after', (r) => overheadOf(r, afterStart)), medianOf('before', (r) => overheadOf(r, afterStart))];
    if (after !== null && before !== null) console.log(`  ${what}: ${(after / before).toFixed(3)}`);
  }
}

if (sections.has('episode')) {
  const { episodeStatus, observe, startEpisode } = await import('../pipelines/evaluation/episode.ts');
  const { NOTES_MAX_BYTES } = await import('../pipelines/evaluation/receipt.ts');
  const { statSync } = await import('node:fs');
  const condition = arg('condition')[0] ?? 'nile';
  const dir = mkdtempSync(join(tmpdir(), 'wwref-bench-episode-'));
  try {
    const ep = join(dir, 'ep');
    await startEpisode(settings, { dir: ep, condition, budget: 1 });
    const size = () => statSync(join(ep, 'events.jsonl')).size;
    const perAction = async (label: string, n: number) => {
      const started = performance.now();
      for (let k = 0; k < n; k++) {
        await episodeStatus(settings, ep);
        await observe(settings, ep, [`x${k}`]).catch(() => undefined);
      }
      console.log(`  ${label}: ${((performance.now() - started) / (2 * n)).toFixed(1)} ms per action (receipt ${size()} bytes)`);
    };
    console.log(`episode actions on ${condition} (a status and a refused observe, alternating):`);
    await perAction('fresh receipt      ', 100);
    while (size() < NOTES_MAX_BYTES) await observe(settings, ep, [`fill${size()}`]).catch(() => undefined);
    await perAction('receipt at its cap ', 100);
    await perAction('past the cap       ', 100);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (sections.has('catalog')) {
  console.log('whole catalog:');
  const one = await replay({ settings, workers: 1, quiet: true });
  describeReplay('replay, 1 worker ', one);
  const two = await replay({ settings, workers: 2, quiet: true });
  describeReplay('replay, 2 workers', two);
  console.log(`  replay wall, 2 workers / 1 worker: ${(two.wall_seconds / one.wall_seconds).toFixed(3)}`);
  describeRebuild('rebuild, 1 worker', await rebuildInTemp(undefined, 1));
}

if (sections.has('throughput')) {
  const conditions = arg('condition').length ? arg('condition') : THROUGHPUT;
  console.log(`throughput, ${conditions.join(', ')}:`);
  const results = new Map<number, RebuildSummary>();
  for (const workers of workerCounts) {
    const s = await rebuildInTemp(conditions, workers);
    results.set(workers, s);
    console.log(
      `  workers ${workers}: ${s.records} records in ${s.wallSeconds.toFixed(1)} s wall = ${(s.records / s.wallSeconds).toFixed(2)} records/s; ` +
        `native sum ${s.nativeSeconds.toFixed(1)} s; wall/native ${(s.wallSeconds / s.nativeSeconds).toFixed(3)}${workers > 1 ? ` (ideal ${(1 / workers).toFixed(2)})` : ''}`,
    );
  }
  const one = results.get(1);
  const two = results.get(2);
  if (one && two) console.log(`  speed-up with 2 workers: ${(one.wallSeconds / two.wallSeconds).toFixed(2)}x`);
  const last = [...results.values()].at(-1)!;
  console.log('  slowest conditions (native seconds):');
  for (const c of [...last.conditions].sort((a, b) => b.nativeSeconds - a.nativeSeconds).slice(0, 5)) {
    console.log(`    ${c.condition.padEnd(22)} ${c.nativeSeconds.toFixed(2)} s over ${c.records} records`);
  }
}

if (sections.has('profile')) {
  // One worker each, back to back: the computation time of the same records under both profiles.
  const conditions = arg('condition').length ? arg('condition') : THROUGHPUT;
  const pinned = profileByName(DEFAULT_PROFILE);
  const native = await rebuildInTemp(conditions, 1, profileByName('native'));
  // the same profile without its libm pin: the C library's own log1p/expm1, nothing preloaded or checked
  const unpinned = await rebuildInTemp(conditions, 1, { ...pinned, libm: undefined });
  const portable = await rebuildInTemp(conditions, 1, pinned);
  console.log(`numerical profile cost (1 worker, native seconds of the same ${portable.records} records):`);
  console.log(
    `  native ${native.nativeSeconds.toFixed(2)} s, ${DEFAULT_PROFILE} ${portable.nativeSeconds.toFixed(2)} s: ratio ${(portable.nativeSeconds / native.nativeSeconds).toFixed(3)} ` +
      `(wall ${native.wallSeconds.toFixed(1)} s vs ${portable.wallSeconds.toFixed(1)} s)`,
  );
  console.log(
    `  libm pin (${pinned.libm!.pinned.join(', ')}): ${DEFAULT_PROFILE} without it ${unpinned.nativeSeconds.toFixed(2)} s, with it ` +
      `${portable.nativeSeconds.toFixed(2)} s: ratio ${(portable.nativeSeconds / unpinned.nativeSeconds).toFixed(3)}`,
  );
  // The functions alone, where records are too short to show a difference above the machine's noise.
  const perCall = (profile: NumericalProfile) =>
    JSON.parse(String(runPython(settings, ['-c', LIBM_CALL_SCRIPT], { profile }).stdout)) as Record<string, number>;
  const [without, withPin] = [perCall({ ...pinned, libm: undefined }), perCall(pinned)];
  for (const name of Object.keys(withPin)) {
    console.log(
      `  np.${name} on 2,000,000 float64 (best of 7): ${without[name]!.toFixed(2)} ns/element without the pin, ` +
        `${withPin[name]!.toFixed(2)} with it: ratio ${(withPin[name]! / without[name]!).toFixed(3)}`,
    );
  }
  const nativeBy = new Map(native.conditions.map((c) => [c.condition, c.nativeSeconds]));
  const unpinnedBy = new Map(unpinned.conditions.map((c) => [c.condition, c.nativeSeconds]));
  console.log(`    ${'condition'.padEnd(22)} native -> ${DEFAULT_PROFILE}; ${DEFAULT_PROFILE} without the pin -> with it`);
  for (const c of portable.conditions) {
    const n = nativeBy.get(c.condition)!;
    const u = unpinnedBy.get(c.condition)!;
    console.log(
      `    ${c.condition.padEnd(22)} ${n.toFixed(3)} s -> ${c.nativeSeconds.toFixed(3)} s (${(c.nativeSeconds / n).toFixed(2)}x); ` +
        `${u.toFixed(3)} s -> ${c.nativeSeconds.toFixed(3)} s (${(c.nativeSeconds / u).toFixed(2)}x)`,
    );
  }
}

if (sections.has('dask')) {
  const conditions = arg('condition').length ? arg('condition') : THROUGHPUT;
  // With 1 worker a core is left for the scheduler and the bridge; with 2 they share the cores with
  // the computing workers (on a cluster they run beside the workers, not on their cores).
  const onCluster = async (workers: number): Promise<RebuildSummary> => {
    const cluster = await startLocalCluster(settings, workers);
    try {
      // Timed from a running cluster, as a rebuild meets it: every worker connected and admitted.
      const warm = new DaskExecutor({ settings, scheduler: cluster.address });
      while ((await warm.describe()).length < workers) await new Promise((resolve) => setTimeout(resolve, 200));
      await warm.close();
      return await rebuildInTemp(conditions, workers, undefined, { kind: 'dask', scheduler: cluster.address });
    } finally {
      await cluster.stop();
    }
  };
  // Rounds alternate the executors, so that a slow spell of a shared machine falls on both.
  const rounds = Number(arg('rounds')[0] ?? 3);
  for (const workers of workerCounts) {
    console.log(`Dask executor, ${workers} worker(s), ${conditions.join(', ')}, ${rounds} round(s):`);
    const walls = { local: 0, dask: 0, daskLocal: 0 };
    for (let round = 1; round <= rounds; round++) {
      const local = await rebuildInTemp(conditions, workers);
      describeRebuild(`round ${round} local pool  `, local);
      const dask = await onCluster(workers);
      describeRebuild(`round ${round} dask cluster`, dask);
      // dask-local also starts the scheduler and the workers (imports, admission) inside the job.
      const daskLocal = await rebuildInTemp(conditions, workers, undefined, { kind: 'dask-local' });
      describeRebuild(`round ${round} dask-local  `, daskLocal);
      console.log(
        `  round ${round} wall / local pool: dask ${(dask.wallSeconds / local.wallSeconds).toFixed(3)}, dask-local ${(daskLocal.wallSeconds / local.wallSeconds).toFixed(3)}`,
      );
      walls.local += local.wallSeconds;
      walls.dask += dask.wallSeconds;
      walls.daskLocal += daskLocal.wallSeconds;
    }
    console.log(
      `  wall over all rounds / local pool: dask ${(walls.dask / walls.local).toFixed(3)}, dask-local ${(walls.daskLocal / walls.local).toFixed(3)}`,
    );
  }
  const cluster = await startLocalCluster(settings, 2);
  try {
    // Dispatch: many small records in flight through the bridge and the scheduler.
    const executor = new DaskExecutor({ settings, scheduler: cluster.address });
    const input = { source: 'nile', files: readManifest(settings.paths, 'nile').prepared_files };
    const masks = Array.from({ length: 16 }, (_, i) => i.toString(2).padStart(4, '0'));
    const requests = Array.from({ length: 130 }, () => masks).flat();
    await executor.run({ family: 'forecasting', input, mask: '0000' }, { timeoutSeconds: 60 }); // input scattered, workers warm
    const cpuBefore = [cpuSeconds(cluster.schedulerPid), cpuSeconds(executor.bridgePid), process.cpuUsage()] as const;
    const started = performance.now();
    const runs = await Promise.all(requests.map((mask) => executor.run({ family: 'forecasting', input, mask }, { timeoutSeconds: 60 })));
    const wall = (performance.now() - started) / 1000;
    const native = runs.reduce((sum, r) => sum + r.wall_seconds, 0);
    const perRecord = (seconds: number) => ((seconds / runs.length) * 1000).toFixed(2);
    const cpu = {
      scheduler: cpuSeconds(cluster.schedulerPid) - cpuBefore[0],
      bridge: cpuSeconds(executor.bridgePid) - cpuBefore[1],
      orchestrator: (() => {
        const u = process.cpuUsage(cpuBefore[2]);
        return (u.user + u.system) / 1e6;
      })(),
    };
    await executor.close();
    console.log(
      `  dispatch: ${runs.length} records of ${((native / runs.length) * 1000).toFixed(2)} ms in ${wall.toFixed(2)} s on 2 workers: ` +
        `overhead ${overheadMs(wall, 2, native, runs.length)} ms/record, ${(runs.length / wall).toFixed(0)} records/s`,
    );
    console.log(
      `  CPU per record on the serial path: scheduler ${perRecord(cpu.scheduler)} ms, bridge ${perRecord(cpu.bridge)} ms, orchestrator ${perRecord(cpu.orchestrator)} ms`,
    );
  } finally {
    await cluster.stop();
  }
}

if (sections.has('controls')) {
  console.log('numerical controls, the published grid (records, summaries and figure written to a temporary folder):');
  const walls = new Map<number, number>();
  for (const workers of workerCounts) {
    const out = mkdtempSync(join(tmpdir(), 'wwref-bench-controls-'));
    try {
      const started = performance.now();
      const outcome = await runControls(settings, { grid: 'published', out, workers, log: () => {}, quiet: true });
      const wall = (performance.now() - started) / 1000;
      walls.set(workers, wall);
      console.log(
        `  ${workers} worker(s): ${outcome.records} records in ${wall.toFixed(2)} s wall, ${(outcome.records / wall).toFixed(0)} records/s`,
      );
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }
  if (walls.has(1) && walls.has(2)) console.log(`  wall, 2 workers / 1 worker: ${(walls.get(2)! / walls.get(1)!).toFixed(3)}`);
}

if (sections.has('cohort')) {
  const conditions = arg('condition').length
    ? arg('condition')
    : [...catalog.conditions.values()].filter((c) => c.dimensions === 4).map((c) => c.id);
  const parallel = workerCounts.at(-1)!;
  const out = mkdtempSync(join(tmpdir(), 'wwref-bench-cohort-'));
  const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const agentPython = join(ROOT, 'examples', 'agents', '.venv', 'bin', 'python');
  try {
    spawnSync('bash', [join(ROOT, 'scripts', 'setup-agents')], { stdio: 'ignore' });
    const imports: number[] = [];
    // the CPU of the children this process has waited for (cutime + cstime): the cohort and every process it waited for
    const childrenCpu = () => {
      const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
      return (Number(fields[13]) + Number(fields[14])) / 100;
    };
    const importsCpuBefore = childrenCpu();
    for (let k = 0; k < 3; k++) {
      const t = performance.now();
      spawnSync(agentPython, ['-c', 'import mcp, numpy, httpx2'], { stdio: 'ignore' });
      imports.push((performance.now() - t) / 1000);
    }
    const importCpu = (childrenCpu() - importsCpuBefore) / imports.length;
    const load = loadavg()[0]!.toFixed(1);
    const cpuBefore = childrenCpu();
    const started = performance.now();
    const run = spawnSync(
      process.execPath,
      [
        join(ROOT, 'bin', 'wwref.mjs'),
        'cohort',
        'run',
        '--agent',
        'examples/agents/.venv/bin/python examples/agents/pair_ridge.py',
        '--out',
        join(out, 'c'),
        '--condition',
        ...conditions,
        '--budget',
        '4',
        '8',
        '--parallel',
        String(parallel),
      ],
      { cwd: ROOT, encoding: 'utf8' },
    );
    const wall = (performance.now() - started) / 1000;
    const cpu = childrenCpu() - cpuBefore;
    if (run.status !== 0) throw new Error(`cohort run failed: ${run.stderr}`);
    const read = (file: string) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    const results = read(join(out, 'c', 'results.jsonl'));
    const controls = read(join(out, 'c', 'controls', 'records.jsonl')).filter((r) => r.method === 'design_degree2');
    const equal = results.filter((r) => {
      const c = controls.find((x) => x.condition === r.condition && x.budget === r.budget);
      // the agent record's observations are the ordered list; its score carries the control's fields and more
      const bought = (r.observations as { mask: string; utility: number }[]).map((o) => [o.mask, o.utility]);
      const score = Object.fromEntries(Object.keys(c?.score ?? {}).map((k) => [k, r.score[k]]));
      return (
        c && JSON.stringify([bought, score]) === JSON.stringify([c.acquisition_order.map((m: string) => [m, c.observations[m]]), c.score])
      );
    }).length;
    const agent = results.reduce((a, r) => a + r.process.wall_seconds, 0);
    const spans = results.map((r) => (Date.parse(r.finished_at) - Date.parse(r.started_at)) / 1000 - r.process.wall_seconds);
    const episodesWall =
      (Math.max(...results.map((r) => Date.parse(r.finished_at))) - Math.min(...results.map((r) => Date.parse(r.started_at)))) / 1000;
    console.log(
      `cohort of the example agent: ${conditions.length} conditions × B = 4, 8, --parallel ${parallel} (load average ${load} before):`,
    );
    console.log(
      `  ${results.length} episodes in ${wall.toFixed(1)} s wall end to end: ${((results.length / wall) * 60).toFixed(1)} episodes/min`,
    );
    console.log(
      `  CPU of the cohort and every process it waited for (agents, workers, figure): ${cpu.toFixed(1)} s, ${(cpu / results.length).toFixed(2)} s an episode; ` +
        `on ${parallel} idle cores at least ${(cpu / parallel).toFixed(1)} s of wall`,
    );
    console.log(
      `  from the first episode's start to the last one's result: ${episodesWall.toFixed(1)} s; before and after (start-up, controls, summaries, figure): ${(wall - episodesWall).toFixed(1)} s`,
    );
    console.log(
      `  the agents ran ${agent.toFixed(1)} s in all (${(agent / results.length).toFixed(2)} s each): ${((agent / (wall * parallel)) * 100).toFixed(0)} % of wall × parallel; outside the agent ${(100 - (agent / (wall * parallel)) * 100).toFixed(0)} %`,
    );
    console.log(
      `  wwref per episode outside its agent (start, serve, score, shared estimators, results line): median ${mid(spans).toFixed(3)} s, max ${Math.max(...spans).toFixed(3)} s`,
    );
    console.log(
      `  the agent's own start: Python importing mcp, numpy, httpx2: median ${mid(imports).toFixed(2)} s wall of ${imports.length}, ${importCpu.toFixed(2)} s CPU each`,
    );
    console.log(`  records equal to the design_degree2 controls (observations, order, score): ${equal}/${results.length}`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

if (sections.has('sandbox')) {
  const rounds = Number(arg('rounds')[0] ?? 5);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const available = sandboxAvailable();
  if (!available.available) console.log(`calculation sandbox: not available here (${available.reason})`);
  else {
    console.log(`calculation sandbox (a fresh process under bubblewrap and seccomp), medians of ${rounds} runs:`);
    // a 6-option surface with main and pair effects; the anchors and 20 purchases in a fixed order
    const utility = (k: number) => 0.5 + 0.1 * ((k >> 5) & 1) - 0.07 * ((k >> 2) & 1) + 0.05 * (((k >> 1) ^ k) & 1) + 0.003 * (k % 7);
    const order = [0, 63, ...Array.from({ length: 20 }, (_, i) => (i * 37 + 11) % 62).map((k) => k + 1)];
    const observations = [...new Set(order)].map((k) => ({ mask: k.toString(2).padStart(6, '0'), utility: utility(k) }));
    const engines = [await calculationEngine(settings, 'native'), await calculationEngine(settings, 'pyodide')];
    const fit = {
      native:
        'from wwb_helpers import fit_surface\nr = fit_surface(observations, degree=2)\nprint(r["ridge_alpha"], r["observed_loo_mse"])',
      pyodide: 'import wwref_helpers as h\nr = h.ridge_pair(observations)\nprint(r["alpha"], r["observed_loo_mse"])',
    };
    for (const engine of engines) {
      const cases = [
        { label: 'trivial call (print(1))', code: 'print(1)', evidence: {} },
        { label: `pair-effect ridge, ${observations.length} observations, 6 options`, code: fit[engine.name], evidence: { observations } },
      ];
      for (const { label, code, evidence } of cases) {
        const startup: number[] = [];
        const inside: number[] = [];
        const total: number[] = [];
        await runCalculation({ code, evidence, engine }); // the engine's one-time costs (a snapshot, the runtime's file list)
        for (let r = 0; r < rounds; r++) {
          const started = performance.now();
          const receipt = await runCalculation({ code, evidence, engine });
          total.push((performance.now() - started) / 1000);
          if (receipt.status !== 'ok') throw new Error(`sandbox bench: ${label} ended ${receipt.status}: ${receipt.stderr.slice(0, 200)}`);
          startup.push(receipt.startupSeconds);
          inside.push(receipt.wallSeconds);
        }
        console.log(
          `  ${engine.name}, ${label}: start-up ${median(startup).toFixed(2)} s, the code ${median(inside).toFixed(3)} s, ` +
            `whole call ${median(total).toFixed(2)} s`,
        );
      }
    }
    await mcpRoundTrips(rounds, median);
  }
}

/**
 * The agent's round trips through `wwref serve` over stdio with the SDK's client, on a fresh episode of
 * --condition (default nile): `observe` of one known mask (free: the lock, the log, the answer) and a
 * trivial `calculate_python` (reservation, sandbox, receipt), in the episode's default engine (native).
 */
async function mcpRoundTrips(rounds: number, median: (xs: number[]) => number): Promise<void> {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const { startEpisode } = await import('../pipelines/evaluation/episode.ts');
  const condition = arg('condition')[0] ?? 'nile';
  const dir = mkdtempSync(join(tmpdir(), 'wwref-bench-mcp-'));
  const ep = join(dir, 'ep');
  const client = new Client({ name: 'bench', version: '1.0.0' });
  try {
    const view = await startEpisode(settings, { dir: ep, condition, budget: 1, calls: rounds });
    await client.connect(
      new StdioClientTransport({ command: 'node', args: [join(ROOT, 'bin', 'wwref.mjs'), 'serve', '--episode', ep], cwd: ROOT }),
    );
    const timed = async (name: string, args: Record<string, unknown>, n: number) => {
      const ms: number[] = [];
      for (let k = 0; k < n; k++) {
        const started = performance.now();
        const result = await client.callTool({ name, arguments: args });
        ms.push(performance.now() - started);
        if (result.isError) throw new Error(`mcp bench: ${name} refused: ${JSON.stringify(result.content)}`);
      }
      return median(ms);
    };
    const observe = await timed('observe', { masks: [view.observations[0]!.mask] }, 50);
    const calculate = await timed('calculate_python', { code: 'print(1)' }, rounds);
    console.log(
      `  over MCP (wwref serve, stdio, ${condition}): observe round trip ${observe.toFixed(1)} ms (median of 50), ` +
        `calculate_python round trip (print(1), native) ${(calculate / 1000).toFixed(2)} s (median of ${rounds})`,
    );
  } finally {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Loaded into every timed process (`node --import`): on exit it appends the process's peak RSS (KiB)
 * and CPU seconds to the file WWREF_BENCH_USAGE names. The bare `node -e 0` carries it too.
 */
const USAGE_PRELOAD = `data:text/javascript,${encodeURIComponent(
  "import{appendFileSync}from'node:fs';process.on('exit',()=>{const u=process.resourceUsage();" +
    "appendFileSync(process.env.WWREF_BENCH_USAGE,JSON.stringify({rss:u.maxRSS,cpu:(u.userCPUTime+u.systemCPUTime)/1e6})+'\\n')})",
)}`;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

if (sections.has('startup')) {
  // several --bin FILE: each checkout's commands in the same rounds, so that their ratios are measured together
  const bins = arg('bin').length ? arg('bin') : [join(ROOT, 'bin', 'wwref.mjs')];
  const runs = Number(arg('runs')[0] ?? 7);
  const dir = mkdtempSync(join(tmpdir(), 'wwref-startup-'));
  const usageFile = join(dir, 'usage.jsonl');
  const condition = 'wine';
  const table = join(dir, 'prediction.csv');
  const dimensions = catalog.condition(condition).dimensions;
  const rows = allMasks(dimensions).map((m) => `${m},0.5\n`);
  writeFileSync(table, `mask,utility\n${rows.join('')}`);
  const cases: [string, string[]][] = [['node -e 0', ['-e', '0']]];
  bins.forEach((bin, b) => {
    const tag = bins.length > 1 ? `[${b + 1}] ` : '';
    const episode = join(dir, `episode-${b + 1}`);
    cases.push(
      [`${tag}wwref --help`, [bin, '--help']],
      [`${tag}wwref --version`, [bin, '--version']],
      [`${tag}wwref list`, [bin, 'list']],
      [`${tag}wwref task --condition ${condition}`, [bin, 'task', '--condition', condition]],
      [`${tag}wwref episode status`, [bin, 'episode', 'status', '--episode', episode]],
      [`${tag}wwref grade --condition ${condition}`, [bin, 'grade', '--condition', condition, '--table', table]],
    );
  });
  /** One run: wall seconds, and what the preload wrote (the process's own peak RSS and CPU seconds). */
  const once = (args: string[]) => {
    rmSync(usageFile, { force: true });
    const started = performance.now();
    const result = spawnSync(process.execPath, ['--import', USAGE_PRELOAD, ...args], {
      cwd: dir,
      env: { ...process.env, WWREF_BENCH_USAGE: usageFile },
      encoding: 'utf8',
    });
    const wall = (performance.now() - started) / 1000;
    if (result.status !== 0) throw new Error(`${args.join(' ')} exited with ${result.status}: ${result.stderr}`);
    const usage = JSON.parse(readFileSync(usageFile, 'utf8')) as { rss: number; cpu: number };
    return { wall, rss: usage.rss / 1024, cpu: usage.cpu };
  };
  try {
    for (const [b, bin] of bins.entries())
      once([bin, 'episode', 'start', '--episode', join(dir, `episode-${b + 1}`), '--condition', condition, '--budget', '4']);
    const load = loadavg()[0]!.toFixed(2);
    // one unmeasured run of each first (the file cache; a build made after an edit; the code cache of
    // each command), then rounds that go through every case in turn, so that a busy spell of a
    // shared machine falls on all
    for (const [, args] of cases) once(args);
    const measured = new Map(cases.map(([label]) => [label, [] as { wall: number; rss: number; cpu: number }[]]));
    for (let round = 0; round < runs; round++) for (const [label, args] of cases) measured.get(label)!.push(once(args));
    console.log(
      `start-up, median of ${runs} runs: node ${process.version}, ${availableParallelism()} cores (${cpus()[0]?.model ?? '?'}), ` +
        `load average ${load} before and ${loadavg()[0]!.toFixed(2)} after`,
    );
    for (const [b, bin] of bins.entries()) console.log(`  ${bins.length > 1 ? `[${b + 1}] ` : ''}${bin}`);
    const bare = measured.get('node -e 0')!;
    const bareWall = median(bare.map((r) => r.wall));
    const bareCpu = median(bare.map((r) => r.cpu));
    for (const [label, results] of measured) {
      const wall = median(results.map((r) => r.wall));
      const cpu = median(results.map((r) => r.cpu));
      const ratios = label === 'node -e 0' ? '' : ` (${(wall / bareWall).toFixed(1)}x)`;
      const cpuRatio = label === 'node -e 0' ? '' : ` (${(cpu / bareCpu).toFixed(1)}x)`;
      console.log(
        `  ${label.padEnd(34)} wall ${wall.toFixed(3)} s${ratios.padEnd(8)}  CPU ${cpu.toFixed(3)} s${cpuRatio.padEnd(8)}  ` +
          `peak RSS ${Math.max(...results.map((r) => r.rss)).toFixed(0)} MiB`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
