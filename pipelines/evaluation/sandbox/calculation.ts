// One calculation: the agent's Python run by an engine (engines.ts) in a fresh process inside the OS
// sandbox (isolation.ts), watched from outside (wall clock, CPU and resident memory of everything it
// started, output size), killed whole when a limit is hit, and described by a receipt that can be
// replayed. The receipt's outcome is what the supervisor saw (the process's exit status, the limits it
// enforced, the bytes it read), never what the code said about itself.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { UserError } from '../../core/errors.ts';
import { type Engine, type EngineName, pyodideEngine } from './engines.ts';
import { type CalculationLimits, resolveLimits, sandboxArgv, sandboxTools, startSandbox, type Tools } from './isolation.ts';
import { interpreterSnapshot } from './snapshot.ts';

export type CalculationStatus = 'ok' | 'error' | 'timed_out' | 'over_memory' | 'output_limit';

export interface Receipt {
  status: CalculationStatus;
  /** What ended a call the watchdog stopped: `cpu`/`wall` (timed_out), `memory` (over_memory), `output`. */
  killedBy: 'cpu' | 'wall' | 'memory' | 'output' | null;
  /** The program's exit status (0, 1 for an uncaught exception, n for sys.exit(n)); null when killed. */
  returnCode: number | null;
  /** UTF-8 text of the first `outputBytes` bytes of each stream (invalid bytes replaced). */
  stdout: string;
  stderr: string;
  /** Whether the stream went past `outputBytes` (its first bytes kept). */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** sha256 of the kept bytes of each stream: what `verifyReceipt` compares. */
  stdoutSha256: string;
  stderrSha256: string;
  /** Wall seconds of the code, from the moment the interpreter was ready. */
  wallSeconds: number;
  /** Wall seconds of the sandbox's and interpreter's start-up (not counted in the limits). */
  startupSeconds: number;
  /** The exact UTF-8 bytes the interpreter was given. */
  codeSha256: string;
  evidenceSha256: string;
  limits: CalculationLimits;
  /** The engine that ran the code (absent in receipts written before there were two: `pyodide`). */
  engine: EngineName;
  /** Why the call ended when the status alone does not say (a crash of the interpreter, a limit's name). */
  detail: string | null;
}

export interface CalculationRequest {
  /** Python source. */
  code: string;
  /** The evidence: a JSON object, or its exact JSON text (the bytes hashed and shown to the code). */
  evidence: string | Record<string, unknown>;
  limits?: Partial<CalculationLimits>;
  /** The engine (default Pyodide; engines.ts). */
  engine?: Engine;
  /**
   * Only for tests that show the OS sandbox alone contains an escape: leave out Node's permission
   * model (the Pyodide engine's inner layer). Never weaker on the OS side.
   */
  osLayerOnly?: boolean;
}

const MAX_CODE_BYTES = 1024 * 1024;
const MAX_EVIDENCE_BYTES = 32 * 1024 * 1024;
/** The runner's ready line on fd 3 (all it may say there; the descriptor is closed after it). */
const READY = '{"ready":true}\n';
const WATCH_MS = 25;
/** Wall seconds the sandbox and the interpreter may take to start before the code's own limits begin. */
const STARTUP_SECONDS = 60;

const sha256 = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

function evidenceBytes(evidence: CalculationRequest['evidence']): Buffer {
  let text: string;
  if (typeof evidence === 'string') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(evidence);
    } catch (error) {
      throw new UserError(`the evidence is not JSON: ${(error as Error).message}`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new UserError('the evidence must be a JSON object');
    text = evidence;
  } else {
    if (evidence === null || typeof evidence !== 'object' || Array.isArray(evidence))
      throw new UserError('the evidence must be a JSON object');
    text = JSON.stringify(evidence);
  }
  if (/\p{Cs}/u.test(text)) throw new UserError('the evidence holds a lone surrogate: it is not Unicode text');
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length > MAX_EVIDENCE_BYTES) throw new UserError(`the evidence is ${bytes.length} bytes; at most ${MAX_EVIDENCE_BYTES}`);
  return bytes;
}

/** The code as the exact UTF-8 bytes the interpreter runs (a lone surrogate has none: refused). */
function codeBytes(code: unknown): Buffer {
  if (typeof code !== 'string') throw new UserError('the calculation code must be a string of Python');
  // UTF-8 has no form for a lone surrogate: encoding would put U+FFFD in its place, and two different
  // codes would run as the same bytes under one hash
  if (/\p{Cs}/u.test(code))
    throw new UserError('the calculation code holds a lone surrogate (U+D800 to U+DFFF alone): it is not Unicode text');
  const bytes = Buffer.from(code, 'utf8');
  if (bytes.length > MAX_CODE_BYTES) throw new UserError(`the calculation code is longer than ${MAX_CODE_BYTES} bytes`);
  return bytes;
}

