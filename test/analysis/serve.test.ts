// `wwref serve`: an episode driven by the MCP SDK's own client, over stdio and over Streamable HTTP
// (tools, a purchase, a submission, concurrent purchases, the bearer token, strict JSON), and the
// public task view holding no reference utility beyond the anchors and the purchases.
import { mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execa, type ResultPromise } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { sandboxAvailable } from '../../pipelines/evaluation/sandbox/isolation.ts';
import { BIN, cliInProcess } from '../support/cli.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';
import { startHttpServer } from '../support/serve.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-serve-'));
const refs = join(dir, 'references');
const servers: ResultPromise[] = [];
afterAll(async () => {
  for (const s of servers) s.kill('SIGTERM');
  await Promise.allSettled(servers);
  rmSync(dir, { recursive: true, force: true });
});

// distinctive utilities, so that a leaked one would be recognised in any view
const utility = (k: number) => 0.1234567 + 0.0471113 * k;
writeSurfaceCatalog(refs, [{ condition: 'toy', dimensions: 4, utility: (_z, k) => utility(k) }]);

let count = 0;
const startEpisode = async (budget: number, references = refs) => {
  const ep = join(dir, `ep${++count}`);
  const r = await cliInProcess(
    ['episode', 'start', '--episode', ep, '--condition', 'toy', '--budget', String(budget), '--references', references],
    ROOT,
  );
  expect(r.code).toBe(0);
  return ep;
};
type Called = { isError?: boolean; content: { type: string; text: string }[] };
const call = async (client: Client, name: string, args: Record<string, unknown> = {}) => {
  const r = (await client.callTool({ name, arguments: args })) as Called;
  return { isError: r.isError === true, text: r.content[0]!.text, json: r.isError ? undefined : JSON.parse(r.content[0]!.text) };
};
const numbers = (value: unknown): number[] =>
  typeof value === 'number'
    ? [value]
    : Array.isArray(value)
      ? value.flatMap(numbers)
      : value && typeof value === 'object'
        ? Object.values(value).flatMap(numbers)
        : [];
/** The tools: `calculate` where the OS sandbox can be made. */
const TOOLS = [...(sandboxAvailable().available ? ['calculate_python'] : []), 'observe', 'status', 'submit_diagnosis', 'task'];
const predictions = Object.fromEntries(Array.from({ length: 16 }, (_, k) => [maskOf(k, 4), 0.5]));

/** An MCP client (the SDK's own) connected to `wwref serve --episode EP` over stdio. */
async function stdioClient(ep: string): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: 'node', args: [BIN, 'serve', '--episode', ep], cwd: ROOT, stderr: 'pipe' }));
  return client;
}

/** Starts `wwref serve --http 0 …` and returns its URL. */
const httpServer = (ep: string, extra: string[] = []) => startHttpServer(servers, ep, extra);
const httpClient = async (url: string, headers: Record<string, string> = {}) => {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
};
const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; text: string }>((done, fail) => {
    const req = request(
      url,
      { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => done({ status: res.statusCode!, text }));
      },
    );
    req.on('error', fail);
    req.end(body);
  });

/** POSTs `body` (announced with Content-Length, or chunked) and resolves on the answer, whatever happens to the rest of the upload. */
const postLarge = (url: string, body: string, headers: Record<string, string>, chunked: boolean) =>
  new Promise<{ status: number; connection?: string; text: string }>((done, fail) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(chunked ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => done({ status: res.statusCode!, connection: res.headers.connection, text }));
        res.on('error', () => done({ status: res.statusCode!, connection: res.headers.connection, text }));
      },
    );
    req.on('error', fail);
    if (chunked) {
      for (let at = 0; at < body.length; at += 64 * 1024) req.write(body.slice(at, at + 64 * 1024));
      req.end();
    } else req.end(body);
  });

