// A hostile agent against its own episode's integrity, through MCP with the real sandbox: padded
// calculations (bytes JSON writes as six) fill the events log toward its cap, and calculations sent at
// once. The episode must still close and score; calls of one episode run one at a time.
import { createHash } from 'node:crypto';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { EVENTS_MAX_BYTES } from '../../pipelines/evaluation/receipt.ts';
import { sandboxAvailable } from '../../pipelines/evaluation/sandbox/isolation.ts';
import { BIN, cliInProcess } from '../support/cli.ts';
import { writeSurfaceCatalog } from '../support/fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-integrity-'));
const refs = join(dir, 'references');
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeSurfaceCatalog(refs, [{ condition: 'toy', dimensions: 4, utility: (z, k) => 0.3 + 0.1 * z[0]! + 0.003 * k }]);

let count = 0;
async function startEpisode(extra: string[] = []): Promise<string> {
  const ep = join(dir, `ep${++count}`);
  const r = await cliInProcess(
    ['episode', 'start', '--episode', ep, '--condition', 'toy', '--budget', '2', '--references', refs, '--calls', '50', ...extra],
    ROOT,
  );
  expect(r.stderr).toBe('');
  return ep;
}
async function stdioClient(ep: string): Promise<Client> {
  const client = new Client({ name: 'hostile-agent', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: 'node', args: [BIN, 'serve', '--episode', ep], cwd: ROOT, stderr: 'pipe' }));
  return client;
}
const call = async (client: Client, name: string, args: Record<string, unknown> = {}) => {
  const r = (await client.callTool({ name, arguments: args })) as {
    isError?: boolean;
    content: { text: string }[];
    structuredContent?: any;
  };
  return { isError: r.isError === true, text: r.content[0]!.text, json: r.structuredContent };
};
const logBytes = (ep: string) => statSync(join(ep, 'events.jsonl')).size;
/** A line of a kind the log keeps without reading (later kinds change no state), leaving `left` bytes under the cap. */
function padLog(ep: string, left: number): void {
  const head = JSON.stringify({ kind: 'padding', at: new Date().toISOString(), x: '' });
  const want = EVENTS_MAX_BYTES - left - logBytes(ep);
  appendFileSync(join(ep, 'events.jsonl'), `${head.slice(0, -2)}${'x'.repeat(want - head.length - 1)}"}\n`);
  expect(logBytes(ep)).toBe(EVENTS_MAX_BYTES - left);
}
/** 64 KiB of NUL on each stream and code padded with control characters: about 6 bytes of log a byte. */
const PADDED = `import sys\nsys.stdout.write('\\x00' * 65536)\nsys.stderr.write('\\x00' * 65536)\n#${'\x01'.repeat(60000)}`;

describe.skipIf(!sandboxAvailable().available)('a hostile agent and its own episode', () => {
  it('padded calculations cannot fill the events log so that status, submit, end or score are refused', async () => {
    const ep = await startEpisode();
    const client = await stdioClient(ep);
    try {
      // one padded call: what it adds to the log
      const before = logBytes(ep);
      expect((await call(client, 'calculate_python', { code: PADDED })).json.status).toBe('ok');
      const perCall = logBytes(ep) - before;
      expect(perCall).toBeGreaterThan(1_100_000);
      // a log that one more such call would fill to within a few bytes
      padLog(ep, perCall + 40);
      const last = await call(client, 'calculate_python', { code: PADDED });
      expect(last.isError ? last.text : `call ${last.json.call} accepted`).toMatch(
        /^the events log has no room left for this calculate \(/,
      );
      const status = await call(client, 'status');
      expect(status.isError ? status.text : 'served').toBe('served');
      const submitted = await call(client, 'submit_diagnosis', { estimator: 'ridge_main' });
      expect(submitted.isError ? submitted.text : 'submitted').toBe('submitted');
    } finally {
      await client.close();
    }
    const score = await cliInProcess(['episode', 'score', '--episode', ep, '--no-shared'], ROOT);
    expect([score.code, score.stderr]).toEqual([0, '']);
    expect(JSON.parse(score.stdout)).toMatchObject({ delivered: true, calls_used: 1 });
    expect(logBytes(ep)).toBeLessThanOrEqual(EVENTS_MAX_BYTES);
    const lines = readFileSync(join(ep, 'events.jsonl'), 'utf8').trim().split('\n');
    expect(JSON.parse(lines.at(-1)!).kind).not.toBe('padding');
  });

  it('calculations sent at once run one at a time, in order: each reserved after the one before got its receipt', async () => {
    const ep = await startEpisode();
    const client = await stdioClient(ep);
    try {
      const results = await Promise.all([1, 2, 3].map((k) => call(client, 'calculate_python', { code: `print(${k})` })));
      expect(results.map((r) => r.json.status)).toEqual(['ok', 'ok', 'ok']);
    } finally {
      await client.close();
    }
    const order = readFileSync(join(ep, 'events.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((e) => e.kind === 'calculation' || e.action === 'calculate')
      .map((e) => `${e.kind === 'calculation' ? 'receipt' : 'reserve'} ${e.call}`);
    expect(order).toEqual(['reserve 1', 'receipt 1', 'reserve 2', 'receipt 2', 'reserve 3', 'receipt 3']);
  });

  it('episode verify refuses evidence rewritten with its hashes (an unbought utility put in it), naming the call', async () => {
    const ep = await startEpisode();
    const client = await stdioClient(ep);
    try {
      expect((await call(client, 'calculate_python', { code: 'print(1)' })).json.status).toBe('ok');
    } finally {
      await client.close();
    }
    const path = join(ep, 'events.jsonl');
    const events = readFileSync(path, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const reservation = events.find((e) => e.action === 'calculate' && e.outcome === 'ok');
    const evidence = JSON.parse(reservation.evidence);
    evidence.observations.push({ mask: '0110', utility: 0.5 });
    reservation.evidence = JSON.stringify(evidence);
    reservation.evidence_sha256 = createHash('sha256').update(reservation.evidence).digest('hex');
    events.find((e) => e.kind === 'calculation').receipt.evidenceSha256 = reservation.evidence_sha256;
    writeFileSync(path, events.map((e) => `${JSON.stringify(e)}\n`).join(''));
    const verified = await cliInProcess(['episode', 'verify', '--episode', ep], ROOT);
    expect([verified.code, verified.stderr.trim()]).toEqual([
      1,
      "calculation call 1 does not replay: the reserved evidence's observations are not the episode's at the reservation",
    ]);
  });

  it("a call reserved before the session's deadline is stopped by it, not by its own wall limit", async () => {
    const ep = await startEpisode(['--session-seconds', '6']);
    const client = await stdioClient(ep);
    try {
      // real time in the native engine (the default), past the deadline
      const r = await call(client, 'calculate_python', { code: 'import time\ntime.sleep(20)' });
      expect([r.json.status, r.json.detail]).toEqual(['timed_out', expect.stringMatching(/^over [1-6] wall seconds$/)]);
    } finally {
      await client.close();
    }
  });
});
