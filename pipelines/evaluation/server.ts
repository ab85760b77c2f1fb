// `wwref serve --episode DIR`: one episode served to an agent as an MCP server (the official
// TypeScript SDK), over stdio or Streamable HTTP, every message read as strict JSON. The agent's tools
// are the benchmark's (tools.ts: `observe`, `calculate_python`, `submit_diagnosis`, and the read-only
// `task` and `status`), each one episode action (episode.ts: under the folder's lock, so two clients
// never overspend); its prompt `episode` (prompt.ts) gives the instructions. No tool returns a
// reference value beyond the anchors and purchases, a path of this machine, or a score: scoring is
// `wwref episode score`.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import { UserError } from '../core/errors.ts';
import type { Settings } from '../core/settings.ts';
import { type Json, parseStrictJson } from '../analysis/strict-json.ts';
import { fixedAtStart, whileServed } from './episode.ts';
import { closeEstimatorWorker } from './estimator-submission.ts';
import { episodePrompt } from './prompt.ts';
import { sandboxAvailable } from './sandbox/isolation.ts';
import { ENVIRONMENT, registerEpisodeTools, type ToolResult } from './tools.ts';

const VERSION = '0.1.0';
/** A request body larger than this is refused (a 64-mask submission is about 3 KiB). */
const MAX_BODY_BYTES = 1 << 20;
export const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** `paths` and, for those reached through a symbolic link, their real paths too: longest first, so a folder's own name goes first. */
function hostPaths(paths: string[]): string[] {
  const real = paths.flatMap((path) => {
    try {
      return [realpathSync(path)];
    } catch {
      return []; // not there (yet): nothing to resolve
    }
  });
  return [...new Set([...paths, ...real])].filter((p) => p.length > 1).sort((a, b) => b.length - a.length);
}

/**
 * An episode served among others (episodes-server.ts): once `signal` is aborted its tools and prompt
 * are refused and its actions commit nothing more; `track` is given every call that runs, so that the
 * server can wait for them.
 */
export interface Served {
  signal: AbortSignal;
  track: (running: Promise<unknown>) => void;
}

/** `body` run as a call of a served episode (refused, one line, once the episode is no longer served). */
function servedCall<T>(served: Served | undefined, body: () => Promise<T>): Promise<T> {
  if (!served) return body();
  if (served.signal.aborted) return Promise.reject(new UserError('this episode is no longer served (its agent has ended)'));
  const running = whileServed(served.signal, body);
  served.track(running);
  return running;
}

/** The episode's MCP server: its tools (tools.ts) and its prompt (prompt.ts), with host paths masked in every refusal. */
export function episodeServer(settings: Settings, dir: string, options: { prompt?: string; served?: Served } = {}): McpServer {
  const folder = resolve(dir);
  const { references, engine } = fixedAtStart(folder);
  const hidden = hostPaths([folder, references, ...Object.values(settings.paths)]);
  const masked = (message: string) => hidden.reduce((m, path) => m.replaceAll(path, '<host folder>'), message);
  const tool = async (body: () => Promise<object>): Promise<ToolResult> => {
    try {
      const result = (await servedCall(options.served, body)) as Record<string, unknown>;
      return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
    } catch (error) {
      const message = error instanceof UserError ? masked(error.message) : 'internal error of the evaluator';
      return { isError: true, content: [{ type: 'text', text: message }] };
    }
  };
  const sandbox = sandboxAvailable();
  const server = new McpServer(
    { name: 'wwref-episode', version: VERSION },
    {
      instructions:
        'A budgeted WhatWorkedBench episode: the prompt `episode` (prompts/get) gives the full instructions. Read `task`, ' +
        'buy measurements with `observe` (new distinct masks cost one credit; repeats are free), then `submit_diagnosis` ' +
        'a predicted utility for every mask, or the name of a public helper the evaluator fits on your observations. ' +
        'Submission closes the episode. `status` shows credits, calculation calls and session time left. ' +
        (sandbox.available
          ? `\`calculate_python\` runs Python (${ENVIRONMENT[engine]}) on the evidence, a limited number of times.`
          : `No \`calculate_python\` tool: calculations need an OS sandbox this machine cannot make (${sandbox.reason}).`),
    },
  );
  registerEpisodeTools({ settings, folder, engine, sandbox, tool }, server);
  server.registerPrompt(
    'episode',
    {
      title: 'Episode instructions',
      description: "The episode's full instructions: objective, limits, helpers, submission, free observations, task.",
    },
    async () => {
      try {
        const text = await servedCall(options.served, () => episodePrompt(settings, folder, options.prompt));
        return { messages: [{ role: 'user', content: { type: 'text', text } }] };
      } catch (error) {
        throw new Error(error instanceof UserError ? masked(error.message) : 'internal error of the evaluator');
      }
    },
  );
  return server;
}