describe('serve over stdio', () => {
  it('lists the tools, shows the task without reference values beyond anchors and purchases, sells, takes a submission', async () => {
    const ep = await startEpisode(2);
    const client = await stdioClient(ep);
    try {
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(TOOLS);
      const secret = (observed: string[]) =>
        Array.from({ length: 16 }, (_, k) => k)
          .filter((k) => !observed.includes(maskOf(k, 4)))
          .map(utility);
      const task = await call(client, 'task');
      expect(task.json).toMatchObject({
        condition: 'toy',
        family: 'classification',
        dimensions: 4,
        factor_order: ['A', 'B', 'C', 'D'],
        budget: 2,
        credits_remaining: 2,
        closed: false,
      });
      expect(task.json.free_observations).toEqual([
        { mask: '0000', utility: utility(0) },
        { mask: '1111', utility: utility(15) },
      ]);
      expect(task.json.workflow_source).toContain('def ');
      expect(numbers(task.json).filter((x) => secret(['0000', '1111']).includes(x))).toEqual([]);
      for (const path of [dir, ROOT]) expect(task.text).not.toContain(path);

      const bought = await call(client, 'observe', { masks: ['0110', '0110', '0000'] });
      expect([bought.json.new_masks, bought.json.credits_remaining]).toEqual([['0110'], 1]);
      const after = await call(client, 'task');
      expect(after.json.observations.map((o: { mask: string }) => o.mask)).toEqual(['0000', '1111', '0110']);
      expect(numbers(after.json).filter((x) => secret(['0000', '1111', '0110']).includes(x))).toEqual([]);

      const over = await call(client, 'observe', { masks: ['0001', '0010'] });
      expect(over.isError).toBe(true);
      expect(over.text).toMatch(/refused whole, nothing spent/);
      const submitted = await call(client, 'submit_diagnosis', { predictions_json: predictions });
      expect(submitted.json.closed).toBe(true);
      const late = await call(client, 'observe', { masks: ['0001'] });
      expect([late.isError, late.text]).toEqual([true, expect.stringMatching(/the episode is closed/)]);
    } finally {
      await client.close();
    }
    // scoring stays on the evaluator's side
    const score = await cliInProcess(['episode', 'score', '--episode', ep], ROOT);
    expect(JSON.parse(score.stdout)).toMatchObject({
      observed: ['0000', '0110', '1111'],
      purchased: 1,
      selected_mask: '1111',
      exact_optimal_choice: true,
    });
    const actions = readFileSync(join(ep, 'events.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).action);
    expect(actions).toEqual(['start', 'task', 'observe', 'task', 'observe', 'submit', 'observe', 'score']);
  });

  it('masks host paths in refusals', async () => {
    const ep = await startEpisode(1);
    writeSurfaceCatalog(refs, [{ condition: 'toy', dimensions: 4, utility: (_z, k) => utility(k) + 0.5 }]);
    try {
      await expectMaskedRefusal(ep, [dir]);
    } finally {
      writeSurfaceCatalog(refs, [{ condition: 'toy', dimensions: 4, utility: (_z, k) => utility(k) }]);
    }
  });
});

/** `status` of an episode whose reference changed is refused, naming no host path in `hidden`. */
async function expectMaskedRefusal(ep: string, hidden: string[]): Promise<void> {
  const client = await stdioClient(ep);
  try {
    const r = await call(client, 'status');
    expect(r.isError).toBe(true);
    expect(r.text).toMatch(/in <host folder> changed since the episode started/);
    for (const path of hidden) expect(r.text).not.toContain(path);
  } finally {
    await client.close();
  }
}

describe('serve over stdio, paths reached through a link', () => {
  it('masks the real path of a reference folder reached through a symbolic link', async () => {
    const real = join(realpathSync(dir), 'real-references');
    writeSurfaceCatalog(real, [{ condition: 'toy', dimensions: 4, utility: (_z, k) => utility(k) }]);
    const link = join(dir, 'linked-references');
    symlinkSync(real, link);
    const ep = await startEpisode(1, link);
    writeSurfaceCatalog(real, [{ condition: 'toy', dimensions: 4, utility: (_z, k) => utility(k) + 0.5 }]);
    await expectMaskedRefusal(ep, [real, link, dir, realpathSync(dir)]);
  });
});

describe('serve, strict tool arguments', () => {
  it('follows the command line input rules: unknown arguments, a list, a table grade refuses, both or neither of predictions and estimator refused', async () => {
    const ep = await startEpisode(1);
    const client = await stdioClient(ep);
    try {
      const extra = await call(client, 'observe', { masks: ['0001'], budget: 99 });
      expect([extra.isError, extra.text]).toEqual([true, expect.stringMatching(/budget/)]);
      expect((await call(client, 'status', { verbose: true })).isError).toBe(true);
      expect((await call(client, 'submit_diagnosis', { predictions_json: predictions, note: 'x' })).isError).toBe(true);
      // `predictions_json` is a JSON object or the text of one; a list is refused, and so is the text of one
      const items = Array.from({ length: 16 }, (_, k) => ({ mask: maskOf(k, 4), utility: 0.5 }));
      expect((await call(client, 'submit_diagnosis', { predictions_json: items })).isError).toBe(true);
      expect((await call(client, 'submit_diagnosis', { predictions_json: JSON.stringify(items) })).isError).toBe(true);
      expect((await call(client, 'submit_diagnosis', { predictions_json: '{"0000": NaN}' })).isError).toBe(true);
      const short = await call(client, 'submit_diagnosis', { predictions_json: { '0000': 0.5 } });
      expect([short.isError, short.text]).toEqual([true, expect.stringMatching(/predictions/)]);
      const both = await call(client, 'submit_diagnosis', { predictions_json: predictions, estimator: 'ridge_main' });
      expect([both.isError, both.text]).toEqual([true, 'submit_diagnosis takes either `predictions_json` or `estimator`']);
      expect((await call(client, 'submit_diagnosis', {})).isError).toBe(true);
      expect((await call(client, 'submit_diagnosis', { estimator: 'gp' })).isError).toBe(true); // the benchmark's helpers only
      expect((await call(client, 'status')).json.closed).toBe(false);
      // an empty object beside an estimator is no table (what a form client such as the Inspector's sends for it)
      const taken = await call(client, 'submit_diagnosis', { predictions_json: {}, estimator: 'ridge_main' });
      expect([taken.isError, taken.json?.closed, taken.json?.estimator?.name]).toEqual([false, true, 'ridge_main']);
    } finally {
      await client.close();
    }
  });
});

/** `wwref serve --episode EP` over raw stdio, with the lines it has written so far. */
function rawServer(ep: string) {
  const child = execa('node', [BIN, 'serve', '--episode', ep], { cwd: ROOT, reject: false });
  servers.push(child);
  const lines: string[] = [];
  let rest = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    rest += chunk.toString();
    const parts = rest.split('\n');
    rest = parts.pop()!;
    lines.push(...parts.filter(Boolean));
  });
  return { child, lines };
}

