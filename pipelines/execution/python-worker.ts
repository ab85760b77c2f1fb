// One Python worker (workflows/worker.py) and its request/response loop. A worker is either a
// process spawned here or a fork of a *template*: a spawned worker that has imported the libraries,
// answered its hello and never runs anything. Forking takes milliseconds instead of the second the
// imports take, so a fresh worker per condition (replay) or per crashed worker costs almost nothing.
import type { ResultPromise } from 'execa';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import * as z from 'zod';
import type { FamilyName } from '../catalog/families.ts';
import type { Settings } from '../core/settings.ts';
import { HELLO_TIMEOUT_SECONDS, WorkerCrash, WorkerError } from './executor.ts';
import { startPython, type LaunchOptions } from './launcher.ts';
import { HelloResult, PrepareResult, Request, Response, RunResult, TruthResult } from './protocol.ts';

/** How long a worker asked to shut down may take before it is killed. */
const SHUTDOWN_GRACE_SECONDS = 5;

const ForkResult = z.strictObject({ pid: z.number().int().positive() });

/** A prepared input as the worker reads it: a local folder and the sha256 of each of its files. */
export interface InputFiles {
  folder: string;
  files: Readonly<Record<string, string>>;
}

/** How the protocol reaches one worker: its streams, its process, and the end of either. */
interface Transport {
  input: Readable;
  output: Writable;
  pid: number | undefined;
  kill(): void;
  /** Resolves when the worker is gone (process exit, or the socket closed). */
  ended: Promise<unknown>;
  /**
   * Resolves when the worker has closed its end of the protocol, or is gone. A worker told to shut
   * down closes it just before its process exits, so `close` need not wait for the kernel to tear
   * down a process that has loaded the numerical stack (10–15 ms each).
   */
  finished: Promise<unknown>;
  /** The last lines the worker wrote to stderr. */
  stderrTail(): string;
}

/**
 * Splits a worker's output into responses: a JSON line, then the number of raw bytes its
 * `attachment` field announces. Lines are parsed here; the caller validates them.
 */
export class ResponseFramer {
  private buffer: Buffer = Buffer.alloc(0);
  private chunks: Buffer[] = [];
  private buffered = 0;
  private header?: { json: unknown; attachment: number; line: string };

  constructor(private readonly onResponse: (json: unknown, attachment: Uint8Array, line: string) => void) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    for (;;) {
      if (!this.header) {
        if (!this.chunks.length && !this.buffer.length) return;
        this.gather(this.buffered);
        const end = this.buffer.indexOf(10);
        if (end < 0) return;
        const line = this.buffer.subarray(0, end).toString('utf8');
        this.take(end + 1);
        if (!line.trim()) continue;
        const json = JSON.parse(line) as { attachment?: unknown };
        this.header = { json, attachment: typeof json.attachment === 'number' ? json.attachment : 0, line };
        continue;
      }
      if (this.buffered < this.header.attachment) return;
      const attachment = this.copyOut(this.header.attachment);
      const { json, line } = this.header;
      this.header = undefined;
      this.onResponse(json, attachment, line);
    }
  }

  /** Makes `buffer` hold at least `bytes` bytes (or everything received). */
  private gather(bytes: number): void {
    if (this.buffer.length >= bytes || !this.chunks.length) return;
    this.buffer = Buffer.concat([this.buffer, ...this.chunks]);
    this.chunks = [];
  }

  /**
   * The next `bytes` bytes in a fresh ArrayBuffer of their own (so that the arrays in it are aligned
   * where the worker aligned them, and no received chunk is kept alive by them), copied once from the
   * received chunks; what follows stays buffered.
   */
  private copyOut(bytes: number): Uint8Array {
    const out = new Uint8Array(bytes);
    let filled = Math.min(bytes, this.buffer.length);
    out.set(this.buffer.subarray(0, filled));
    this.buffer = this.buffer.subarray(filled);
    while (filled < bytes) {
      const chunk = this.chunks.shift()!;
      const used = Math.min(bytes - filled, chunk.length);
      out.set(chunk.subarray(0, used), filled);
      filled += used;
      if (used < chunk.length) this.buffer = chunk.subarray(used);
    }
    this.buffered -= bytes;
    return out;
  }

  private take(bytes: number): void {
    this.buffer = this.buffer.subarray(bytes);
    this.buffered -= bytes;
  }
}

