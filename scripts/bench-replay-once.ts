// One cold replay with one worker, in a fresh process, of the checkout at --root (this one or another:
// the before/after of `scripts/bench.ts --section ab`). Prints one JSON line: the wall time from the
// replay's call to its end (the tables' reading and checking included, whatever the checkout's own
// report counts), the start-up within it (until the tables were checked and the first worker was
// ready; null for a checkout whose report lacks it), the records' native seconds, and how many passed.
//   npx tsx scripts/bench-replay-once.ts --root DIR [--condition C ...]   (no --condition: the whole catalog)
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const argv = process.argv.slice(2);
const root = argv[argv.indexOf('--root') + 1]!;
const at = argv.indexOf('--condition');
const conditions = at < 0 ? undefined : argv.slice(at + 1).filter((v) => !v.startsWith('--'));
const load = (file: string) => import(pathToFileURL(join(root, file)).href);
const { loadSettings } = await load('pipelines/core/settings.ts');
const { replay } = await load('pipelines/jobs/replay.ts');
const settings = loadSettings({}, process.env);
const started = performance.now();
const report = await replay({ settings, conditions, workers: 1, quiet: true });
const wall = (performance.now() - started) / 1000;
console.log(
  JSON.stringify({
    wall,
    reported_wall: report.wall_seconds,
    startup: report.startup_seconds ?? null,
    native: report.replayed_native_seconds,
    records: report.total,
    passed: report.passed,
  }),
);
