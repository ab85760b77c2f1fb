// `wwref connect`, the stdio bridge to an episode's HTTP endpoint (a sandboxed cohort's
// WWREF_MCP_COMMAND), as a real process: the MCP SDK's stdio client over it against the real episodes
// server (JSON answers; requests at once) and against the SDK's own Streamable HTTP server answering
// in event streams; raw lines: a notification answered 202 writes nothing, stdin's end waits for the
// requests in flight; --url and --token-file for a client that gives its server no environment; a
// refused token, an unreachable endpoint, a missing variable, an unreadable token file: one line, exit 2.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { ROOT } from '../../pipelines/core/paths.ts';
import { startEpisode } from '../../pipelines/evaluation/episode.ts';
import { type EpisodesServer, serveEpisodes } from '../../pipelines/evaluation/episodes-server.ts';
import { BIN } from '../support/cli.ts';
import { currentSettings } from '../support/workspace.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-connect-'));
const settings = currentSettings();
let server: EpisodesServer;
let endpoint: { url: string; token: string };
beforeAll(async () => {
  const episode = join(dir, 'episode');
  await startEpisode(settings, { dir: episode, condition: 'wine', budget: 3 });
  server = await serveEpisodes(settings, { host: '127.0.0.1', port: 0 });
  endpoint = server.add('e', episode);
}, 120_000);
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An MCP client whose server is `wwref connect ARGS…` with `env` (none: the SDK's default few variables). */
async function stdioClient(env: Record<string, string> | undefined, args: string[] = []): Promise<Client> {
  const client = new Client({ name: 'bridge-test', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [BIN, 'connect', ...args],
      ...(env && { env }),
      cwd: ROOT,
      stderr: 'pipe',
    }),
  );
  return client;
}
const text = (result: unknown) => (result as { content: { text: string }[] }).content[0]!.text;
/** `wwref connect` fed `input` whole (stdin then closed). */
const bridge = (input: string, env: Record<string, string>, args: string[] = []) =>
  execa('node', [BIN, 'connect', ...args], {
    cwd: ROOT,
    input,
    env: { WWREF_MCP_URL: '', WWREF_MCP_TOKEN: '', ...env },
    extendEnv: true,
    reject: false,
  });
const rpc = (id: number | undefined, method: string, params: object = {}) =>
  JSON.stringify({ jsonrpc: '2.0', ...(id === undefined ? {} : { id }), method, params });
const INIT = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } };

describe('wwref connect', () => {
  it("the SDK's stdio client reaches the episode through it; requests at once are each answered", async () => {
    const client = await stdioClient({ WWREF_MCP_URL: endpoint.url, WWREF_MCP_TOKEN: endpoint.token });
    try {
      const [status, task, tools] = await Promise.all([
        client.callTool({ name: 'status', arguments: {} }),
        client.callTool({ name: 'task', arguments: {} }),
        client.listTools(),
      ]);
      expect(JSON.parse(text(status)).budget).toBe(3);
      expect(JSON.parse(text(task)).budget).toBe(3);
      expect(tools.tools.map((t) => t.name)).toEqual(expect.arrayContaining(['observe', 'submit_diagnosis', 'status']));
    } finally {
      await client.close();
    }
  }, 60_000);

  it('--url and --token-file: reached by a client that gives its server no environment; an unreadable token file is one line, exit 2', async () => {
    const file = join(dir, 'token');
    writeFileSync(file, `${endpoint.token}\n`, { mode: 0o600 });
    const client = await stdioClient(undefined, ['--url', endpoint.url, '--token-file', file]);
    try {
      expect(JSON.parse(text(await client.callTool({ name: 'status', arguments: {} }))).budget).toBe(3);
    } finally {
      await client.close();
    }
    const missing = await bridge(`${rpc(1, 'tools/list')}\n`, {}, ['--url', endpoint.url, '--token-file', join(dir, 'none')]);
    expect([missing.exitCode, String(missing.stderr).trim().split('\n')]).toEqual([
      2,
      [expect.stringMatching(/^wwref: connect: --token-file .*none cannot be read/)],
    ]);
  }, 60_000);

  it('writes nothing for a notification (202), waits at the end of stdin for what is in flight, exits 0', async () => {
    // the last over the server's bound: refused (413, id null), answered with its own id so its client does not wait
    const large = rpc(4, 'tools/call', { name: 'observe', arguments: { masks: ['x'.repeat(1_100_000)] } });
    const input = [
      rpc(1, 'initialize', INIT),
      rpc(undefined, 'notifications/initialized'),
      rpc(2, 'tools/call', { name: 'status', arguments: {} }),
      rpc(3, 'tools/list'),
      large,
    ].join('\n');
    const run = await bridge(`${input}\n`, { WWREF_MCP_URL: endpoint.url, WWREF_MCP_TOKEN: endpoint.token });
    expect([run.exitCode, run.stderr]).toEqual([0, '']);
    const answers = String(run.stdout)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: number; error?: { message: string } });
    expect(answers.map((a) => a.id).sort()).toEqual([1, 2, 3, 4]);
    expect(answers.find((a) => a.id === 4)!.error!.message).toMatch(/request body over|could not be sent/);
  }, 60_000);

  it('answers in event streams are written a line per message', async () => {
    // the SDK's own server, stateless, answering each POST as an event stream (no enableJsonResponse)
    const http = createServer(async (req, res) => {
      if (req.headers.authorization !== 'Bearer sse-token') return void res.writeHead(401).end();
      const mcp = new McpServer({ name: 'sse', version: '1.0.0' });
      mcp.registerTool('echo', { inputSchema: { said: z.string() } }, ({ said }) => ({
        content: [{ type: 'text', text: `echo ${said}` }],
      }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => void transport.close());
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((done) => http.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
    try {
      const client = await stdioClient({ WWREF_MCP_URL: url, WWREF_MCP_TOKEN: 'sse-token' });
      const said = await Promise.all(['a', 'b'].map((s) => client.callTool({ name: 'echo', arguments: { said: s } })));
      expect(said.map(text)).toEqual(['echo a', 'echo b']);
      await client.close();
    } finally {
      http.closeAllConnections();
      http.close();
    }
  }, 60_000);

  it('a refused token, an unreachable endpoint, a missing variable: one line, exit 2', async () => {
    const refused = await bridge(`${rpc(1, 'tools/list')}\n`, { WWREF_MCP_URL: endpoint.url, WWREF_MCP_TOKEN: 'not-the-token' });
    expect([refused.exitCode, String(refused.stdout), String(refused.stderr).trim().split('\n')]).toEqual([
      2,
      '',
      [expect.stringMatching(/^wwref: connect: the endpoint .* refused the token \(HTTP 401\)/)],
    ]);
    const closed = await serveEpisodes(settings, { host: '127.0.0.1', port: 0 });
    const gone = closed.add('g', join(dir, 'episode'));
    await closed.close(); // nothing listens there any more
    const unreachable = await bridge(`${rpc(1, 'tools/list')}\n`, { WWREF_MCP_URL: gone.url, WWREF_MCP_TOKEN: gone.token });
    expect([unreachable.exitCode, String(unreachable.stderr).trim().split('\n')]).toEqual([
      2,
      [expect.stringMatching(/^wwref: connect: the endpoint .* cannot be reached \(ECONNREFUSED\)/)],
    ]);
    const missing = await bridge(`${rpc(1, 'tools/list')}\n`, { WWREF_MCP_URL: endpoint.url });
    expect([missing.exitCode, String(missing.stderr).trim().split('\n')]).toEqual([
      2,
      [expect.stringContaining('WWREF_MCP_TOKEN is not set')],
    ]);
  }, 60_000);
});