/** Puts each ndarray's bytes (its slice of the attachment) where the wire format has offset and nbytes. */
function attach(value: unknown, attachment: Uint8Array): void {
  if (typeof value !== 'object' || value === null) return;
  for (const item of Object.values(value)) attach(item, attachment);
  const array = (value as { ndarray?: { offset?: unknown; nbytes?: unknown; bytes?: Uint8Array } }).ndarray;
  if (array && typeof array.offset === 'number' && typeof array.nbytes === 'number') {
    if (array.offset + array.nbytes > attachment.length) throw new Error('an ndarray lies outside the attachment');
    array.bytes = attachment.subarray(array.offset, array.offset + array.nbytes);
    delete array.offset;
    delete array.nbytes;
  }
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

function spawnedTransport(settings: Settings, launch: LaunchOptions, module: string, args: string[]): Transport {
  const child: ResultPromise = startPython(settings, ['-u', '-m', module, ...args], {
    ...launch,
    stdin: 'pipe',
    stdout: 'pipe',
    stderr: 'pipe',
    buffer: false,
    reject: false,
    cleanup: true,
  });
  let tail = '';
  // writing to a process that has died fails (EPIPE); its exit fails what is pending
  child.stdin?.on('error', () => {});
  child.stderr?.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-4000);
  });
  const ended = child.then(() => undefined);
  return {
    input: child.stdout!,
    output: child.stdin!,
    pid: child.pid,
    kill: () => child.kill('SIGKILL'),
    ended,
    finished: Promise.race([ended, new Promise((resolve) => child.stdout!.once('end', resolve))]),
    stderrTail: () => tail,
  };
}

function forkedTransport(socket: Socket, pid: number, template: PythonWorker): Transport {
  // A worker that dies with a request still unread in its socket (one sent ahead, local-pool.ts) resets
  // the connection: the reset is no crash of ours; the socket's close, which follows, fails what is pending.
  socket.on('error', () => {});
  const closed = new Promise((resolve) => socket.once('close', resolve));
  return {
    input: socket,
    output: socket,
    pid,
    kill: () => {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
      socket.destroy();
    },
    ended: closed,
    finished: closed,
    // A fork writes to its template's stderr.
    stderrTail: () => template.stderrTail(),
  };
}

export class PythonWorker {
  private readonly transport: Transport;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private exited = false;
  private forks = 0;
  private socketDir?: string;
  /** This worker's hello, once its pool has checked it against the numerical profile. */
  admitted?: HelloResult;
  /** The isolation key of the records this worker has run (see RecordRequest.isolation). */
  isolation?: string;

  /** A spawned process of the settings' runtime running `module` (default the worker, workflows/worker.py). */
  static spawn(settings: Settings, launch: LaunchOptions = {}, module = 'workflows.worker', args: string[] = []): PythonWorker {
    return new PythonWorker(spawnedTransport(settings, launch, module, args));
  }

  private constructor(transport: Transport) {
    this.transport = transport;
    const framer = new ResponseFramer((json, attachment, line) => this.onResponse(json, attachment, line));
    transport.input.on('data', (chunk: Buffer) => {
      try {
        framer.push(chunk);
      } catch {
        this.protocolError(chunk.subarray(0, 200).toString('utf8'));
      }
    });
    void transport.ended.then(() => this.onExit());
  }

  get pid(): number | undefined {
    return this.transport.pid;
  }

  get alive(): boolean {
    return !this.exited;
  }

  stderrTail(): string {
    return this.transport.stderrTail();
  }

  private protocolError(text: string): void {
    this.failAll(new WorkerCrash(`worker sent an invalid protocol line: ${text.slice(0, 200)}`));
    this.kill();
  }

