// The published agent episodes replayed through MCP as an agent would: an episode of the same condition
// and budget served by `wwref serve`, the published purchases made with `observe` and every published
// calculation sent unchanged to `calculate_python` at the point of the episode where it was made, then
// the published submission. Each call must return the published code, and print the published stdout
// byte for byte unless it reads what wwref's evidence holds differently (the task view, the session's
// seconds, the benchmark's own files); the estimator submission must equal the published table bit for
// bit. Read from ../shared/ at test time; nothing published is pasted here.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { sandboxAvailable } from '../../pipelines/evaluation/sandbox/isolation.ts';
import { BIN, cliInProcess } from '../support/cli.ts';

// WWREF_AGENT_EPISODES names another folder of published episodes in the same layout (the public corpus has more)
const EPISODES = process.env.WWREF_AGENT_EPISODES ?? join(ROOT, '..', 'shared', 'published', 'agent-episodes');
const SKIP = !existsSync(EPISODES)
  ? `the published agent episodes are not beside the checkout (${EPISODES})`
  : !sandboxAvailable().available
    ? `no sandbox here: ${sandboxAvailable().reason}`
    : !existsSync(join(ROOT, '.venv', 'bin', 'python'))
      ? 'the pinned runtime (.venv) is not set up: npm run setup'
      : null;
const episodes = SKIP ? [] : readdirSync(EPISODES).filter((name) => existsSync(join(EPISODES, name, 'calculation_order.json')));
const dir = mkdtempSync(join(tmpdir(), 'wwref-published-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `added_graph_adjnoun__d6_b32_r0` → condition `graph_adjnoun__d6`, budget 32. */
function nameParts(name: string): { condition: string; budget: number } {
  const match = /^(?:added_)?(.+)_b(\d+)_r\d+$/.exec(name);
  if (!match) throw new Error(`an episode folder name we cannot read: ${name}`);
  return { condition: match[1]!, budget: Number(match[2]) };
}

const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
/**
 * What wwref's evidence holds otherwise than the benchmark's did (its task view, its session's seconds, the
 * benchmark's own files and helpers' source), and NumPy's generator drawn without a seed.
 */
const READS_DIFFERENT = /\btask\b|session_seconds|listdir|glob|wwb_helpers\.py|getsource|evidence\.json|sha256/;
const unseeded = (code: string) => /np\.random\.\w+\(/.test(code) && !/np\.random\.seed\(|default_rng\(\s*\d|RandomState\(\s*\d/.test(code);

describe.skipIf(SKIP !== null)(`published agent episodes replayed over MCP${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  it.each(episodes)(
    '%s: the purchases, every calculation at its point, and the submission',
    async (name) => {
      const folder = join(EPISODES, name);
      const { condition, budget } = nameParts(name);
      const ep = join(dir, name);
      const started = await cliInProcess(
        ['episode', 'start', '--episode', ep, '--condition', condition, '--budget', String(budget), '--session-seconds', '1800'],
        ROOT,
      );
      expect(started.code, started.stderr).toBe(0);
      const order: string[] = readJson(join(folder, 'calculation_order.json'));
      const events = readFileSync(join(folder, 'events.jsonl'), 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l));
      const client = new Client({ name: 'published-agent', version: '1.0.0' });
      await client.connect(new StdioClientTransport({ command: 'node', args: [BIN, 'serve', '--episode', ep], cwd: ROOT, stderr: 'pipe' }));
      const differing: string[] = [];
      let compared = 0;
      try {
        for (const event of events) {
          if (event.event === 'observe') {
            const r = (await client.callTool({ name: 'observe', arguments: { masks: event.masks } })) as {
              isError?: boolean;
              content: { text: string }[];
            };
            expect(r.isError, r.content[0]?.text).not.toBe(true);
          } else if (event.event === 'calculation') {
            const id = order[event.number - 1]!;
            const code = readFileSync(join(folder, 'calculations', id, 'code.py'), 'utf8');
            const published = readJson(join(folder, 'calculations', id, 'receipt.json'));
            const r = (await client.callTool({ name: 'calculate_python', arguments: { code } })) as unknown as {
              structuredContent: { returncode: number; stdout: string; stderr: string };
            };
            expect(r.structuredContent.returncode, `call ${event.number}: ${r.structuredContent.stderr}`).toBe(published.returncode);
            if (READS_DIFFERENT.test(code) || unseeded(code)) continue;
            compared++;
            if (r.structuredContent.stdout !== published.stdout) differing.push(`call ${event.number} (${id})`);
          } else if (event.event === 'submit') {
            const meta = readJson(join(folder, 'submission_metadata.json'));
            expect(meta.kind).toBe('agent_selected_public_helper');
            const r = (await client.callTool({ name: 'submit_diagnosis', arguments: { estimator: meta.estimator } })) as unknown as {
              structuredContent: { closed: boolean };
            };
            expect(r.structuredContent.closed).toBe(true);
          }
        }
      } finally {
        await client.close();
      }
      expect(differing).toEqual([]);
      expect(compared).toBeGreaterThan(0);
      // the estimator's table is the published submission, bit for bit (an episode that never submitted has none)
      if (!events.some((e) => e.event === 'submit')) return;
      const submit = readFileSync(join(ep, 'events.jsonl'), 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l))
        .find((e) => e.action === 'submit' && e.outcome === 'ok');
      expect(submit.prediction_table).toEqual(readJson(join(folder, 'submission.json')));
    },
    600_000,
  );
});
