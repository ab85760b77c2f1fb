// The benchmark's calculation environment, checked against the published calculations: every call of
// the published agent episodes (../shared/published/agent-episodes/), run unchanged by the native
// engine on the evidence it saw (rebuilt from the episode's artifacts and confirmed by the receipt's
// evidence hash), must return the published return code and print the published stdout byte for byte.
// Read at test time; nothing published is pasted here. Real sandbox, real pinned runtime.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { calculationEngine } from '../../pipelines/evaluation/calculations.ts';
import { runCalculation } from '../../pipelines/evaluation/sandbox/calculation.ts';
import type { Engine } from '../../pipelines/evaluation/sandbox/engines.ts';
import { sandboxAvailable } from '../../pipelines/evaluation/sandbox/isolation.ts';

// WWREF_AGENT_EPISODES names another folder of published episodes in the same layout (the public corpus has more)
const EPISODES = process.env.WWREF_AGENT_EPISODES ?? join(ROOT, '..', 'shared', 'published', 'agent-episodes');
const PYTHON = join(ROOT, '.venv', 'bin', 'python');
const SKIP = !existsSync(EPISODES)
  ? `the published agent episodes are not beside the checkout (${EPISODES})`
  : !sandboxAvailable().available
    ? `no sandbox here: ${sandboxAvailable().reason}`
    : !existsSync(PYTHON)
      ? 'the pinned runtime (.venv) is not set up: npm run setup'
      : null;
const episodes = SKIP ? [] : readdirSync(EPISODES).filter((name) => existsSync(join(EPISODES, name, 'calculation_order.json')));

/** What the benchmark's environment held otherwise than wwref's: its helpers' source, its working folder's files. */
const READS_DIFFERENT = /open\([^)]*wwb_helpers\.py|getsource|listdir|glob/;
/** NumPy's random generator used without a seed. */
const unseeded = (code: string) => /np\.random\.\w+\(/.test(code) && !/np\.random\.seed\(|default_rng\(\s*\d|RandomState\(\s*\d/.test(code);

interface PublishedCall {
  call: number;
  id: string;
  evidence: Record<string, unknown> | null;
  code: string;
  receipt: { returncode: number; stdout: string; stderr: string; timed_out: boolean };
}

let engine: Engine;
beforeAll(async () => {
  if (!SKIP) engine = await calculationEngine(loadSettings(), 'native');
});

describe.skipIf(SKIP !== null)(`published calculations in the native engine${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  it.each(episodes)(
    '%s: every call returns the published code and prints the published stdout',
    async (episode) => {
      const rebuilt = await execa(PYTHON, [join(ROOT, 'test', 'support', 'published_evidence.py'), join(EPISODES, episode)]);
      const calls = rebuilt.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as PublishedCall);
      expect(calls.length).toBeGreaterThan(0);
      const differing: string[] = [];
      let compared = 0;
      for (const published of calls) {
        // the receipt's evidence hash confirms what the call saw
        expect(published.evidence, `call ${published.call}: no evidence hashes to its receipt's`).not.toBeNull();
        const receipt = await runCalculation({ code: published.code, evidence: JSON.stringify(published.evidence), engine });
        // a call the supervisor killed is 137 in the benchmark's receipt (SIGKILL), as calculate_python reports it
        expect(receipt.returnCode ?? 137, `call ${published.call}: ${receipt.stderr}`).toBe(published.receipt.returncode);
        // a call that prints the helpers' own source prints ours (written here, not the benchmark's), one
        // that lists the working folder finds wwref's files there, not the benchmark's entry scripts, and
        // one that draws from NumPy's generator unseeded drew other numbers there
        const readsHostFiles = READS_DIFFERENT.test(published.code) || unseeded(published.code);
        if (!readsHostFiles && receipt.stdout !== published.receipt.stdout) differing.push(`call ${published.call} (${published.id})`);
        compared += readsHostFiles ? 0 : 1;
      }
      expect(differing).toEqual([]);
      expect(compared).toBeGreaterThan(calls.length / 2); // the exemptions are the exception
    },
    300_000,
  );
});
