// `cohort run --sandbox-agents` with real bwrap, real agent processes (test/support/sandboxed-agent.py
// in the example agents' environment), the real server and controls worker: the example agent
// sandboxed (its own network, the default) gives the design_degree2 controls' records; a hostile agent's
// attacks (the cohort's files, its episode, the controls, the references, other processes' tokens, a
// setsid child, the tmpfs; with the host's network shared) all fail and its lines are a well-behaved
// agent's; with its own network, an agent reaches no other port of the host, no other episode, no other
// address, no .venv, and its flood of connections keeps no sibling from delivering; the stdio bridge
// (`wwref connect`) under the Python SDK's stdio client given no environment; the sandboxes end with a
// cohort killed with -9; the settings are part of the definition; and the refusals (no bwrap, a working
// folder the sandbox hides, --sandbox-network misused) are one line, exit 2.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { type AddressInfo, createConnection, createServer } from 'node:net';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { hiddenFolders, pipCache, repositoryFolders } from '../../pipelines/evaluation/cohort/sandbox.ts';
import { currentSettings } from '../support/workspace.ts';
import { BIN } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-cohort-sandbox-'));
const PYTHON = 'examples/agents/.venv/bin/python';
const AGENT = `${PYTHON} test/support/sandboxed-agent.py`;
/** The first cohort: the example agent sandboxed, its controls computed (the others take them with --controls). */
const FIRST = join(dir, 'example');
const CONTROLS = join(FIRST, 'controls');
/** A process outside every sandbox holding a token in its environment (an agent must not find it). */
const DECOY = `decoy-${process.pid}-${Date.now()}`;
const decoy = spawn('sleep', ['120'], { env: { ...process.env, WWREF_MCP_TOKEN: DECOY }, stdio: 'ignore' });
afterAll(() => {
  decoy.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

beforeAll(async () => {
  await execa('bash', [join(ROOT, 'scripts', 'setup-agents')], { cwd: ROOT }); // idempotent
}, 600_000);

async function cohort(args: string[], options: { cwd?: string; env?: Record<string, string> } = {}) {
  const run = await execa('node', [BIN, 'cohort', 'run', ...args], {
    cwd: options.cwd ?? ROOT,
    env: options.env ?? {},
    reject: false,
    timeout: 120_000,
    killSignal: 'SIGKILL',
  });
  return { code: run.exitCode ?? -1, stdout: String(run.stdout), stderr: String(run.stderr) };
}
const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);
const cell = (out: string) => JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).cells[0];
const wine = (agent: string, out: string, more: string[] = []) => [
  '--agent',
  agent,
  '--out',
  out,
  '--condition',
  'wine',
  '--budget',
  '4',
  ...more,
];
/** What the score, purchases and shared estimators of a results line are (the times and process aside). */
const scored = (r: Record<string, any>) => [
  r.artifact_valid,
  r.observations,
  r.score,
  r.shared_degree1_score,
  r.shared_degree2_score,
  r.shared_gp_score,
];
/** The live processes whose command line holds `mark` (zombies, already ended, aside). */
function processesWith(mark: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        return (
          stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z' &&
          readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(mark)
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('cohort run --sandbox-agents', () => {
  it('the example agent sandboxed gives the design_degree2 controls record; the summary and terminal say it', async () => {
    const run = await cohort([...wine(`${PYTHON} examples/agents/pair_ridge.py`, FIRST), '--sandbox-agents']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toContain('unsandboxed');
    expect(run.stdout).toContain('agents: each ran in a sandbox of its own (--sandbox-agents; a network reaching only its endpoint)');
    const [r] = lines(join(FIRST, 'results.jsonl'));
    const control = lines(join(CONTROLS, 'records.jsonl')).find((c) => c.method === 'design_degree2' && c.condition === 'wine')!;
    expect(r!.artifact_valid).toBe(true);
    expect(r!.acquisition_order).toEqual(control.acquisition_order);
    expect(Object.fromEntries(Object.keys(control.score).map((k) => [k, r!.score[k]]))).toEqual(control.score);
    expect(JSON.parse(readFileSync(join(FIRST, 'summary.json'), 'utf8')).agents_sandboxed).toBe(true);
    expect(JSON.parse(readFileSync(join(FIRST, 'cohort.json'), 'utf8')).definition).toMatchObject({
      agents_sandboxed: true,
      agents_network: 'none',
    });
  }, 120_000);

  it('with its own network (the default) an agent reaches only its endpoint; its flood of connections keeps no sibling from delivering', async () => {
    const out = join(dir, 'network');
    // a TCP server of the host's on its loopback (another cohort's, a `wwref serve --http` without a token)
    const listener = createServer((c) => c.end('reached\n'));
    await new Promise<void>((done) => listener.listen(0, '127.0.0.1', done));
    const port = (listener.address() as AddressInfo).port;
    const agent = `case $WWREF_EPISODE_ID in *r0) ${AGENT} network ${port} wine__b4__r1;; *) sleep 2; ${AGENT} bridge;; esac`;
    const sockets = () => readdirSync(tmpdir()).filter((f) => /^wwref-.{6}$/.test(f) && existsSync(join(tmpdir(), f, 's')));
    const before = sockets();
    const run = await cohort([...wine(agent, out, ['--repeats', '2', '--parallel', '2']), '--sandbox-agents', '--controls', CONTROLS]);
    listener.close();
    expect(run.code, run.stderr).toBe(0);
    const said = (id: string) => JSON.parse(readFileSync(join(out, 'episodes', id, 'agent.stdout'), 'utf8').split('\n')[0]!);
    const hostile = said('wine__b4__r0');
    // its namespace's only listener is the forwarder, at the host's server's port
    expect(hostile.listening).toEqual([hostile.port]);
    expect([hostile.host_port, hostile.other_episode, hostile.own_episode, hostile.own_after]).toEqual(['ECONNREFUSED', 403, 200, 200]);
    expect(hostile.outside).toEqual(['ENETUNREACH', 'ENETUNREACH']);
    expect(hostile.venv).toEqual([]);
    expect(hostile.flood.opened).toBeGreaterThan(1000);
    // the sibling: over stdio, its MCP server given no environment (the URL in its argv, the token a file)
    const bridge = said('wine__b4__r1');
    expect(bridge).toEqual({
      stdio: [
        'connect',
        '--url',
        expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/episodes\/wine__b4__r1\/mcp$/),
        '--token-file',
        '/run/wwref/token',
      ],
      token_in_argv: false,
      file: true,
    });
    const [good] = lines(join(FIRST, 'results.jsonl'));
    const results = lines(join(out, 'results.jsonl'));
    expect(results.map((r) => [r.episode, ...scored(r)])).toEqual(['wine__b4__r0', 'wine__b4__r1'].map((id) => [id, ...scored(good!)]));
    // the sibling's calls were made while the flood was held
    const [from, until] = hostile.flood.held as [number, number];
    const calls = lines(join(out, 'episodes', 'wine__b4__r1', 'events.jsonl')).filter((e) => e.kind === 'action' && e.action !== 'start');
    expect(
      calls.some((e) => Date.parse(e.at) / 1000 > from && Date.parse(e.at) / 1000 < until),
      JSON.stringify([from, until]),
    ).toBe(true);
    expect(sockets().filter((f) => !before.includes(f))).toEqual([]); // each episode's socket removed with it
  }, 120_000);

  it("a hostile agent reaches none of the cohort's files, the references or another's token; its lines are a well-behaved agent's", async () => {
    const out = join(dir, 'hostile');
    const mark = `${4000 + (process.pid % 1000)}.${Date.now() % 100000}`; // `sleep MARK`, left by setsid
    // a Unix socket of the host's in /run (a Docker socket's place), listening: a read-only view would not stop a connect
    const socket = join('/run', `wwref-sandbox-${process.pid}.sock`);
    const listener = createServer((c) => c.end('reached\n'));
    await new Promise<void>((done, fail) => listener.once('error', fail).listen(socket, done));
    const reached = await new Promise<string>((done) => createConnection(socket).once('data', (d) => done(String(d))));
    expect(reached).toBe('reached\n');
    const run = await cohort([
      ...wine(`${AGENT} hostile ${out} ${mark} ${FIRST} ${socket}`, out, ['--repeats', '2', '--parallel', '2']),
      '--sandbox-agents',
      '--sandbox-network',
      'shared',
      '--controls',
      CONTROLS,
      '--sandbox-hide',
      FIRST,
    ]);
    listener.close();
    expect(run.code, run.stderr).toBe(0);
    for (const id of ['wine__b4__r0', 'wine__b4__r1']) {
      const said = JSON.parse(readFileSync(join(out, 'episodes', id, 'agent.stdout'), 'utf8').split('\n')[0]!);
      // hidden: the cohort's folder, the checkout's outputs/ (the references in it); the code is readable
      expect(said.sees, id).toMatchObject({ out: [], other: [], outputs: [], references: [], code: true });
      expect(said.sees.processes, id).toBeLessThanOrEqual(4); // bwrap's init, the shell, the agent (and ls)
      expect(said.foreign_tokens, id).toBe(0);
      expect(said.left_running, id).toBe(true);
      expect(said.fds, id).toEqual([]);
      for (const [what, outcome] of Object.entries(said.writes as Record<string, string>))
        expect([what, outcome], id).toEqual([what, what === 'tmp' ? 'done' : expect.not.stringMatching(/^done$/)]);
      expect([said.umount, said.unshare, said.socket], id).toEqual(['Operation not permitted', 'CalledProcessError', 'FileNotFoundError']);
    }
    expect(processesWith(`sleep ${mark}`)).toEqual([]); // ended with its sandbox
    expect(existsSync(join(ROOT, 'planted.txt'))).toBe(false);
    const [good] = lines(join(FIRST, 'results.jsonl'));
    const results = lines(join(out, 'results.jsonl'));
    expect(results.map((r) => r.episode)).toEqual(['wine__b4__r0', 'wine__b4__r1']);
    for (const r of results) expect(scored(r)).toEqual(scored(good!));
    const fields = (c: Record<string, unknown>) => [c.recovery_mean, c.mean_credits, c.shared_gp_recovery, c.gain_over_controls];
    expect([cell(out).delivered, ...fields(cell(out))]).toEqual([2, ...fields(cell(FIRST))]);
  }, 120_000);

  it('an agent reaches its episode over stdio through WWREF_MCP_COMMAND (wwref connect) under the Python SDK, the network shared; the grace period stops it', async () => {
    const out = join(dir, 'bridge');
    const run = await cohort([...wine(`${AGENT} bridge`, out), '--sandbox-agents', '--sandbox-network', 'shared', '--controls', CONTROLS]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("(--sandbox-agents; the host's network shared)");
    expect(JSON.parse(readFileSync(join(out, 'episodes', 'wine__b4__r0', 'agent.stdout'), 'utf8'))).toMatchObject({
      stdio: ['connect', '--url', expect.any(String), '--token-file', '/run/wwref/token'],
      token_in_argv: false,
      file: true,
    });
    const [line] = lines(join(out, 'results.jsonl'));
    expect(scored(line!)).toEqual(scored(lines(join(FIRST, 'results.jsonl'))[0]!));
    expect(line!.process.stopped).toBe('closed'); // it lingered after submitting
  }, 120_000);

  it('the deadline and the output bound stop a sandboxed agent', async () => {
    const out = join(dir, 'bounds');
    const agent = 'case $WWREF_EPISODE_ID in *r0) exec yes;; *) exec sleep 60;; esac';
    const run = await cohort([
      ...wine(agent, out, ['--repeats', '2', '--parallel', '2', '--session-seconds', '3']),
      '--sandbox-agents',
      '--controls',
      CONTROLS,
    ]);
    expect(run.code).toBe(1); // nothing delivered
    const [flood, sleeper] = lines(join(out, 'results.jsonl'));
    expect([flood!.process.stopped, flood!.process.output_truncated, sleeper!.process.stopped]).toEqual(['output', true, 'deadline']);
    expect(sleeper!.process.wall_seconds).toBeLessThan(8);
  }, 120_000);

  it('the sandboxes end when the cohort is killed with -9', async () => {
    const out = join(dir, 'killed');
    const mark = `${5000 + (process.pid % 1000)}.${Date.now() % 100000}`;
    const child = execa('node', [BIN, 'cohort', 'run', ...wine(`${AGENT} wait ${mark}`, out), '--sandbox-agents', '--controls', CONTROLS], {
      cwd: ROOT,
      reject: false,
    });
    const said = join(out, 'episodes', 'wine__b4__r0', 'agent.stdout');
    const running = () => existsSync(said) && readFileSync(said, 'utf8').includes('waiting') && processesWith(`sleep ${mark}`).length > 0;
    for (let k = 0; k < 300 && !running(); k++) await new Promise((r) => setTimeout(r, 100));
    expect(processesWith(`sleep ${mark}`)).toHaveLength(1);
    child.kill('SIGKILL');
    await child;
    let left = processesWith(`sleep ${mark}`);
    for (let k = 0; k < 50 && left.length; k++) {
      await new Promise((r) => setTimeout(r, 100));
      left = processesWith(`sleep ${mark}`);
    }
    expect(left).toEqual([]);
  }, 120_000);

  it('is part of the definition: a resume with the other setting is refused; unsandboxed, the run says so once', async () => {
    const plain = join(dir, 'plain');
    const first = await cohort([...wine('true', plain), '--controls', CONTROLS]);
    expect(first.code).toBe(1); // nothing delivered
    expect(first.stderr.match(/the agents run unsandboxed, as you: an agent can rewrite/g)).toHaveLength(1);
    expect(first.stderr).toContain('--sandbox-agents runs each in a sandbox of its own');
    expect(first.stdout).toContain('agents: ran unsandboxed, as you');
    expect(JSON.parse(readFileSync(join(plain, 'cohort.json'), 'utf8')).definition).not.toHaveProperty('agents_sandboxed');
    expect(JSON.parse(readFileSync(join(plain, 'summary.json'), 'utf8')).agents_sandboxed).toBe(false);
    const sandboxed = await cohort([...wine('true', plain), '--controls', CONTROLS, '--sandbox-agents']);
    expect([sandboxed.code, sandboxed.stderr.trim().split('\n')]).toEqual([
      2,
      [expect.stringContaining('whether the agents run sandboxed')],
    ]);
    const unsandboxed = await cohort(wine(`${PYTHON} examples/agents/pair_ridge.py`, FIRST));
    expect(unsandboxed.code).toBe(2);
    expect(unsandboxed.stderr).toMatch(/holds another cohort \(whether the agents run sandboxed \(--sandbox-agents\), the agents' network/);
    const shared = await cohort([
      ...wine(`${PYTHON} examples/agents/pair_ridge.py`, FIRST),
      '--sandbox-agents',
      '--sandbox-network',
      'shared',
    ]);
    expect([shared.code, shared.stderr.trim().split('\n')]).toEqual([
      2,
      [expect.stringMatching(/holds another cohort \(the agents' network \(--sandbox-network\) differ\)/)],
    ]);
    // the same setting resumes (the field absent: the file as an older wwref wrote it)
    const again = await cohort([...wine('true', plain), '--controls', CONTROLS]);
    expect(again.stdout).toContain('1 from an earlier run');
  }, 120_000);

  it("hides the repository's git folder and every worktree's outputs/ (git worktree add), seen from a linked worktree too", async () => {
    const repo = join(dir, 'repo');
    const git = (args: string[], cwd = repo) => execa('git', args, { cwd, env: { GIT_CONFIG_GLOBAL: '/dev/null' } });
    await execa('git', ['init', '-q', repo]);
    await git(['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '--allow-empty', '-m', 'start']);
    await git(['worktree', 'add', '-q', join(dir, 'linked')]);
    const expected = { git: join(repo, '.git'), worktrees: [repo, join(dir, 'linked')] };
    expect(repositoryFolders(repo)).toEqual(expected);
    expect(repositoryFolders(join(dir, 'linked'))).toEqual({ ...expected, worktrees: [join(dir, 'linked'), repo] });
    // each worktree's pinned runtimes too (red team 5: a worktree's .venv rebuilt a table offline)
    for (const venv of ['.venv', '.venv-current']) mkdirSync(join(dir, 'linked', venv));
    const hidden = hiddenFolders(currentSettings(), [], repo);
    for (const folder of ['.venv', '.venv-current', 'outputs', 'prepared', '.git'].map((f) => join(dir, 'linked', f)))
      if (existsSync(folder)) expect(hidden).toContain(realpathSync(folder));
    expect(hidden).toContain(realpathSync(join(dir, 'linked', '.venv')));
    // and pip's cache (the pinned packages' wheels ship raw data of some sources), where pip finds it
    const cache = join(dir, 'pip-cache');
    mkdirSync(cache);
    const settings = currentSettings();
    expect(pipCache({ PIP_CACHE_DIR: cache })).toBe(cache);
    expect(pipCache({ XDG_CACHE_HOME: dir })).toBe(join(dir, 'pip'));
    expect(pipCache({ HOME: '/home/someone' })).toBe('/home/someone/.cache/pip');
    expect(hiddenFolders({ ...settings, environment: { ...settings.environment, PIP_CACHE_DIR: cache } }, [], repo)).toContain(
      realpathSync(cache),
    );
  }, 60_000);

  it('refuses with one line, exit 2, nothing written: no bwrap; a working folder the sandbox hides', async () => {
    const missing = join(dir, 'no-bwrap');
    const run = await cohort([...wine('true', missing), '--sandbox-agents'], { env: { WWREF_BWRAP: join(dir, 'nothing', 'bwrap') } });
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^wwref: --sandbox-agents: WWREF_BWRAP=.* is no program that can be run; install bubblewrap/),
    ]);
    expect(existsSync(missing)).toBe(false);
    const refused = await cohort([...wine('true', missing), '--sandbox-agents'], { env: { WWREF_BWRAP: '/bin/false' } });
    expect(refused.code).toBe(2);
    expect(refused.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^wwref: --sandbox-agents: no agent sandbox can be made with \/bin\/false .*install bubblewrap/),
    ]);
    expect(existsSync(missing)).toBe(false);
    const hidden = await cohort([...wine('true', missing), '--sandbox-agents'], { cwd: join(ROOT, 'outputs') });
    expect(hidden.code).toBe(2);
    expect(hidden.stderr.trim().split('\n')).toEqual([expect.stringContaining(`working folder ${join(ROOT, 'outputs')} is inside`)]);
    expect(existsSync(missing)).toBe(false);
    const tmp = await cohort([...wine('true', missing), '--sandbox-agents'], { cwd: '/tmp' }); // the sandbox's own
    expect(tmp.code).toBe(2);
    expect(tmp.stderr.trim().split('\n')).toEqual([expect.stringContaining('which each sandbox replaces with a private one')]);
    expect(existsSync(missing)).toBe(false);
    for (const [more, said] of [
      [['--sandbox-hide', FIRST], '--sandbox-hide is an option of --sandbox-agents'],
      [['--sandbox-agents', '--sandbox-hide', join(dir, 'typo')], `--sandbox-hide ${join(dir, 'typo')}: no such file or folder`],
      [['--sandbox-network', 'none'], '--sandbox-network is an option of --sandbox-agents'],
      [['--sandbox-agents', '--sandbox-network', 'open'], "--sandbox-network takes none or shared, not 'open'"],
    ] as const) {
      const wrong = await cohort([...wine('true', missing), ...more]);
      expect([wrong.code, wrong.stderr.trim().split('\n')]).toEqual([2, [`wwref: ${said}`]]);
    }
    expect(existsSync(missing)).toBe(false);
  }, 60_000);

  it('a working folder inside /tmp (a checkout cloned there) is shown again over the private /tmp, read only; --out stays hidden', async () => {
    // `dir` is under the system's temporary folder: /tmp here
    const work = join(dir, 'work');
    const out = join(work, 'cohort');
    mkdirSync(work);
    writeFileSync(join(work, 'seen.txt'), 'marker-in-the-working-folder\n');
    const agent = `cat seen.txt >&2; touch written 2>/dev/null && echo wrote >&2; ls -A ${out} >&2; exit 3`;
    const run = await cohort([...wine(agent, out, ['--controls', CONTROLS]), '--sandbox-agents'], { cwd: work });
    expect(run.code, run.stderr).toBe(1); // nothing delivered: the agent submits nothing
    const said = readFileSync(join(out, 'episodes', 'wine__b4__r0', 'agent.stderr'), 'utf8');
    expect(said.trim().split('\n')).toEqual(['marker-in-the-working-folder']);
    expect(existsSync(join(work, 'written'))).toBe(false);
  }, 120_000);
});
