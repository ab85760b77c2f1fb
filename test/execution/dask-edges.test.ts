// The Dask layer at the edges of its processes, all real: a --scheduler address where no scheduler
// answers (a web server, a port that accepts and stays silent, nothing listening) fails in seconds with
// one line; SIGINT and SIGTERM of a `dask-local` rebuild leave no process and no folder behind; Dask's
// scratch space stays in the cluster's own folders; a worker that joins with another identity is named
// as it is retired.
import { execa, execaSync } from 'execa';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { ensurePythonRuntime } from '../../pipelines/core/runtime.ts';
import { startLocalCluster, startScheduler, startWorkers, workerEnvironment } from '../../pipelines/execution/dask/cluster.ts';
import { DaskExecutor } from '../../pipelines/execution/dask/dask-executor.ts';
import { BIN, cliProcess } from '../support/cli.ts';
import { registered } from '../support/dask.ts';
import { alive, descendants, type Running } from '../support/processes.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { currentSettings } from '../support/workspace.ts';

/** Committed prepared inputs are used as they are (prepared/ is set up before the tests run). */
let ws: Workspace;
beforeAll(() => {
  ws = useTempWorkspace({ inputs: 'committed' });
});
afterAll(() => ws.dispose());

const listening = (server: Server | HttpServer) =>
  new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));

describe('an address where no Dask scheduler answers: one line, exit 2, within seconds', () => {
  const web = createHttpServer((_, response) => response.end('hello\n'));
  const held: Socket[] = [];
  const silent = createServer((socket) => void held.push(socket)); // accepts, never answers
  const ports = { web: 0, silent: 0, nothing: 0 };
  beforeAll(async () => {
    ports.web = await listening(web);
    ports.silent = await listening(silent);
    const closed = createServer();
    ports.nothing = await listening(closed);
    await new Promise((resolve) => closed.close(resolve));
  });
  afterAll(() => {
    for (const socket of held) socket.destroy();
    web.close();
    silent.close();
  });

  for (const [kind, found] of [
    ['web', /answers, but not in Dask's protocol/],
    ['silent', /accepts connections but gives no answer in Dask's protocol within \d+ s/],
    ['nothing', /nothing is listening at .* \(connection refused\)/],
  ] as const) {
    it(`${kind}: names the address and what is there`, async () => {
      const address = `tcp://127.0.0.1:${ports[kind]}`;
      const started = performance.now();
      const outcome = await cliProcess(
        ['rebuild', '--executor', 'dask', '--scheduler', address, '--condition', 'nile', '--references', ws.references],
        ROOT,
      );
      const seconds = (performance.now() - started) / 1000;
      expect(outcome.code, outcome.stderr).toBe(2);
      expect(seconds).toBeLessThan(10);
      const lines = outcome.stderr.split('\n').filter(Boolean);
      expect(lines.length, outcome.stderr).toBe(1);
      expect(lines[0]).toMatch(/^wwref: /);
      expect(lines[0]).toContain(address);
      expect(lines[0]).toMatch(found);
      expect(lines[0]).not.toMatch(/Traceback|File "/);
    });
  }
});

async function until(condition: () => boolean, seconds: number): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
}

describe('a dask-local rebuild stopped by a signal', () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    it(`${signal}: no process it started survives, no folder of it remains`, async () => {
      const id = 'spambase__d6';
      const journal = join(ws.cache, 'journal', `${id}.jsonl`);
      rmSync(journal, { force: true });
      const temporary = mkdtempSync(join(tmpdir(), 'wwref-edges-'));
      const run = execa(
        'node',
        [BIN, 'rebuild', '--executor', 'dask-local', '--workers', '2', '--condition', id, '--fresh', '--references', ws.references],
        {
          cwd: ROOT,
          env: { TMPDIR: temporary },
          reject: false,
        },
      );
      let seen: Running[] = [];
      try {
        await until(() => existsSync(journal) && readFileSync(journal, 'utf8').includes('\n'), 120);
        seen = descendants(run.pid!);
        // The run is under way: the bridge, the scheduler, the nanny and its two worker processes.
        expect(seen.filter((p) => p.command.includes('workflows.cluster.bridge')).length).toBe(1);
        expect(seen.filter((p) => p.command.includes('workflows.cluster.launch')).length).toBe(2);
        expect(seen.filter((p) => p.command.includes('spawn_main')).length).toBe(2);
        run.kill(signal);
        const result = await run;
        expect(result.exitCode).not.toBe(0);
        const left = () => readdirSync(temporary).filter((name) => !name.startsWith('tsx-')); // tsx's compile cache
        await until(() => !seen.some(alive) && !left().length, 10);
        expect(seen.filter(alive).map((p) => p.command)).toEqual([]);
        expect(left()).toEqual([]);
        expect(existsSync(join(ROOT, 'dask-scratch-space'))).toBe(false);
      } finally {
        for (const p of seen.filter(alive)) process.kill(p.pid, 'SIGKILL');
        rmSync(temporary, { recursive: true, force: true });
      }
    });
  }
});

