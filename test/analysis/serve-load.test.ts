// `wwref serve` under load and odd input: calls at once inside one server wait their turn (stdio
// pipelined, HTTP concurrent, a JSON-RPC batch in one POST, 2,000 pipelined reads), a client that sends without reading meets back-pressure instead of
// growing the server, and the smaller rules of the command line and of HTTP (one Host header,
// printable-ASCII tokens, ports in decimal).
import { readFileSync } from 'node:fs';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ResultPromise } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { BIN, cliInProcess } from '../support/cli.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';
import { startHttpServer } from '../support/serve.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-serve-load-'));
const refs = join(dir, 'references');
const servers: ResultPromise[] = [];
afterAll(async () => {
  for (const s of servers) s.kill('SIGKILL');
  await Promise.allSettled(servers);
  rmSync(dir, { recursive: true, force: true });
});
writeSurfaceCatalog(refs, [{ condition: 'wide', dimensions: 6, utility: (_z, k) => 0.1 + 0.01 * k }]);

let count = 0;
const startEpisode = async (budget: number) => {
  const ep = join(dir, `ep${++count}`);
  const r = await cliInProcess(
    ['episode', 'start', '--episode', ep, '--condition', 'wide', '--budget', String(budget), '--references', refs],
    ROOT,
  );
  expect(r.code, r.stderr).toBe(0);
  return ep;
};
type Called = { isError?: boolean; content: { type: string; text: string }[] };
const call = async (client: Client, name: string, args: Record<string, unknown> = {}) => {
  const r = (await client.callTool({ name, arguments: args })) as Called;
  return { isError: r.isError === true, text: r.content[0]!.text };
};
const events = (ep: string) =>
  readFileSync(join(ep, 'events.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

const httpServer = (ep: string) => startHttpServer(servers, ep);

/** 14 purchases at once on a budget of 10, then 300 statuses at once: 10 bought, 4 refused for the budget, nothing for the lock. */
async function manyAtOnce(client: Client, ep: string): Promise<void> {
  const buys = await Promise.all(Array.from({ length: 14 }, (_, k) => call(client, 'observe', { masks: [maskOf(k + 1, 6)] })));
  const refused = buys.filter((b) => b.isError).map((b) => b.text);
  expect(refused).toHaveLength(4);
  for (const text of refused) expect(text).toMatch(/needs 1 credit\(s\) for its new masks, 0 remain/);
  const reads = await Promise.all(Array.from({ length: 300 }, () => call(client, 'status')));
  expect(reads.filter((r) => r.isError)).toEqual([]);
  expect(JSON.parse(reads.at(-1)!.text).credits_remaining).toBe(0);
  const log = events(ep);
  expect(log.filter((e) => e.action === 'observe' && e.outcome === 'ok').flatMap((e) => e.new_masks)).toHaveLength(10);
  expect(log.filter((e) => e.action === 'observe' && e.outcome === 'refused')).toHaveLength(4); // every refusal in the receipt
  expect(log.filter((e) => e.action === 'status').reduce((n, e) => n + (e.calls ?? 1), 0)).toBe(300);
}

describe('calls at once inside one server wait their turn', () => {
  it('a JSON-RPC batch of 40 observe calls in one HTTP POST: served in order, none refused for the lock, every call in the receipt', async () => {
    const ep = await startEpisode(30);
    const url = new URL(await httpServer(ep));
    const batch = Array.from({ length: 40 }, (_, k) => ({
      jsonrpc: '2.0',
      id: k + 1,
      method: 'tools/call',
      params: { name: 'observe', arguments: { masks: [maskOf(k + 1, 6)] } },
    }));
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify(batch),
    });
    expect(response.status).toBe(200);
    const answers = (await response.json()) as { id: number; result: Called }[];
    expect(answers.map((a) => a.id).sort((a, b) => a - b)).toEqual(batch.map((b) => b.id));
    const byId = new Map(answers.map((a) => [a.id, a.result]));
    // one after the other, in the batch's order: the first 30 buy a credit each, the last 10 meet an empty budget
    for (let id = 1; id <= 40; id++) {
      const result = byId.get(id)!;
      if (id <= 30) {
        expect(result.isError, result.content[0]!.text).toBeFalsy();
        expect(JSON.parse(result.content[0]!.text)).toMatchObject({ credits_remaining: 30 - id, new_masks: [maskOf(id, 6)] });
      } else {
        expect(result.isError).toBe(true);
        expect(result.content[0]!.text).toMatch(/needs 1 credit\(s\) for its new masks, 0 remain/);
      }
    }
    // the receipt holds every call; its credits agree with the purchases and with the state
    const log = events(ep).filter((e) => e.action === 'observe');
    const bought = log.filter((e) => e.outcome === 'ok');
    expect(bought.flatMap((e) => e.new_masks)).toEqual(Array.from({ length: 30 }, (_, k) => maskOf(k + 1, 6)));
    for (const e of bought) expect(e.credits_before - e.credits_after).toBe(e.new_masks.length);
    expect(log.filter((e) => e.outcome === 'refused').reduce((n, e) => n + (e.calls ?? 1), 0)).toBe(10);
    const status = await cliInProcess(['episode', 'status', '--episode', ep], ROOT);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ budget: 30, credits_remaining: 0 });
  });

  it('over stdio, pipelined', async () => {
    const ep = await startEpisode(10);
    const client = new Client({ name: 'load', version: '1' });
    await client.connect(new StdioClientTransport({ command: 'node', args: [BIN, 'serve', '--episode', ep], cwd: ROOT, stderr: 'pipe' }));
    try {
      await manyAtOnce(client, ep);
    } finally {
      await client.close();
    }
  });

  it('over Streamable HTTP, concurrent requests', async () => {
    const ep = await startEpisode(10);
    const client = new Client({ name: 'load', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(await httpServer(ep))));
    try {
      await manyAtOnce(client, ep);
    } finally {
      await client.close();
    }
  });
});

