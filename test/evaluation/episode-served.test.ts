// The multi-episode server under an agent that goes away or misbehaves (issue 40): a request admitted
// while the agent ran must commit nothing after `await server.remove(id)`; a killed estimator worker is
// restarted for the next submission; non-finite numbers are refused at the door with one line. Real
// server on a port of 127.0.0.1, the MCP SDK's client, the pinned worker, real files.
import { readFileSync, rmSync, mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { startControlsWorker } from '../../pipelines/evaluation/controls/worker.ts';
import { scoreEpisode, startEpisode } from '../../pipelines/evaluation/episode.ts';
import { type EpisodesServer, serveEpisodes } from '../../pipelines/evaluation/episodes-server.ts';
import { closeEstimatorWorker } from '../../pipelines/evaluation/estimator-submission.ts';
import { sandboxAvailable } from '../../pipelines/evaluation/sandbox/isolation.ts';
import { lockFolder } from '../../pipelines/references/lock.ts';
import { BIN } from '../support/cli.ts';
import { descendants } from '../support/processes.ts';
import { maskOf, writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-served-'));
const refs = join(dir, 'references');
const settings = loadSettings({}, process.env);
writeSurfaceCatalog(refs, [{ condition: 'toy', dimensions: 4, utility: (z, k) => 0.3 + 0.1 * z[0]! + 0.003 * k }]);

let server: EpisodesServer;
beforeAll(async () => {
  server = await serveEpisodes(settings, { host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await server.close();
  await closeEstimatorWorker();
  rmSync(dir, { recursive: true, force: true });
});

let count = 0;
/** A new episode served at its own endpoint; with its MCP client. */
async function served(
  engine: 'native' | 'pyodide' = 'pyodide',
): Promise<{ id: string; ep: string; client: Client; url: string; token: string }> {
  const id = `ep${++count}`;
  const ep = join(dir, id);
  await startEpisode(settings, { dir: ep, condition: 'toy', budget: 3, references: refs, engine });
  const endpoint = server.add(id, ep);
  const client = new Client({ name: 'served-test', version: '1.0.0' });
  const headers = { authorization: `Bearer ${endpoint.token}` };
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint.url), { requestInit: { headers } }));
  return { id, ep, client, url: endpoint.url, token: endpoint.token };
}
type Answer = { isError?: boolean; content: { text: string }[]; structuredContent?: any };
const callTool = (client: Client, name: string, args: Record<string, unknown>) =>
  client.callTool({ name, arguments: args }) as Promise<Answer>;
const logOf = (ep: string) => readFileSync(join(ep, 'events.jsonl'), 'utf8');
const events = (ep: string) =>
  logOf(ep)
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
/** Resolves once `check` holds (polled), or fails after `seconds`. */
async function until(check: () => boolean, seconds: number): Promise<void> {
  for (const end = Date.now() + seconds * 1000; !check(); await sleep(50)) if (Date.now() > end) throw new Error('never happened');
}

describe('an episode removed from the server while a request of its agent is in flight', () => {
  it('an observe admitted before the removal and waiting for the lock commits nothing: refused in one line, remove waits for it', async () => {
    const { id, ep, client } = await served();
    const release = await lockFolder(ep, 5);
    const pending = callTool(client, 'observe', { masks: ['0110'] });
    await sleep(1000); // admitted, waiting for the episode's lock
    let removed = false;
    const removal = Promise.resolve(server.remove(id)).then(() => (removed = true));
    await sleep(300);
    expect(removed).toBe(false); // it waits for the call admitted before
    release();
    await removal;
    const after = logOf(ep);
    const answer = await pending;
    expect([answer.isError, answer.content[0]!.text]).toEqual([
      true,
      'this episode is no longer served (its agent has ended): nothing was done',
    ]);
    await sleep(500);
    expect(logOf(ep)).toBe(after);
    expect(events(ep).filter((e) => e.action === 'observe')).toEqual([]);
    await client.close();
  });

  it.skipIf(!sandboxAvailable().available)(
    'a calculation running at the removal: remove resolves once its receipt is written, and nothing is written after',
    async () => {
      const { id, ep, client } = await served('native');
      const pending = callTool(client, 'calculate_python', { code: 'import time\ntime.sleep(2)\nprint("done")' });
      await until(() => events(ep).some((e) => e.action === 'calculate' && e.outcome === 'ok'), 30);
      await server.remove(id);
      const after = logOf(ep);
      expect(events(ep).at(-1)).toMatchObject({ kind: 'calculation', call: 1, receipt: { status: 'ok', stdout: 'done\n' } });
      expect((await pending).structuredContent.stdout).toBe('done\n');
      await sleep(300);
      expect(logOf(ep)).toBe(after);
      await client.close();
    },
  );
});

/** The pids of this process's controls' workers (the estimator submissions'). */
const estimatorWorkers = () => descendants(process.pid).filter((p) => p.command.includes('workflows.evaluation.worker'));

describe('the estimator worker killed', () => {
  it('the next submission by estimator starts a new one and is taken; so is every later one', async () => {
    const first = await served();
    const ok = await callTool(first.client, 'submit_diagnosis', { estimator: 'ridge_main' });
    expect([ok.isError, ok.structuredContent?.estimator?.name]).toEqual([undefined, 'ridge_main']);
    const workers = estimatorWorkers();
    expect(workers.length).toBeGreaterThan(0);
    for (const worker of workers) process.kill(worker.pid, 'SIGKILL');
    await until(() => estimatorWorkers().length === 0, 10);
    for (const estimator of ['ridge_pair', 'ridge_main']) {
      const next = await served();
      const answer = await callTool(next.client, 'submit_diagnosis', { estimator });
      expect([answer.isError ? answer.content[0]!.text : 'taken', answer.structuredContent?.estimator?.name]).toEqual(['taken', estimator]);
      expect(events(next.ep).at(-1)).toMatchObject({ action: 'submit', outcome: 'ok', estimator: { name: estimator } });
      await next.client.close();
    }
    await first.client.close();
  });
});

describe("a score given a controls' worker that died", () => {
  it('fits the shared estimators on a worker of its own, once: the same scores as on a live one', async () => {
    const { ep, client } = await served();
    await callTool(client, 'observe', { masks: ['0110', '1000'] });
    await callTool(client, 'submit_diagnosis', { estimator: 'ridge_main' });
    await client.close();
    const worker = await startControlsWorker(settings);
    const live = await scoreEpisode(settings, ep, { worker });
    worker.kill();
    await until(() => !worker.alive, 10);
    const after = await scoreEpisode(settings, ep, { worker });
    const shared = (s: object) =>
      ['shared_degree1_score', 'shared_degree2_score', 'shared_gp_score'].map((k) => (s as Record<string, unknown>)[k]);
    expect(shared(live).map((v) => typeof (v as { effect_recovery?: unknown })?.effect_recovery)).toEqual(['number', 'number', 'number']);
    expect(shared(after)).toEqual(shared(live));
  });
});

/** POSTs a raw JSON-RPC body (what a client that does not write JSON with the SDK sends) and reads the answer. */
const post = (url: string, token: string, body: string) =>
  new Promise<{ status: number; json: any }>((done, fail) => {
    const req = request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
      },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => done({ status: res.statusCode!, json: JSON.parse(text) }));
      },
    );
    req.on('error', fail);
    req.end(body);
  });

