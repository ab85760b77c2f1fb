// One calculation: the agent's Python run by Pyodide in a fresh Node process inside the OS sandbox
// (isolation.ts), watched from outside (wall clock, CPU and resident memory of everything it started,
// output size), killed whole when a limit is hit, and described by a receipt that can be replayed.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { UserError } from '../../core/errors.ts';
import { type CalculationLimits, resolveLimits, sandboxArgv, sandboxTools } from './isolation.ts';
import { interpreterSnapshot } from './snapshot.ts';

export type CalculationStatus = 'ok' | 'error' | 'timed_out' | 'over_memory' | 'output_limit';

export interface Receipt {
  status: CalculationStatus;
  /** What ended a call the watchdog stopped: `cpu`/`wall` (timed_out), `memory` (over_memory), `output`. */
  killedBy: 'cpu' | 'wall' | 'memory' | 'output' | null;
  /** The Python program's exit status (0, 1 for an uncaught exception, n for sys.exit(n)); null when killed. */
  returnCode: number | null;
  /** UTF-8 text of the first `outputBytes` bytes of each stream (invalid bytes replaced). */
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** sha256 of the kept bytes of each stream: what `verifyReceipt` compares. */
  stdoutSha256: string;
  stderrSha256: string;
  /** Wall seconds of the code, from the moment the interpreter was ready. */
  wallSeconds: number;
  /** Wall seconds of the sandbox's and interpreter's start-up (not counted in the limits). */
  startupSeconds: number;
  codeSha256: string;
  evidenceSha256: string;
  limits: CalculationLimits;
  /** Why the call ended when the status alone does not say (a crash of the interpreter, a limit's name). */
  detail: string | null;
}

export interface CalculationRequest {
  /** Python source. */
  code: string;
  /** The evidence: a JSON object, or its exact JSON text (the bytes hashed and shown to the code). */
  evidence: string | Record<string, unknown>;
  limits?: Partial<CalculationLimits>;
  /**
   * Only for tests that show the OS sandbox alone contains an escape: leave out Node's permission
   * model (the inner layer). Never weaker on the OS side.
   */
  osLayerOnly?: boolean;
}

const MAX_CODE_BYTES = 1024 * 1024;
const MAX_EVIDENCE_BYTES = 32 * 1024 * 1024;
const WATCH_MS = 25;
/** Wall seconds the sandbox and Pyodide may take to start before the code's own limits begin. */
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
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length > MAX_EVIDENCE_BYTES) throw new UserError(`the evidence is ${bytes.length} bytes; at most ${MAX_EVIDENCE_BYTES}`);
  return bytes;
}