  private onResponse(json: unknown, attachment: Uint8Array, line: string): void {
    let parsed: z.infer<typeof Response>;
    try {
      parsed = Response.parse(json);
      if (parsed.ok) attach(parsed.result, attachment);
    } catch {
      this.protocolError(line);
      return;
    }
    const pending = parsed.id === null ? undefined : this.pending.get(parsed.id);
    if (!pending) return;
    this.pending.delete(parsed.id!);
    if (parsed.ok) pending.resolve(parsed.result);
    else pending.reject(new WorkerError(parsed.error.type, parsed.error.message, parsed.error.traceback));
  }

  private onExit(): void {
    this.exited = true;
    const tail = this.stderrTail().trim().split('\n').slice(-5).join('\n');
    this.failAll(new WorkerCrash(`worker process exited${tail ? `:\n${tail}` : ''}`));
  }

  private failAll(error: Error): void {
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
  }

  private request<T>(schema: z.ZodType<T>, body: Request): Promise<T> {
    if (this.exited) return Promise.reject(new WorkerCrash('worker process is not running'));
    const id = this.nextId++;
    const line = `${JSON.stringify({ id, ...Request.parse(body) })}\n`;
    return new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.transport.output.write(line);
    }).then((result) => schema.parse(result));
  }

  hello(): Promise<HelloResult> {
    return this.request(HelloResult, { op: 'hello' });
  }

  run(
    family: FamilyName,
    input: InputFiles,
    mask: string,
    options: { reuseSharedStage?: boolean; timeoutSeconds?: number } = {},
  ): Promise<RunResult> {
    return this.request(RunResult, {
      op: 'run',
      family,
      folder: input.folder,
      files: { ...input.files },
      mask,
      reuse_shared_stage: options.reuseSharedStage ?? false,
      ...(options.timeoutSeconds ? { timeout_seconds: options.timeoutSeconds } : {}),
    });
  }

  truth(family: FamilyName, input: InputFiles, options: { timeoutSeconds?: number } = {}): Promise<TruthResult> {
    return this.request(TruthResult, {
      op: 'truth',
      family,
      folder: input.folder,
      files: { ...input.files },
      ...(options.timeoutSeconds ? { timeout_seconds: options.timeoutSeconds } : {}),
    });
  }

  /** Any other operation of the process (the Dask bridge's), its result checked by `schema`. */
  call<T>(schema: z.ZodType<T>, body: Request): Promise<T> {
    return this.request(schema, body);
  }

  prepare(recipe: string, params: unknown, raw: Record<string, string>, out: string): Promise<Record<string, unknown>> {
    return this.request(PrepareResult, { op: 'prepare', recipe, params, raw, out });
  }

  /**
   * A fresh worker forked from this one (a template), connected over a Unix socket in a private
   * temporary folder. Fails with WorkerCrash when the template is gone or the fork does not connect.
   */
  async fork(): Promise<PythonWorker> {
    this.socketDir ??= mkdtempSync(join(tmpdir(), 'wwref-fork-'));
    const address = join(this.socketDir, `${++this.forks}.sock`);
    const server: Server = createServer();
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(address, resolve));
      const connected = new Promise<Socket>((resolve, reject) => {
        server.once('connection', resolve);
        timer = setTimeout(
          () => reject(new WorkerCrash(`a forked worker did not connect within ${HELLO_TIMEOUT_SECONDS} s`)),
          HELLO_TIMEOUT_SECONDS * 1000,
        );
      });
      const { pid } = await this.request(ForkResult, { op: 'fork', socket: address });
      const socket = await connected;
      return new PythonWorker(forkedTransport(socket, pid, this));
    } finally {
      clearTimeout(timer);
      server.close();
      rmSync(address, { force: true });
    }
  }

  /** Hard stop (used for timeouts): the pending request fails with WorkerCrash. */
  kill(): void {
    if (!this.exited) this.transport.kill();
  }

  async close(): Promise<void> {
    if (!this.exited) {
      this.transport.output.end(`${JSON.stringify({ id: 0, op: 'shutdown' })}\n`);
      const timer = setTimeout(() => this.kill(), SHUTDOWN_GRACE_SECONDS * 1000);
      await this.transport.finished;
      clearTimeout(timer);
    }
    if (this.socketDir) rmSync(this.socketDir, { recursive: true, force: true });
  }
}
