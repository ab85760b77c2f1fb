// Where a cold replay's orchestration overhead goes (`scripts/bench.ts --section overhead`): one replay
// traced on both sides. The worker's side is marked by scripts/bench-trace/sitecustomize.py (loaded
// through PYTHONPATH; workflows/ is untouched, so the workers' code digest stays the references'), the
// orchestrator's by wrapping PythonWorker's request and response handling here, and its CPU by V8's
// profiler. Both sides mark with CLOCK_MONOTONIC (Python's perf_counter_ns, Node's hrtime), so the
// marks of one record line up. The overhead is the wall time no record was computing:
//   before the first record (tables and inputs checked, the template's spawn, imports and hello),
//   each condition's switch (a forked worker, its hello and admission, the truth),
//   the gaps between two records of a condition (the worker's hash and response of the one, the
//   wait for the next request, the worker's reading of it), and the end (closing the workers).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { ROOT } from '../pipelines/core/paths.ts';
import type { PythonWorker } from '../pipelines/execution/python-worker.ts';
import type { ReplayOptions, ReplayReport } from '../pipelines/jobs/replay.ts';

const now = () => Number(process.hrtime.bigint()); // nanoseconds, CLOCK_MONOTONIC

interface NodeRequest {
  pid: number | undefined;
  op: string;
  mask?: string;
  call: number;
  written: number;
  arrived?: number;
  resolved?: number;
}

interface WorkerMarks {
  mask: string;
  read: number;
  run_start: number;
  compute_start: number;
  compute_end: number;
  hash_end: number;
  result_end: number;
  encoded: number;
  sent: number;
  pid: number;
}

/** Wraps PythonWorker's request and response handling to mark each request; returns the marks and an undo. */
function traceRequests(Worker: typeof PythonWorker): { requests: NodeRequest[]; undo: () => void } {
  const requests: NodeRequest[] = [];
  const proto = Worker.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const request = proto.request!;
  const onResponse = proto.onResponse!;
  const byId = new WeakMap<object, Map<number, NodeRequest>>();
  proto.request = function (this: PythonWorker, ...args: unknown[]) {
    const body = args[1] as { op: string; mask?: string };
    const mark: NodeRequest = { pid: this.pid, op: body.op, mask: body.mask, call: now(), written: 0 };
    const mine = byId.get(this) ?? new Map<number, NodeRequest>();
    byId.set(this, mine);
    mine.set((this as unknown as { nextId: number }).nextId, mark);
    const promise = request.apply(this, args) as Promise<unknown>;
    mark.written = now();
    requests.push(mark);
    promise.then(
      () => (mark.resolved = now()),
      () => (mark.resolved = now()),
    );
    return promise;
  };
  proto.onResponse = function (this: PythonWorker, json: unknown, ...rest: unknown[]) {
    const id = (json as { id?: number }).id;
    const mark = id === undefined ? undefined : byId.get(this)?.get(id);
    if (mark) mark.arrived = now();
    return onResponse.call(this, json, ...rest);
  };
  return {
    requests,
    undo: () => {
      proto.request = request;
      proto.onResponse = onResponse;
    },
  };
}