/** Every process below `root` (its threads' children, recursively), with `root`. */
function processTree(root: number): number[] {
  const seen = [root];
  for (let i = 0; i < seen.length; i++) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${seen[i]}/task`);
    } catch {
      continue; // gone
    }
    for (const task of tasks) {
      try {
        for (const child of readFileSync(`/proc/${seen[i]}/task/${task}/children`, 'utf8').split(' '))
          if (child.trim()) seen.push(Number(child));
      } catch {
        // the task ended meanwhile
      }
    }
  }
  return seen;
}

/** A process's start time (clock ticks since boot), to tell it from a later process with its number. */
function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** Resident bytes and CPU seconds (user + system) summed over processes. */
function usage(pids: number[], clockTicks: number): { rss: number; cpu: number } {
  let rss = 0;
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // fields after the command name (which may hold spaces), from field 3 on
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime
      rss += Number(fields[21]) * 4096; // rss in pages
    } catch {
      // gone meanwhile
    }
  }
  return { rss, cpu: ticks / clockTicks };
}

/** Collects up to `limit` bytes of a stream (and drains the rest); calls `over` once when more arrives. */
function collect(stream: Readable, limit: number, over: () => void) {
  const chunks: Buffer[] = [];
  let kept = 0;
  const state = { truncated: false, bytes: () => Buffer.concat(chunks) };
  stream.on('data', (chunk: Buffer) => {
    if (state.truncated) return;
    if (kept + chunk.length > limit) {
      chunks.push(chunk.subarray(0, limit - kept));
      kept = limit;
      state.truncated = true;
      over();
      return;
    }
    chunks.push(chunk);
    kept += chunk.length;
  });
  return state;
}

/** What the supervisor saw of one run: how it ended, its output, its timings. */
interface Observed {
  exit: { code: number | null; signal: NodeJS.Signals | null };
  killedBy: Receipt['killedBy'];
  ready: boolean;
  cpu: number;
  out: Buffer;
  err: Buffer;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  wallSeconds: number;
  startupSeconds: number;
}

/**
 * Runs the sandbox and watches it: the ready line on fd 3 starts the code's limits (and the supervisor
 * then closes its end: the code has no channel to it but stdout and stderr); a limit hit kills every
 * process the call started, the sandbox's own session and PID-namespace init included.
 */
async function watch(tools: Tools, argv: string[], input: string, limits: CalculationLimits): Promise<Observed> {
  const started = process.hrtime.bigint();
  const child = startSandbox(argv);
  const seen = new Map<number, string | null>(); // every process of the call, with its start time
  const note = () => {
    for (const pid of processTree(child.pid!)) if (!seen.has(pid)) seen.set(pid, startTime(pid));
  };
  const killAll = () => {
    for (const [pid, start] of seen)
      if (start !== null && startTime(pid) === start)
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
  };
  let killedBy: Receipt['killedBy'] = null;
  const kill = (reason: NonNullable<Receipt['killedBy']>) => {
    if (killedBy === null) killedBy = reason;
    if (child.pid !== undefined) note();
    killAll();
  };
  const stdout = collect(child.stdout!, limits.outputBytes, () => kill('output'));
  const stderr = collect(child.stderr!, limits.outputBytes, () => kill('output'));
  let said = '';
  let readyAt: bigint | null = null;
  let cpuAtReady = 0;
  let cpu = 0;
  let wall: NodeJS.Timeout | undefined;
  const startup = setTimeout(() => kill('wall'), STARTUP_SECONDS * 1000);
  const ready = child.stdio[3] as Readable;
  ready.on('error', () => {});
  ready.on('data', (chunk: Buffer) => {
    said += chunk.toString('latin1');
    if (said === READY && readyAt === null) {
      clearTimeout(startup); // the code's own wall limit takes over
      readyAt = process.hrtime.bigint();
      note();
      cpuAtReady = usage([...seen.keys()], tools.clockTicks).cpu;
      wall = setTimeout(() => kill('wall'), limits.wallSeconds * 1000);
      ready.destroy(); // whatever the code writes there now fails (EPIPE): nothing more is read
    } else if (!READY.startsWith(said)) kill('output'); // not the runner's line: the interpreter is not ours
  });
  const poll = setInterval(() => {
    if (child.pid === undefined) return;
    note();
    const now = usage(processTree(child.pid), tools.clockTicks);
    cpu = now.cpu - cpuAtReady;
    if (now.rss > limits.memoryBytes) kill('memory');
    else if (readyAt !== null && cpu >= limits.cpuSeconds) kill('cpu');
  }, WATCH_MS);
  const stdin = child.stdin as Writable;
  stdin.on('error', () => {}); // the sandbox may end before reading it all
  stdin.end(input);
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    child.on('error', (error) => resolve({ code: null, signal: null, error }));
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  clearTimeout(wall);
  clearTimeout(startup);
  clearInterval(poll);
  killAll(); // nothing of the call outlives it, whatever it did to its parent-death signal
  if (exit.error) throw new UserError(`the sandbox could not be started: ${exit.error.message}`);
  const ended = process.hrtime.bigint();
  return {
    exit,
    killedBy,
    ready: readyAt !== null,
    cpu,
    out: stdout.bytes(),
    err: stderr.bytes(),
    stdoutTruncated: stdout.truncated,
    stderrTruncated: stderr.truncated,
    wallSeconds: Number(ended - (readyAt ?? ended)) / 1e9,
    startupSeconds: Number((readyAt ?? ended) - started) / 1e9,
  };
}

/** The last line of a stream that says something (a traceback's exception line). */
const lastLine = (bytes: Buffer) =>
  bytes
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim())
    .at(-1) ?? '';

/** The receipt's status and detail, from what the supervisor saw. */
function outcome(o: Observed, limits: CalculationLimits): Pick<Receipt, 'status' | 'killedBy' | 'returnCode' | 'detail'> {
  const { killedBy } = o;
  if (!o.ready && killedBy !== 'output')
    return {
      status: 'error',
      killedBy,
      returnCode: null,
      detail:
        killedBy === 'wall'
          ? `the interpreter did not start within ${STARTUP_SECONDS} seconds`
          : `the interpreter did not start (exit ${o.exit.code ?? o.exit.signal}): ${lastLine(o.err).slice(0, 200)}`,
    };
  if (killedBy === 'wall') return { status: 'timed_out', killedBy, returnCode: null, detail: `over ${limits.wallSeconds} wall seconds` };
  if (killedBy === 'cpu') return { status: 'timed_out', killedBy, returnCode: null, detail: `over ${limits.cpuSeconds} CPU seconds` };
  if (killedBy === 'memory')
    return { status: 'over_memory', killedBy, returnCode: null, detail: `over ${limits.memoryBytes} bytes of resident memory` };
  if (killedBy === 'output') {
    const streams = [o.stdoutTruncated ? 'stdout' : null, o.stderrTruncated ? 'stderr' : null].filter(Boolean).join(' and ');
    return { status: 'output_limit', killedBy, returnCode: null, detail: `over ${limits.outputBytes} bytes of ${streams || 'fd 3'}` };
  }
  const code = o.exit.code ?? (o.exit.signal ? 128 : 1);
  // the kernel's CPU limit (SIGXCPU, then SIGKILL), the backstop past the watchdog's: only where the call used its CPU
  if ((code === 128 + 24 || code === 128 + 9) && o.cpu >= limits.cpuSeconds)
    return { status: 'timed_out', killedBy: 'cpu', returnCode: null, detail: `over ${limits.cpuSeconds} CPU seconds (kernel limit)` };
  if (code === 0) return { status: 'ok', killedBy: null, returnCode: 0, detail: null };
  const last = lastLine(o.err);
  // Python's own MemoryError (numpy's _ArrayMemoryError is one) at the end of the traceback
  if (code === 1 && /^([\w.]+\.)?_?\w*MemoryError\b/.test(last))
    return { status: 'over_memory', killedBy: null, returnCode: 1, detail: 'Python ran out of memory (MemoryError)' };
  // nothing the code printed becomes the receipt's detail: its stderr says what it says
  return { status: 'error', killedBy: null, returnCode: code, detail: null };
}

/**
 * Runs `code` with `evidence` in a fresh sandbox and returns its receipt. Throws (one line) only for
 * bad input or when no sandbox can be made here (see `sandboxAvailable`); whatever the code does ends
 * up in the receipt.
 */
export async function runCalculation(request: CalculationRequest): Promise<Receipt> {
  const code = codeBytes(request?.code);
  const evidence = evidenceBytes(request.evidence);
  const limits = resolveLimits(request.limits);
  const engine = request.engine ?? pyodideEngine;
  const tools = sandboxTools();
  const snapshot = engine.snapshots ? await interpreterSnapshot(tools) : undefined;
  const inner = engine.command(tools, limits, { snapshot, nodePermissions: !request.osLayerOnly });
  const input = JSON.stringify({ code: code.toString('utf8'), evidence: evidence.toString('utf8') });
  const seen = await watch(tools, sandboxArgv(tools, limits, inner), input, limits);
  return {
    ...outcome(seen, limits),
    stdout: seen.out.toString('utf8'),
    stderr: seen.err.toString('utf8'),
    stdoutTruncated: seen.stdoutTruncated,
    stderrTruncated: seen.stderrTruncated,
    stdoutSha256: sha256(seen.out),
    stderrSha256: sha256(seen.err),
    wallSeconds: Math.round(seen.wallSeconds * 1000) / 1000,
    startupSeconds: Math.round(seen.startupSeconds * 1000) / 1000,
    codeSha256: sha256(code),
    evidenceSha256: sha256(evidence),
    limits,
    engine: engine.name,
  };
}

export interface Verification {
  /** Nothing the re-run can check differs from the receipt. */
  ok: boolean;
  /** What differs, one line each. */
  differences: string[];
  /**
   * Whether outputs were compared: not for a call a limit on time or memory stopped (where it stopped
   * depends on timing): such a call is `stopped`, never said to be replayed.
   */
  outputsCompared: boolean;
  /** `replayed` (status, return code and output agree), `stopped` (only the status could be compared), `differs`. */
  outcome: 'replayed' | 'stopped' | 'differs';
  rerun: Receipt;
}

/** Stops that depend on timing: where the code was when it was stopped is not reproducible. */
const timing = (r: Pick<Receipt, 'killedBy'>) => r.killedBy === 'wall' || r.killedBy === 'cpu' || r.killedBy === 'memory';

/** Output differences after an output-limit stop, in which both streams are prefixes of the code's whole output. */
function prefixDifferences(receipt: Receipt, rerun: Receipt): string[] {
  const differences: string[] = [];
  for (const stream of ['stdout', 'stderr'] as const) {
    const truncated = `${stream}Truncated` as const;
    if (receipt[truncated] && rerun[truncated]) {
      if (receipt[`${stream}Sha256`] !== rerun[`${stream}Sha256`] || receipt[stream] !== rerun[stream])
        differences.push(`${stream} differs (sha256 ${rerun[`${stream}Sha256`]}, the receipt says ${receipt[`${stream}Sha256`]})`);
      continue;
    }
    // the stream the call was not stopped on holds what the code wrote to it by then: one run's kept
    // text must begin the other's (less the last character, which a cut may have split)
    const [short, long] =
      receipt[stream].length <= rerun[stream].length ? [receipt[stream], rerun[stream]] : [rerun[stream], receipt[stream]];
    if (!long.startsWith(short.slice(0, -1))) differences.push(`${stream} differs: neither run's output begins the other's`);
  }
  return differences;
}

/**
 * Re-runs a calculation under its receipt's limits (and engine) and compares: the code's and evidence's
 * hashes first, then the status, the return code and the output bytes where the status makes them
 * comparable. `engine` must be the receipt's (calculations.ts resolves it); default Pyodide.
 */
export async function verifyReceipt(
  receipt: Receipt,
  code: string,
  evidence: CalculationRequest['evidence'],
  engine?: Engine,
): Promise<Verification> {
  const differences: string[] = [];
  const codeHash = sha256(codeBytes(code));
  const evidenceHash = sha256(evidenceBytes(evidence));
  if (codeHash !== receipt.codeSha256) differences.push(`code sha256 ${codeHash} is not the receipt's ${receipt.codeSha256}`);
  if (evidenceHash !== receipt.evidenceSha256)
    differences.push(`evidence sha256 ${evidenceHash} is not the receipt's ${receipt.evidenceSha256}`);
  const wanted = receipt.engine ?? 'pyodide';
  const runner = engine ?? pyodideEngine;
  if (runner.name !== wanted) throw new UserError(`the receipt was made by the ${wanted} engine, not ${runner.name}`);
  const rerun = await runCalculation({ code, evidence, limits: receipt.limits, engine: runner });
  if (rerun.status !== receipt.status) differences.push(`status ${rerun.status}, the receipt says ${receipt.status}`);
  const outputsCompared = !timing(receipt) && !timing(rerun);
  if (outputsCompared) {
    if (rerun.returnCode !== receipt.returnCode)
      differences.push(`return code ${rerun.returnCode}, the receipt says ${receipt.returnCode}`);
    if (receipt.status === 'output_limit' && rerun.status === 'output_limit') differences.push(...prefixDifferences(receipt, rerun));
    else
      for (const stream of ['stdout', 'stderr'] as const) {
        const key = `${stream}Sha256` as const;
        if (rerun[key] !== receipt[key]) differences.push(`${stream} differs (sha256 ${rerun[key]}, the receipt says ${receipt[key]})`);
        else if (rerun[stream] !== receipt[stream]) differences.push(`${stream} text differs from the receipt's`);
      }
  }
  const outcome = differences.length ? 'differs' : outputsCompared ? 'replayed' : 'stopped';
  return { ok: differences.length === 0, differences, outputsCompared, outcome, rerun };
}