/** Requests handled at once over stdio; more wait, unread, in the pipe (back-pressure on the client). */
const MAX_IN_FLIGHT = 16;
/** Answers written but not yet taken by the client: past this, stdin is not read until they drain. */
const MAX_UNSENT_BYTES = 256 << 10;

/**
 * The stdio transport of MCP (one JSON-RPC message per line, both ways), reading each message as
 * strict JSON: one that is not (a repeated key, NaN, …) or is no JSON-RPC message is answered with
 * an error and not handled. Bounded whatever the client does: at most MAX_IN_FLIGHT requests are
 * handled at once and at most MAX_UNSENT_BYTES of answers wait for the client; past either, stdin
 * is paused (the lines already read wait in order), so a client that sends without reading stalls
 * itself, not the server's memory.
 */
class StrictStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private pending = '';
  /** Complete lines read but not yet handled (at most one chunk's worth: stdin is paused meanwhile). */
  private lines: string[] = [];
  /** The rest of an over-long line is being discarded, up to the next newline. */
  private discarding = false;
  private closed = false;
  private ended = false;
  /** The ids of requests read and not yet answered (a request the client cancels is no longer waited for). */
  private readonly inFlight = new Set<string | number>();
  /** Answers waiting for stdout to drain. */
  private readonly waiters: (() => void)[] = [];

  private readonly onData = (chunk: string) => {
    let text = chunk;
    if (this.discarding) {
      const end = text.indexOf('\n');
      if (end < 0) return;
      this.discarding = false;
      text = text.slice(end + 1);
    }
    this.pending += text;
    for (let end = this.pending.indexOf('\n'); end >= 0; end = this.pending.indexOf('\n')) {
      const line = this.pending.slice(0, end).replace(/\r$/, '');
      this.pending = this.pending.slice(end + 1);
      if (Buffer.byteLength(line) > MAX_BODY_BYTES) this.lines.push('\0over');
      else if (line.trim() !== '') this.lines.push(line);
    }
    if (Buffer.byteLength(this.pending) > MAX_BODY_BYTES) {
      // one refusal for the line; what follows of it, up to the next newline, is dropped unread
      this.pending = '';
      this.discarding = true;
      this.lines.push('\0over');
    }
    this.pump();
  };

  /** Handles waiting lines while the bounds allow; pauses stdin while they do not. */
  private readonly pump = () => {
    while (this.lines.length && !this.closed && this.inFlight.size < MAX_IN_FLIGHT && process.stdout.writableLength < MAX_UNSENT_BYTES) {
      const line = this.lines.shift()!;
      if (line === '\0over') this.refuse(-32600, `message over ${MAX_BODY_BYTES} bytes`);
      else this.receive(line);
    }
    const full = this.lines.length > 0 || this.inFlight.size >= MAX_IN_FLIGHT || process.stdout.writableLength >= MAX_UNSENT_BYTES;
    if (full) process.stdin.pause();
    else if (!this.closed) process.stdin.resume();
    if (this.ended && !this.lines.length && !this.inFlight.size) void this.close();
  };

  private readonly onDrain = () => {
    for (const done of this.waiters.splice(0)) done();
    this.pump();
  };

  // the end of input closes the server once every request read has been answered
  private readonly onEnd = () => {
    this.ended = true;
    this.pump();
  };

  async start(): Promise<void> {
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', this.onData);
    process.stdin.once('end', this.onEnd);
    process.stdout.on('drain', this.onDrain);
  }

  private refuse(code: number, message: string): void {
    process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } })}\n`);
  }

  private receive(line: string): void {
    let json: Json;
    try {
      json = parseStrictJson(line, 'the message');
    } catch (error) {
      process.stdout.write(`${JSON.stringify(refusalOf(line, (error as Error).message))}\n`);
      return;
    }
    const message = JSONRPCMessageSchema.safeParse(json);
    if (!message.success) {
      this.refuse(-32600, 'not a JSON-RPC message');
      return;
    }
    const data = message.data;
    if ('method' in data && 'id' in data) this.inFlight.add(data.id); // a request: answered once by send()
    if ('method' in data && data.method === 'notifications/cancelled' && !('id' in data)) {
      const id = (data.params as { requestId?: unknown } | undefined)?.requestId;
      if (typeof id === 'string' || typeof id === 'number') this.inFlight.delete(id); // cancelled: no answer will come
    }
    this.onmessage?.(data);
  }

  send(message: JSONRPCMessage): Promise<void> {
    // an answer: its request is no longer in flight
    if (!('method' in message) && 'id' in message && message.id !== undefined) this.inFlight.delete(message.id);
    return new Promise((done) => {
      const flushed = process.stdout.write(`${JSON.stringify(message)}\n`);
      this.pump();
      if (flushed) done();
      else this.waiters.push(done);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    process.stdin.off('data', this.onData);
    process.stdin.off('end', this.onEnd);
    process.stdout.off('drain', this.onDrain);
    process.stdin.pause();
    this.onclose?.();
  }
}

/** Serves the episode over stdin/stdout until the client closes it. */
export async function serveStdio(settings: Settings, dir: string, options: { prompt?: string } = {}): Promise<void> {
  const server = episodeServer(settings, dir, options);
  const transport = new StrictStdioTransport();
  const closed = new Promise<void>((done) => {
    transport.onclose = done;
  });
  await server.connect(transport);
  await closed;
  await server.close();
  await closeEstimatorWorker();
}

export interface HttpOptions {
  port: number;
  host: string;
  /** Required unless the host is a loopback address: every request must carry `Authorization: Bearer <token>`. */
  token?: string;
  /** A template replacing the prompt's text (prompt.ts). */
  prompt?: string;
}

/**
 * The answer to a message that is not strict JSON (NaN, 1e999, a key twice, …): when the lenient parser
 * still reads a request's id, an answer to that request, so that the client is not left waiting — to a
 * tool call a tool error, the one line where an agent looks; else a parse error without an id.
 */
export function refusalOf(text: string, message: string): { jsonrpc: '2.0'; id: string | number | null; [key: string]: unknown } {
  let loose: unknown;
  try {
    loose = JSON.parse(text);
  } catch {
    loose = undefined;
  }
  const request = loose !== null && typeof loose === 'object' && !Array.isArray(loose) ? (loose as Record<string, unknown>) : {};
  const id = request.id;
  // an id written twice is no id to answer under (JSON.parse keeps the last; a client may wait for the first)
  const once = text.split(/"(?:id|\\u0069d|i\\u0064|\\u0069\\u0064)"\s*:/i).length === 2;
  if (once && ((typeof id === 'string' && id.length <= 200) || (typeof id === 'number' && Number.isSafeInteger(id)))) {
    if (request.method === 'tools/call')
      return { jsonrpc: '2.0', id, result: { isError: true, content: [{ type: 'text', text: message }] } };
    return { jsonrpc: '2.0', id, error: { code: -32700, message } };
  }
  return { jsonrpc: '2.0', id: null, error: { code: -32700, message } };
}

export function reply(res: ServerResponse, status: number, message: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32600, message }, id: null }));
}

/** The body of `req`, or undefined when it is over MAX_BODY_BYTES: reading then stops (the caller answers 413 and closes). */
function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((done, fail) => {
    if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) {
      done(undefined);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else {
        req.off('data', onData);
        req.pause();
        done(undefined);
      }
    };
    req.on('data', onData);
    req.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
    req.on('error', fail);
  });
}

/** 413 with `Connection: close`; the connection is destroyed once the answer is written (the rest of the body is never read). */
function tooLarge(req: IncomingMessage, res: ServerResponse): void {
  res.shouldKeepAlive = false;
  res
    .writeHead(413, { 'content-type': 'application/json', connection: 'close' })
    .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32600, message: `request body over ${MAX_BODY_BYTES} bytes` }, id: null }), () =>
      req.destroy(),
    );
}

/** The port `http` listens on. */
const portOf = (http: Server) => (http.address() as AddressInfo).port;

/**
 * Whether a request may be served, answering it when not: exactly one Host header (Node keeps the first
 * of several: a second one is refused, not ignored), naming the loopback address when the server binds
 * one (no DNS rebinding), and the bearer token `expected` when there is one.
 */
export function admitRequest(req: IncomingMessage, res: ServerResponse, host: string, port: number, expected?: Buffer): boolean {
  const hosts = req.rawHeaders.filter((name, k) => k % 2 === 0 && name.toLowerCase() === 'host');
  if (hosts.length !== 1) {
    reply(res, 400, 'exactly one Host header is required');
    return false;
  }
  const named = req.headers.host ?? '';
  if (LOOPBACK.has(host) && ![`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`].includes(named)) {
    reply(res, 403, 'forbidden host');
    return false;
  }
  if (expected && !tokenMatches(req, expected)) {
    reply(res, 401, 'a valid bearer token is required');
    return false;
  }
  return true;
}

/** Whether the request carries `Authorization` equal to `expected` (compared in constant time). */
export function tokenMatches(req: IncomingMessage, expected: Buffer): boolean {
  const given = Buffer.from(req.headers.authorization ?? '');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Answers one MCP POST, stateless: its body (bounded, strict JSON) handled by a fresh server from
 * `serverFor` on a Streamable HTTP transport, closed with the response.
 */
export async function answerMcp(req: IncomingMessage, res: ServerResponse, serverFor: () => McpServer): Promise<void> {
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' }).end();
    return;
  }
  const text = await readBody(req);
  if (text === undefined) return tooLarge(req, res);
  let body: Json;
  try {
    body = parseStrictJson(text, 'the request');
  } catch (error) {
    const answer = refusalOf(text, (error as Error).message);
    res.writeHead(answer.id === null ? 400 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    return;
  }
  const server = serverFor();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

/** An answer for a request that failed in the evaluator (500), unless one was already sent. */
export function answerFailure(res: ServerResponse, error: unknown): void {
  if (!res.headersSent) reply(res, 500, error instanceof UserError ? 'the episode cannot be served' : 'internal error of the evaluator');
}

/** Listens on HOST:PORT (0: any free port), refusing with one line when it cannot. */
export async function listen(http: Server, host: string, port: number): Promise<number> {
  await new Promise<void>((done, fail) => {
    http.once('error', (error) =>
      fail(new UserError(`cannot listen on ${host}:${port}: ${(error as NodeJS.ErrnoException).code ?? error.message}`)),
    );
    http.listen(port, host, done);
  });
  return portOf(http);
}

/** The URL of `path` on a server bound to `host`. */
export const urlOf = (host: string, port: number, path: string) => `http://${host.includes(':') ? `[${host}]` : host}:${port}${path}`;

/**
 * Serves the episode over Streamable HTTP at http://HOST:PORT/mcp, stateless: each POST is handled
 * by a fresh server on the same episode folder. On a loopback host the Host header must name it (no
 * DNS rebinding); with a token every request must carry it. Bodies are read as strict JSON.
 */
export async function serveHttp(settings: Settings, dir: string, options: HttpOptions): Promise<{ server: Server; url: string }> {
  if (!LOOPBACK.has(options.host) && !options.token)
    throw new UserError(
      `serving on ${options.host}, beyond this machine, needs --token-file: every request must then carry the bearer token`,
    );
  episodeServer(settings, dir, options); // the episode is read before listening
  const expected = options.token ? Buffer.from(`Bearer ${options.token}`) : undefined;
  const http = createServer(async (req, res) => {
    try {
      if (!admitRequest(req, res, options.host, portOf(http), expected)) return;
      if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') return reply(res, 404, 'the MCP endpoint is /mcp');
      await answerMcp(req, res, () => episodeServer(settings, dir, options));
    } catch (error) {
      answerFailure(res, error);
    }
  });
  const port = await listen(http, options.host, options.port);
  return { server: http, url: urlOf(options.host, port, '/mcp') };
}