/** Self time of the orchestrator's main thread by part, from a V8 CPU profile (milliseconds). */
function nodeCpuShares(profile: {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}): Map<string, number> {
  const parent = new Map<number, number>();
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // the nearest frame that names a part decides a sample's part
  const parts: [string, (f: { functionName: string; url: string }) => boolean][] = [
    ['idle (waiting for the worker)', (f) => f.functionName === '(idle)'],
    ['garbage collection', (f) => f.functionName === '(garbage collector)'],
    ['verification: hash and independent metric', (f) => f.functionName === 'verifyRun'],
    ['comparison with the stored record', (f) => f.functionName === 'compareWithStored'],
    ['progress', (f) => f.url.endsWith('progress.ts')],
    ['requests: schema, JSON, write', (f) => f.functionName === 'request' && f.url.endsWith('python-worker.ts')],
    [
      'responses: framing, JSON, schemas',
      (f) => f.url.endsWith('python-worker.ts') && /push|onResponse|attach|gather/.test(f.functionName),
    ],
    ['the pool (queue, timers)', (f) => f.url.endsWith('local-pool.ts') || f.url.includes('p-queue')],
    ['reading tables, inputs, plans (before the first record)', (f) => /replay$|table|checkFileHashes|declaredFor/.test(f.functionName)],
  ];
  const shares = new Map<string, number>();
  profile.samples.forEach((sample, i) => {
    let id: number | undefined = sample;
    let part = 'other (event loop, streams, module loading)';
    while (id !== undefined) {
      const frame = byId.get(id)!.callFrame;
      const found = parts.find(([, test]) => test(frame));
      if (found) {
        part = found[0];
        break;
      }
      id = parent.get(id);
    }
    shares.set(part, (shares.get(part) ?? 0) + profile.timeDeltas[i]! / 1000);
  });
  return shares;
}

/** Each record's marks; its `sent` comes on a line of its own after them (else: when the response was encoded). */
function readWorkerMarks(dir: string): WorkerMarks[] {
  return readdirSync(dir).flatMap((file) => {
    const marks: WorkerMarks[] = [];
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n').filter(Boolean)) {
      const mark = JSON.parse(line) as Partial<WorkerMarks>;
      if (mark.read === undefined) marks.at(-1)!.sent = mark.sent!;
      else marks.push({ ...(mark as WorkerMarks), sent: mark.encoded!, pid: Number(file.split('.')[0]) });
    }
    return marks;
  });
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const ms = (ns: number) => ns / 1e6;

/**
 * One traced one-worker replay of `conditions` by the checkout at `root` (this one by default, or
 * another, e.g. a worktree of the previous commit: its own modules, settings and prepared inputs);
 * prints the overhead's parts and returns the report.
 */