describe("Dask's scratch space", () => {
  it("is in the cluster's own folders while it runs, and gone with them; job scripts' workers use the cache folder", async () => {
    expect(workerEnvironment(currentSettings()).DASK_TEMPORARY_DIRECTORY).toBe(join(currentSettings().paths.cache, 'dask'));
    const temporary = mkdtempSync(join(tmpdir(), 'wwref-edges-'));
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = temporary;
    try {
      const cluster = await startLocalCluster(currentSettings(), 1);
      try {
        const script = [
          'import json, sys',
          'from distributed import Client',
          'client = Client(sys.argv[1], timeout=30)',
          'client.wait_for_workers(1, timeout=60)',
          'workers = list(client.run(lambda dask_worker: dask_worker.local_directory).values())',
          'scheduler = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.local_directory)',
          'print(json.dumps(workers + [scheduler]))',
          'client.close()',
        ].join('\n');
        const folders = JSON.parse(
          execaSync(ensurePythonRuntime(currentSettings()), ['-c', script, cluster.address], {
            cwd: ROOT,
            env: workerEnvironment(currentSettings()),
          }).stdout,
        ) as string[];
        expect(folders.length).toBe(2);
        const inside = new RegExp(
          `^${temporary.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/wwref-dask-(worker|scheduler)-[^/]+/dask-scratch-space/`,
        );
        for (const folder of folders) expect(folder).toMatch(inside);
        expect(readdirSync(temporary).sort()).toEqual(
          expect.arrayContaining([expect.stringMatching(/^wwref-dask-scheduler-/), expect.stringMatching(/^wwref-dask-worker-/)]),
        );
      } finally {
        await cluster.stop();
      }
      expect(readdirSync(temporary)).toEqual([]);
    } finally {
      process.env.TMPDIR = saved;
      if (saved === undefined) delete process.env.TMPDIR;
      rmSync(temporary, { recursive: true, force: true });
    }
  });
});

describe('a worker that joins a running job with another identity', () => {
  it('is retired and named: its address and the identity field that differs', async () => {
    const scheduler = await startScheduler(currentSettings());
    const workers = startWorkers(currentSettings(), { scheduler: scheduler.address, nworkers: 1 });
    const notes: string[] = [];
    const executor = new DaskExecutor({ settings: currentSettings(), scheduler: scheduler.address, log: (line) => notes.push(line) });
    try {
      expect((await executor.describe()).length).toBe(1);
      // A thread-pool variable outside the profile: admitted alone, but not the admitted worker's identity.
      const odd = startWorkers(currentSettings(), { scheduler: scheduler.address, nworkers: 1, env: { OMP_WAIT_POLICY: 'PASSIVE' } });
      try {
        await registered(odd.process);
        await until(() => notes.length > 0, 30);
        expect(notes).toEqual([
          expect.stringMatching(
            /^Dask worker tcp:\/\/127\.0\.0\.1:\d+ refused and retired: its identity differs from the admitted workers' in numerics\.environment$/,
          ),
        ]);
        expect([...executor.refused.keys()]).toEqual([notes[0]!.split(' ')[2]]);
        const ended = await Promise.race([
          odd.process.then(() => true),
          new Promise((resolve) => setTimeout(() => resolve(false), 30_000)),
        ]);
        expect(ended).toBe(true);
        expect((await executor.describe()).length).toBe(1);
      } finally {
        odd.kill();
      }
    } finally {
      await executor.close();
      await workers.stop();
      await scheduler.stop();
    }
  });
});