describe('serve over stdio, strict JSON', () => {
  it('refuses an over-long line once and discards the rest of it up to the next newline', async () => {
    const ep = await startEpisode(1);
    const { child, lines } = rawServer(ep);
    const ping = (id: number) => `${JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' })}\n`;
    // 1.5 MiB without a newline, whose tail would be a message of its own if read as one
    child.stdin!.write(`${'x'.repeat(1536 * 1024)}`);
    child.stdin!.write(ping(5));
    child.stdin!.write(ping(6));
    await new Promise<void>((done) => {
      const check = () => (lines.some((l) => l.includes('"id":6')) ? done() : setTimeout(check, 50));
      check();
    });
    child.stdin!.end();
    const messages = lines.map((l) => JSON.parse(l));
    expect(messages).toEqual([
      { jsonrpc: '2.0', id: null, error: { code: -32600, message: expect.stringContaining('message over') } },
      { jsonrpc: '2.0', id: 6, result: {} },
    ]);
    expect((await child).exitCode).toBe(0);
  });

  it('answers a message that is not strict JSON with an error and handles the next one', async () => {
    const ep = await startEpisode(1);
    const { child, lines } = rawServer(ep);
    const waitFor = (n: number) =>
      new Promise<void>((done) => {
        const check = () => (lines.length >= n ? done() : setTimeout(check, 50));
        check();
      });
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    };
    child.stdin!.write(`${JSON.stringify(init).replace('"id":1', '"id":1,"id":7')}\n`);
    child.stdin!.write('{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"x": NaN}}\n');
    child.stdin!.write(`${JSON.stringify(init)}\n`);
    await waitFor(3);
    child.stdin!.end();
    const [dup, nan, ok] = lines.map((l) => JSON.parse(l));
    expect(dup.error).toMatchObject({ code: -32700, message: expect.stringContaining('duplicate key "id"') });
    expect(nan.error).toMatchObject({ code: -32700, message: expect.stringContaining('NaN is not a JSON number') });
    expect(ok).toMatchObject({ id: 1, result: { serverInfo: { name: 'wwref-episode' } } });
    expect((await child).exitCode).toBe(0);
  });
});