function checkCode(code: unknown): string {
  if (typeof code !== 'string') throw new UserError('the calculation code must be a string of Python');
  if (Buffer.byteLength(code, 'utf8') > MAX_CODE_BYTES) throw new UserError(`the calculation code is longer than ${MAX_CODE_BYTES} bytes`);
  return code;
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

/** Collects up to `limit` bytes of a stream; calls `over` once when more arrives. */
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

/**
 * Runs `code` with `evidence` in a fresh sandboxed Pyodide and returns its receipt. Throws (one line)
 * only for bad input or when no sandbox can be made here (see `sandboxAvailable`); whatever the code
 * does ends up in the receipt.
 */
export async function runCalculation(request: CalculationRequest): Promise<Receipt> {
  const code = checkCode(request?.code);
  const evidence = evidenceBytes(request.evidence);
  const limits = resolveLimits(request.limits);
  const tools = sandboxTools();
  const argv = sandboxArgv(tools, limits, { nodePermissions: !request.osLayerOnly, snapshot: await interpreterSnapshot(tools) });
  const started = process.hrtime.bigint();
  // its own process group (killed whole), no environment of ours, fd 3 for the runner's status line
  const child = spawn(argv[0]!, argv.slice(1), { detached: true, env: {}, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
  let killedBy: Receipt['killedBy'] = null;
  const kill = (reason: NonNullable<Receipt['killedBy']>) => {
    if (killedBy === null) killedBy = reason;
    try {
      // the outer bwrap: its sandbox init dies with it (die-with-parent), and with the init every
      // process of the sandbox's PID namespace
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  const stdout = collect(child.stdout!, limits.outputBytes, () => kill('output'));
  const stderr = collect(child.stderr!, limits.outputBytes, () => kill('output'));
  // fd 3: the runner's lines, `{"ready":true}` when the code starts, then its outcome
  let statusText = '';
  let readyAt: bigint | null = null;
  let cpuAtReady = 0;
  let wall: NodeJS.Timeout | undefined;
  let startup: NodeJS.Timeout | undefined;
  const ready = () => {
    clearTimeout(startup); // the code's own wall limit takes over
    readyAt = process.hrtime.bigint();
    cpuAtReady = usage(processTree(child.pid!), tools.clockTicks).cpu;
    wall = setTimeout(() => kill('wall'), limits.wallSeconds * 1000);
  };
  (child.stdio[3] as Readable).on('data', (chunk: Buffer) => {
    if (statusText.length > 4096) return;
    statusText += chunk.toString('utf8');
    if (readyAt === null && statusText.startsWith('{"ready":true}\n')) ready();
  });
  startup = setTimeout(() => kill('wall'), STARTUP_SECONDS * 1000);
  const watch = setInterval(() => {
    if (child.pid === undefined) return;
    const { rss, cpu } = usage(processTree(child.pid), tools.clockTicks);
    if (rss > limits.memoryBytes) kill('memory');
    else if (readyAt !== null && cpu - cpuAtReady >= limits.cpuSeconds) kill('cpu');
  }, WATCH_MS);
  const input = child.stdin as Writable;
  input.on('error', () => {}); // the sandbox may end before reading it all
  input.end(JSON.stringify({ code, evidence: evidence.toString('utf8') }));
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    child.on('error', (error) => resolve({ code: null, signal: null, error }));
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  clearTimeout(wall);
  clearTimeout(startup);
  clearInterval(watch);
  if (exit.error) throw new UserError(`the sandbox could not be started: ${exit.error.message}`);
  const ended = process.hrtime.bigint();
  const wallSeconds = Number(ended - (readyAt ?? ended)) / 1e9;
  const startupSeconds = Number((readyAt ?? ended) - started) / 1e9;

  let runner: { exit?: number; memory?: boolean; interpreter?: boolean } | null = null;
  try {
    const line = statusText.split('\n')[1] ?? '';
    if (line) runner = JSON.parse(line);
  } catch {
    runner = null; // the code wrote something else to fd 3: treated as no outcome
  }
  const out = stdout.bytes();
  const err = stderr.bytes();
  let status: CalculationStatus;
  let detail: string | null = null;
  let returnCode: number | null = killedBy === null ? (typeof runner?.exit === 'number' ? runner.exit : exit.code) : null;
  if (readyAt === null && killedBy === 'wall') {
    status = 'error';
    detail = `the interpreter did not start within ${STARTUP_SECONDS} seconds`;
  } else if (killedBy === 'wall' || killedBy === 'cpu') {
    status = 'timed_out';
    detail = killedBy === 'wall' ? `over ${limits.wallSeconds} wall seconds` : `over ${limits.cpuSeconds} CPU seconds`;
  } else if (killedBy === 'memory') {
    status = 'over_memory';
    detail = `over ${limits.memoryBytes} bytes of resident memory`;
  } else if (killedBy === 'output') {
    status = 'output_limit';
    detail = `over ${limits.outputBytes} bytes of ${stdout.truncated ? 'stdout' : 'stderr'}`;
  } else if (runner && typeof runner.exit === 'number') {
    status = runner.memory ? 'over_memory' : runner.exit === 0 ? 'ok' : 'error';
    if (runner.memory) detail = 'Python ran out of its WebAssembly memory (MemoryError)';
    if (runner.interpreter) detail = 'the interpreter itself failed';
  } else if (exit.signal === 'SIGXCPU' || exit.code === 128 + 24 || exit.signal === 'SIGKILL') {
    // the kernel's CPU limit (the backstop past the watchdog's)
    status = 'timed_out';
    killedBy = 'cpu';
    returnCode = null;
    detail = `over ${limits.cpuSeconds} CPU seconds (kernel limit)`;
  } else if (/JavaScript heap out of memory|Reached heap limit/.test(err.toString('utf8'))) {
    status = 'over_memory';
    detail = 'the JavaScript heap of the interpreter ran out';
  } else {
    status = 'error';
    detail = `the interpreter ended without a result (exit ${exit.code ?? exit.signal})`;
  }
  return {
    status,
    killedBy,
    returnCode,
    stdout: out.toString('utf8'),
    stderr: err.toString('utf8'),
    stdoutTruncated: stdout.truncated,
    stderrTruncated: stderr.truncated,
    stdoutSha256: sha256(out),
    stderrSha256: sha256(err),
    wallSeconds: Math.round(wallSeconds * 1000) / 1000,
    startupSeconds: Math.round(startupSeconds * 1000) / 1000,
    codeSha256: sha256(code),
    evidenceSha256: sha256(evidence),
    limits,
    detail,
  };
}

export interface Verification {
  /** The re-run gave the same status and the same output bytes (where the status makes them comparable). */
  ok: boolean;
  /** What differs, one line each. */
  differences: string[];
  /** Whether outputs were compared: not for a call the watchdog stopped on time or memory (timing decides where it stopped). */
  outputsCompared: boolean;
  rerun: Receipt;
}

/**
 * Re-runs a calculation under its receipt's limits and compares: the code's and evidence's hashes
 * first (the wrong inputs say so without running), then the status and the output bytes.
 */
export async function verifyReceipt(receipt: Receipt, code: string, evidence: CalculationRequest['evidence']): Promise<Verification> {
  const differences: string[] = [];
  const codeHash = sha256(checkCode(code));
  const evidenceHash = sha256(evidenceBytes(evidence));
  if (codeHash !== receipt.codeSha256) differences.push(`code sha256 ${codeHash} is not the receipt's ${receipt.codeSha256}`);
  if (evidenceHash !== receipt.evidenceSha256)
    differences.push(`evidence sha256 ${evidenceHash} is not the receipt's ${receipt.evidenceSha256}`);
  const rerun = await runCalculation({ code, evidence, limits: receipt.limits });
  if (rerun.status !== receipt.status) differences.push(`status ${rerun.status}, the receipt says ${receipt.status}`);
  const timing = (r: Receipt) => r.killedBy === 'wall' || r.killedBy === 'cpu' || r.killedBy === 'memory';
  const outputsCompared = !timing(receipt) && !timing(rerun);
  if (outputsCompared) {
    if (rerun.returnCode !== receipt.returnCode)
      differences.push(`return code ${rerun.returnCode}, the receipt says ${receipt.returnCode}`);
    // after an output kill only the stream that hit the limit is complete up to the same byte
    const streams = receipt.killedBy === 'output' ? [receipt.stdoutTruncated ? 'stdout' : 'stderr'] : (['stdout', 'stderr'] as const);
    for (const stream of streams as ('stdout' | 'stderr')[]) {
      const key = `${stream}Sha256` as const;
      if (rerun[key] !== receipt[key]) differences.push(`${stream} differs (sha256 ${rerun[key]}, the receipt says ${receipt[key]})`);
      else if (rerun[stream] !== receipt[stream]) differences.push(`${stream} text differs from the receipt's`);
    }
  }
  return { ok: differences.length === 0, differences, outputsCompared, rerun };
}