export async function overheadProfile(conditions: string[], root = ROOT, log = console.log): Promise<ReplayReport> {
  const load = (file: string) => import(pathToFileURL(join(root, file)).href);
  const { PythonWorker: Worker } = (await load('pipelines/execution/python-worker.ts')) as { PythonWorker: typeof PythonWorker };
  const { replay } = (await load('pipelines/jobs/replay.ts')) as { replay: (options: ReplayOptions) => Promise<ReplayReport> };
  const { loadSettings } = (await load('pipelines/core/settings.ts')) as typeof import('../pipelines/core/settings.ts');
  const settings = loadSettings({}, process.env);
  const dir = mkdtempSync(join(tmpdir(), 'wwref-bench-trace-'));
  const { requests, undo } = traceRequests(Worker);
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  const start = now();
  let report: ReplayReport;
  let end: number;
  try {
    report = await replay({
      settings,
      conditions,
      workers: 1,
      quiet: true,
      workerEnv: { PYTHONPATH: [root, join(ROOT, 'scripts', 'bench-trace')].join(delimiter), WWREF_BENCH_TRACE: dir },
    });
    end = now();
  } finally {
    undo();
  }
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  const marks = readWorkerMarks(dir).sort((a, b) => a.compute_start - b.compute_start);
  rmSync(dir, { recursive: true, force: true });
  const records = report.total;
  const wall = end - start;
  const native = sum(marks.map((m) => m.compute_end - m.compute_start));
  const overhead = wall - native;
  const firstHello = requests.find((r) => r.op === 'hello')!;
  const rows: [string, number][] = [];
  rows.push(['before the template: manifest, tables, prepared inputs, plans checked', firstHello.call - start]);
  rows.push(['the template: spawn, imports, hello, admission', firstHello.resolved! - firstHello.call]);
  rows.push(['from the template to the first record (fork, hello, truth)', marks[0]!.compute_start - firstHello.resolved!]);
  const gaps = { post: [] as number[], wait: [] as number[], pre: [] as number[], switch: [] as number[] };
  for (let i = 1; i < marks.length; i++) {
    const [a, b] = [marks[i - 1]!, marks[i]!];
    if (a.pid !== b.pid) gaps.switch.push(b.compute_start - a.compute_end);
    else {
      gaps.post.push(a.sent - a.compute_end);
      gaps.wait.push(b.read - a.sent);
      gaps.pre.push(b.compute_start - b.read);
    }
  }
  rows.push([`condition switches (${gaps.switch.length}): a forked worker, its hello and admission, the truth`, sum(gaps.switch)]);
  rows.push(['after the last record: the last response, closing the workers', end - marks.at(-1)!.compute_end]);
  const within = gaps.post.length;
  const post = (field: (m: WorkerMarks) => number) =>
    sum(marks.slice(0, -1).flatMap((a, i) => (a.pid === marks[i + 1]!.pid ? [field(a)] : [])));
  const perRecord: [string, number][] = [
    ['worker: prediction hash (sha256 of its bytes)', post((m) => m.hash_end - m.compute_end)],
    ['worker: result fields (extras, warnings, JSON values)', post((m) => m.result_end - m.hash_end)],
    ['worker: response encoded (JSON, attachment bytes)', post((m) => m.encoded - m.result_end)],
    ['worker: response written', post((m) => m.sent - m.encoded)],
    ['waiting for the next request (pipe, orchestrator)', sum(gaps.wait)],
    [
      'worker: request read and parsed, input looked up',
      sum(marks.slice(1).map((b, i) => (b.pid === marks[i]!.pid ? b.run_start - b.read : 0))),
    ],
    [
      'worker: run_record set-up (warnings, family)',
      sum(marks.slice(1).map((b, i) => (b.pid === marks[i]!.pid ? b.compute_start - b.run_start : 0))),
    ],
  ];
  const line = (label: string, ns: number, per?: number) =>
    log(
      `    ${label.padEnd(74)} ${ms(ns).toFixed(1).padStart(8)} ms ${((ns / overhead) * 100).toFixed(1).padStart(5)} %` +
        (per ? `  ${(ms(ns) / per).toFixed(3)} ms/record` : ''),
    );
  log(
    `  traced replay (both sides marked): wall ${ms(wall).toFixed(0)} ms from the call, records computing ${ms(native).toFixed(0)} ms, ` +
      `overhead ${ms(overhead).toFixed(0)} ms = ${(ms(overhead) / records).toFixed(2)} ms/record over ${records} records; its parts:`,
  );
  for (const [label, ns] of rows) line(label, ns, records);
  log(
    `    between two records of a condition (${within} gaps): ${(ms(sum([...gaps.post, ...gaps.wait, ...gaps.pre])) / within).toFixed(3)} ms each`,
  );
  for (const [label, ns] of perRecord) line(`  ${label}`, ns, within);
  const runs = requests.filter((r) => r.op === 'run' && r.arrived && r.resolved);
  const decode = sum(runs.map((r) => r.resolved! - r.arrived!));
  const encode = sum(runs.map((r) => r.written - r.call));
  log(
    `    orchestrator per record: request built and written ${(ms(encode) / runs.length).toFixed(3)} ms, ` +
      `response decoded and validated ${(ms(decode) / runs.length).toFixed(3)} ms (on the path only when the worker waits for it)`,
  );
  const shares = nodeCpuShares(profile as Parameters<typeof nodeCpuShares>[0]);
  const busy = sum([...shares].filter(([k]) => !k.startsWith('idle')).map(([, v]) => v));
  log(`    orchestrator's main thread (V8 profile): busy ${busy.toFixed(0)} ms of ${ms(wall).toFixed(0)} ms; by part:`);
  for (const [part, value] of [...shares].sort((a, b) => b[1] - a[1]))
    log(`      ${part.padEnd(60)} ${value.toFixed(1).padStart(8)} ms  ${(value / records).toFixed(3)} ms/record`);
  return report!;
}