describe('serve over Streamable HTTP', () => {
  it('sells and takes a submission; two clients buying at once never exceed the budget', async () => {
    const ep = await startEpisode(3);
    const url = await httpServer(ep);
    const [a, b] = await Promise.all([httpClient(url), httpClient(url)]);
    try {
      expect((await a.listTools()).tools.map((t) => t.name).sort()).toEqual(TOOLS);
      const outcomes = await Promise.all([
        call(a, 'observe', { masks: ['0001', '0010'] }),
        call(b, 'observe', { masks: ['0100', '1000'] }),
      ]);
      expect(outcomes.map((o) => o.isError).sort()).toEqual([false, true]);
      const status = await call(b, 'status');
      expect(status.json.credits_remaining).toBe(1);
      expect(status.json.observations).toHaveLength(4);
      expect((await call(a, 'submit_diagnosis', { predictions_json: JSON.stringify(predictions) })).json.closed).toBe(true);
      expect((await call(b, 'submit_diagnosis', { predictions_json: predictions })).isError).toBe(true);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
    const state = JSON.parse(readFileSync(join(ep, 'episode.json'), 'utf8'));
    expect([state.credits_remaining, state.closed]).toEqual([1, true]);
  });

  it('refuses a foreign Host header, a missing or wrong bearer token, and a body that is not strict JSON', async () => {
    const ep = await startEpisode(1);
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'a-long-secret-token-0123456789\n');
    const url = await httpServer(ep, ['--token-file', tokenFile]);
    const init = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
    });
    expect((await post(url, init)).status).toBe(401);
    expect((await post(url, init, { authorization: 'Bearer wrong' })).status).toBe(401);
    const auth = { authorization: 'Bearer a-long-secret-token-0123456789' };
    expect((await post(url, init, { ...auth, host: 'attacker.example:80' })).status).toBe(403);
    // a body over 1 MiB: answered 413 with Connection: close, not a reset connection (announced or streamed)
    const big = `{"x": "${'y'.repeat(1100 * 1024)}"}`;
    for (const chunked of [false, true]) {
      const r = await postLarge(url, big, auth, chunked);
      expect([r.status, r.connection, r.text]).toEqual([413, 'close', expect.stringContaining('request body over 1048576 bytes')]);
    }
    const dup = await post(url, init.replace('"id":1', '"id":1,"id":2'), auth);
    expect([dup.status, dup.text]).toEqual([400, expect.stringContaining('duplicate key \\"id\\"')]);
    expect((await post(url, init, auth)).status).toBe(200);
    const client = await httpClient(url, auth);
    try {
      expect((await call(client, 'status')).json.credits_remaining).toBe(1);
    } finally {
      await client.close();
    }
    const open = await execa('node', [BIN, 'serve', '--episode', ep, '--http', '0', '--host', '0.0.0.0'], { cwd: ROOT, reject: false });
    expect(open.exitCode).toBe(2);
    expect(open.stderr).toMatch(/beyond this machine, needs --token-file/);
  });
});

describe('task', () => {
  it('prints the public view with the anchors only', async () => {
    const r = await cliInProcess(['task', '--condition', 'toy', '--references', refs], ROOT);
    expect(r.code).toBe(0);
    const view = JSON.parse(r.stdout);
    expect(view.free_observations.map((o: { mask: string }) => o.mask)).toEqual(['0000', '1111']);
    const hidden = Array.from({ length: 14 }, (_, k) => utility(k + 1));
    expect(numbers(view).filter((x) => hidden.includes(x))).toEqual([]);
    expect(view.budget).toBeUndefined();
  });
});