describe('non-finite numbers from an agent', () => {
  it('a prediction of 1e999, -1e999, NaN or Infinity, in the object or its text, is refused at the door with one line', async () => {
    const { ep, client, url, token } = await served();
    const table = (bad: string) => `{${Array.from({ length: 16 }, (_, k) => `"${maskOf(k, 4)}": ${k === 5 ? bad : 0.5}`).join(', ')}}`;
    const call = (id: number, args: string) =>
      `{"jsonrpc": "2.0", "id": ${id}, "method": "tools/call", "params": {"name": "submit_diagnosis", "arguments": ${args}}}`;
    let id = 0;
    for (const bad of ['1e999', '-1e999', 'NaN', 'Infinity']) {
      const why = bad.includes('e999') ? /1e999 is beyond the range of a float64/ : new RegExp(`${bad} is not a JSON number`);
      for (const args of [`{"predictions_json": ${table(bad)}}`, `{"predictions_json": ${JSON.stringify(table(bad))}}`]) {
        const answer = await post(url, token, call(++id, args));
        // a request whose id can be read (JSON.parse makes 1e999 Infinity; it has no NaN) gets a tool error;
        // one that is no JSON at all a parse error (400): both one line, never an internal error
        const readable = bad.includes('e999') || args.startsWith('{"predictions_json": "');
        const text: string = readable ? answer.json.result?.content[0].text : answer.json.error?.message;
        expect([answer.status, answer.json.id, readable ? answer.json.result?.isError : answer.json.error?.code]).toEqual(
          readable ? [200, id, true] : [400, null, -32700],
        );
        expect(text).toMatch(why);
        expect(text.split('\n')).toHaveLength(1);
      }
    }
    // the episode is still open and takes a finite table
    expect(events(ep).filter((e) => e.action === 'submit')).toEqual([]);
    const taken = await callTool(client, 'submit_diagnosis', { predictions_json: table('0.25') });
    expect(taken.isError).toBeUndefined();
    await client.close();
  });
});

describe('non-finite numbers over stdio', () => {
  it('a tool call with 1e999 is answered under its own id with a one-line tool error; NaN with a parse error; the next call is served', async () => {
    const { ep } = await served();
    const table = (bad: string) => `{${Array.from({ length: 16 }, (_, k) => `"${maskOf(k, 4)}": ${k === 5 ? bad : 0.5}`).join(', ')}}`;
    const submit = (id: number, bad: string) =>
      `{"jsonrpc": "2.0", "id": ${id}, "method": "tools/call", "params": {"name": "submit_diagnosis", "arguments": {"predictions_json": ${table(bad)}}}}`;
    const lines = [
      '{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}',
      '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
      submit(2, '1e999'),
      submit(3, 'NaN'),
      '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "status", "arguments": {}}}',
    ];
    const r = await execa('node', [BIN, 'serve', '--episode', ep], {
      cwd: ROOT,
      input: `${lines.join('\n')}\n`,
      reject: false,
      timeout: 60_000,
    });
    const answers = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const byId = (id: number | null) => answers.find((a) => a.id === id);
    expect(byId(2)).toMatchObject({
      result: { isError: true, content: [{ text: expect.stringMatching(/1e999 is beyond the range of a float64/) }] },
    });
    expect(byId(null)).toMatchObject({ error: { code: -32700, message: expect.stringMatching(/NaN is not a JSON number/) } });
    expect(byId(4)?.result?.structuredContent?.closed).toBe(false);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /); // no stack trace (a stale build's notice aside)
  });
});