/** The CPU ticks a process has used (utime + stime of /proc/PID/stat). */
const cpuTicks = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return Number(fields[11]) + Number(fields[12]);
};
const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe('2,000 pipelined read-only calls over stdio', () => {
  it('are all answered, none refused, in bounded memory, and counted in the receipt', async () => {
    const ep = await startEpisode(1);
    const child = spawn('node', [BIN, 'serve', '--episode', ep], { cwd: ROOT, stdio: ['pipe', 'pipe', 'ignore'] });
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    afterAll(() => void child.kill('SIGKILL'));
    const n = 2000;
    const answers = new Map<number, { result?: Called }>();
    let rest = '';
    const all = new Promise<void>((done) => {
      child.stdout.on('data', (chunk: Buffer) => {
        const lines = (rest + chunk.toString()).split('\n');
        rest = lines.pop()!;
        for (const line of lines) {
          const message = JSON.parse(line);
          answers.set(message.id, message);
        }
        if (answers.size === n + 1) done();
      });
    });
    let peak = 0;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, rssMiB(child.pid!));
      } catch {
        // the process has just ended
      }
    }, 100);
    const init = {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    };
    // everything written at once, without waiting for a single answer
    const calls = Array.from({ length: n }, (_, k) =>
      JSON.stringify({ jsonrpc: '2.0', id: k + 1, method: 'tools/call', params: { name: 'status', arguments: {} } }),
    );
    child.stdin.write(
      `${[JSON.stringify(init), JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), ...calls].join('\n')}\n`,
    );
    await all;
    clearInterval(sampler);
    for (let id = 1; id <= n; id++) {
      const result = answers.get(id)?.result;
      expect(result?.isError, `call ${id}: ${result?.content[0]?.text}`).toBeFalsy();
      expect(JSON.parse(result!.content[0]!.text)).toMatchObject({ credits_remaining: 1, closed: false });
    }
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(256);
    child.stdin.end();
    expect(await exited).toBe(0);
    // each call is in the receipt (identical notes counted on one line), and the receipt stays small
    const statuses = events(ep).filter((e) => e.action === 'status');
    expect(statuses.reduce((sum, e) => sum + (e.calls ?? 1), 0)).toBe(n);
    expect(statSync(join(ep, 'events.jsonl')).size).toBeLessThan(64 << 10);
  }, 120_000);
});

describe('a stdio client that sends without reading', () => {
  it('meets back-pressure: the server stops reading and idles, then answers everything once read', async () => {
    const ep = await startEpisode(1);
    // a plain child process: nothing reads its stdout until the test does
    const child = spawn('node', [BIN, 'serve', '--episode', ep], { cwd: ROOT, stdio: ['pipe', 'pipe', 'ignore'] });
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    child.stdout.pause();
    afterAll(() => void child.kill('SIGKILL')); // a failed assertion leaves no server behind
    const init = {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    };
    child.stdin!.write(`${JSON.stringify(init)}\n${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    // 250 task calls (each answer several KiB), padded with blanks to 4 KiB a line; stdout is not read
    const n = 250;
    const padding = ' '.repeat(4096);
    for (let id = 1; id <= n; id++)
      child.stdin!.write(`{${padding}"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"task","arguments":{}}}\n`);
    // wait until the server has stopped working (its CPU time unchanged for 2 s; at most 90 s)
    const pid = child.pid!;
    let last = -1;
    for (let waited = 0; waited < 90; waited += 2) {
      await sleep(2000);
      const ticks = cpuTicks(pid);
      if (ticks === last) break;
      last = ticks;
    }
    // it idles with input unread: it stopped reading, rather than reading everything into memory
    expect(child.stdin!.writableLength).toBeGreaterThan(0);
    expect(rssMiB(pid)).toBeLessThan(512);
    // once the client reads, every call is answered, once, in full
    const answered = new Map<number, unknown>();
    let rest = '';
    const all = new Promise<void>((done) => {
      child.stdout!.on('data', (chunk: Buffer) => {
        rest += chunk.toString();
        const lines = rest.split('\n');
        rest = lines.pop()!;
        for (const line of lines) {
          const message = JSON.parse(line);
          answered.set(message.id, message);
        }
        if (answered.size === n + 1) done();
      });
    });
    child.stdout.resume();
    await all;
    for (let id = 1; id <= n; id++) expect(answered.get(id), `answer ${id}`).toMatchObject({ result: { content: [{ type: 'text' }] } });
    child.stdin!.end();
    expect(await exited).toBe(0);
  }, 300_000);
});

describe('the smaller rules of serve', () => {
  it('two Host headers are refused (400), one is served', async () => {
    const ep = await startEpisode(1);
    const url = new URL(await httpServer(ep));
    const init = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    });
    const raw = (headers: string) =>
      new Promise<string>((done, fail) => {
        const socket = connect(Number(url.port), url.hostname);
        let text = '';
        socket.on('data', (c) => (text += c));
        socket.on('end', () => done(text));
        socket.on('error', fail);
        socket.end(
          `POST /mcp HTTP/1.1\r\n${headers}content-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: ${init.length}\r\n\r\n${init}`,
        );
      });
    expect(await raw(`host: ${url.host}\r\nhost: attacker.example\r\n`)).toMatch(/^HTTP\/1\.1 400 .*exactly one Host header is required/s);
    expect(await raw(`host: ${url.host}\r\n`)).toMatch(/^HTTP\/1\.1 200 .*wwref-episode/s);
  });

  it('ports in decimal digits only; a token of printable ASCII only', async () => {
    const ep = await startEpisode(1);
    for (const port of ['0x50', '', '8e1', ' 80', '-1', '65536']) {
      const r = await cliInProcess(['serve', '--episode', ep, '--http', port], ROOT);
      expect([r.code, r.stderr]).toEqual([
        2,
        expect.stringMatching(/^wwref: --http takes a port number from 0 to 65535 in decimal digits/),
      ]);
    }
    const token = join(dir, 'token');
    writeFileSync(token, 'jeton-très-secret-0123456789\n');
    const r = await cliInProcess(['serve', '--episode', ep, '--http', '0', '--token-file', token], ROOT);
    expect([r.code, r.stderr]).toEqual([2, expect.stringMatching(/printable ASCII characters, without spaces\n$/)]);
  });
});
