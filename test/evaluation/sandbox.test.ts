// The calculation sandbox, attacked: each escape a calculation tries must be contained (no host file,
// no network, no process, no lasting change), each limit must end the call with a receipt that says so,
// and the next call must work. Real bubblewrap, real Node processes, real Pyodide; nothing mocked.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { type Receipt, runCalculation, verifyReceipt } from '../../pipelines/evaluation/sandbox/calculation.ts';
import { PYODIDE_RUNNER as RUNNER, pyodideEngine } from '../../pipelines/evaluation/sandbox/engines.ts';
import {
  DATA_MARGIN_BYTES,
  resolveLimits,
  sandboxArgv,
  sandboxAvailable,
  sandboxTools,
  startSandbox,
} from '../../pipelines/evaluation/sandbox/isolation.ts';
import { interpreterSnapshot } from '../../pipelines/evaluation/sandbox/snapshot.ts';
import { sandboxesAlive } from '../support/processes.ts';

const MIB = 1024 * 1024;
const EVIDENCE = { task: { condition: 'wine', dimensions: 4 }, observations: [{ mask: '0000', utility: 0.5 }], credits: 3 };
const SECRET = randomBytes(12).toString('hex');
let secretDir: string;
let secretFile: string;
let listener: Server;
let wideListener: Server;
let unixListener: Server;
let port = 0;
let widePort = 0;
let unixPath: string;
let connections = 0;
const hostIps = Object.values(networkInterfaces())
  .flat()
  .filter((i) => i && i.family === 'IPv4' && !i.internal)
  .map((i) => i!.address);

async function calc(code: string, limits: Parameters<typeof runCalculation>[0]['limits'] = {}): Promise<Receipt> {
  return runCalculation({ code, evidence: EVIDENCE, limits });
}

/** Python that runs named attempts and prints {name: "OK:…" | "ERR:…"} as JSON. */
function attempts(body: string): string {
  return `
import json, sys
results = {}
async def attempt(name, fn):
    try:
        value = fn()
        if hasattr(value, 'then'):
            value = await value
        results[name] = 'OK:' + str(value)[:300]
    except BaseException as e:
        results[name] = 'ERR:' + type(e).__name__ + ':' + str(e)[:300]
${body}
print(json.dumps(results))
`;
}

function outcomes(receipt: Receipt): Record<string, string> {
  expect(receipt.status, receipt.stderr).toBe('ok');
  return JSON.parse(receipt.stdout);
}

/** This test's Pyodide sandboxes still running (test/support/processes.ts). */
const runnersAlive = () => sandboxesAlive('/sbx/runner.mjs');

const listen = (server: Server, ...args: unknown[]) =>
  new Promise<void>((resolve) => (server.listen as (...a: unknown[]) => void)(...args, () => resolve()));

beforeAll(async () => {
  secretDir = mkdtempSync(join(tmpdir(), 'wwref-sandbox-secret-'));
  secretFile = join(secretDir, 'secret.txt');
  writeFileSync(secretFile, SECRET);
  process.env.WWREF_SANDBOX_TEST_SECRET = SECRET;
  listener = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await listen(listener, 0, '127.0.0.1');
  port = (listener.address() as { port: number }).port;
  wideListener = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await listen(wideListener, 0, '0.0.0.0');
  widePort = (wideListener.address() as { port: number }).port;
  unixPath = join(secretDir, 'socket');
  unixListener = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await listen(unixListener, unixPath);
});

afterAll(() => {
  listener?.close();
  wideListener?.close();
  unixListener?.close();
  delete process.env.WWREF_SANDBOX_TEST_SECRET;
  rmSync(secretDir, { recursive: true, force: true });
});

describe('calculation sandbox', () => {
  it('can be made on this machine (bubblewrap, user namespaces)', () => {
    expect(sandboxAvailable()).toEqual({ available: true, reason: null });
  });

  it('runs Python with the evidence as a variable and as a file; the receipt hashes the code and the evidence bytes', async () => {
    const code = `
import json, sys
print(evidence["task"]["condition"], evidence["credits"], sys.version_info[:2] >= (3, 12))
with open("evidence.json", "rb") as f:
    raw = f.read()
print(json.loads(raw) == evidence, len(raw))
`;
    const receipt = await calc(code);
    const bytes = JSON.stringify(EVIDENCE);
    expect(receipt).toMatchObject({ status: 'ok', returnCode: 0, killedBy: null, stderr: '', stdoutTruncated: false });
    expect(receipt.stdout).toBe(`wine 3 True\nTrue ${Buffer.byteLength(bytes)}\n`);
    expect(receipt.codeSha256).toBe(createHash('sha256').update(code).digest('hex'));
    expect(receipt.evidenceSha256).toBe(createHash('sha256').update(bytes).digest('hex'));
  });

  it('reports an exception, sys.exit and MemoryError as the program would', async () => {
    const failed = await calc('x = 1\nraise ValueError("no table")');
    expect(failed).toMatchObject({ status: 'error', returnCode: 1 });
    expect(failed.stderr).toMatch(/^Traceback[\s\S]*File "<calculation>", line 2[\s\S]*ValueError: no table\n$/);
    expect(await calc('import sys; print("bye"); sys.exit(3)')).toMatchObject({ status: 'error', returnCode: 3, stdout: 'bye\n' });
    // os._exit ends the interpreter at once, with its status (no traceback, no interpreter failure)
    expect(await calc('import os; print("now", flush=True); os._exit(4)')).toMatchObject({
      status: 'error',
      returnCode: 4,
      stdout: 'now\n',
      stderr: '',
    });
    // a 10 GB list on a 64-bit CPython (1.25e9 pointers): past the sandbox's WebAssembly memory
    const bomb = await calc('x = [0] * (1250 * 10**6)');
    expect(bomb).toMatchObject({ status: 'over_memory', killedBy: null, returnCode: 1 });
    expect(bomb.stderr).toMatch(/MemoryError/);
  });

  it('gives the same output bytes for the same code and evidence (random, hash, clock, urandom), and verifyReceipt checks them', async () => {
    const code = `
import random, time, os, uuid, datetime
print(random.random(), hash("abc"), hash(("x", 1)), os.urandom(8).hex(), uuid.uuid4())
print(time.time(), time.monotonic(), datetime.datetime.now().isoformat(), sorted({"b", "a", "c"}))
print(list({str(i): i for i in range(5)}), id(object()) > 0)
`;
    const first = await calc(code);
    const second = await calc(code);
    expect(first.status).toBe('ok');
    expect(second.stdout).toBe(first.stdout);
    expect(first.stdout).toMatch(/^0\.\d+ -?\d+ -?\d+ [0-9a-f]{16} /);
    const verified = await verifyReceipt(first, code, EVIDENCE);
    expect(verified).toMatchObject({ ok: true, differences: [], outputsCompared: true });
    const edited = { ...first, stdout: first.stdout.replace(/^0\.\d/, '0.x') };
    const refused = await verifyReceipt(edited, code, EVIDENCE);
    expect(refused.ok).toBe(false);
    expect(refused.differences).toEqual(["stdout text differs from the receipt's"]);
    const other = await verifyReceipt(first, code, { ...EVIDENCE, credits: 2 });
    expect(other.ok).toBe(false);
    expect(other.differences[0]).toMatch(/^evidence sha256 [0-9a-f]{64} is not the receipt's/);
  });

  it('ends an infinite loop on CPU time and a blocked process on wall time, killing everything', async () => {
    const loop = await calc('while True:\n    pass', { cpuSeconds: 2 });
    expect(loop).toMatchObject({ status: 'timed_out', killedBy: 'cpu', returnCode: null });
    // where a timed-out call stopped depends on timing: a replay compares the status only
    expect(await verifyReceipt(loop, 'while True:\n    pass', EVIDENCE)).toMatchObject({ ok: true, outputsCompared: false });
    const blocked = await calc(
      'import pyodide_js\npyodide_js.FS.mkdir.constructor("Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)")()',
      { wallSeconds: 2 },
    );
    expect(blocked).toMatchObject({ status: 'timed_out', killedBy: 'wall', returnCode: null });
    expect(runnersAlive()).toEqual([]);
  });

  it('ends a JavaScript memory bomb on resident memory', async () => {
    const receipt = await calc(
      'import pyodide_js\npyodide_js.FS.mkdir.constructor("globalThis.keep = []; for (;;) keep.push(Buffer.alloc(1 << 26, 1))")()',
      { memoryBytes: 1024 * 1024 * 1024 },
    );
    expect(receipt).toMatchObject({ status: 'over_memory', killedBy: 'memory', returnCode: null });
    expect(runnersAlive()).toEqual([]);
    // a heap message and an abort the code makes itself are its own error, not a memory label
    const aborted = await calc('import sys, js\nprint("JavaScript heap out of memory", file=sys.stderr, flush=True)\njs.process.abort()');
    expect(aborted).toMatchObject({ status: 'error', killedBy: null, returnCode: 134, detail: null });
  });

  it.each([
    ['Buffer', 'Buffer.alloc(1 << 26, 1)'],
    ['SharedArrayBuffer', 'new Uint8Array(new SharedArrayBuffer(1 << 26)).fill(1)'],
    ['shared WebAssembly.Memory', 'new Uint8Array(new WebAssembly.Memory({ initial: 1024, maximum: 1024, shared: true }).buffer).fill(1)'],
  ])(
    'bounds JavaScript memory outside the heap (%s) in the kernel too: with no watchdog, allocations past the data limit fail',
    async (_, block) => {
      // the sandbox's own command line, run here without runCalculation's poll: only the kernel's RLIMIT_DATA stands
      const limits = resolveLimits({ memoryBytes: 1024 * MIB });
      const tools = sandboxTools();
      const argv = sandboxArgv(tools, limits, pyodideEngine.command(tools, limits, { snapshot: await interpreterSnapshot(tools) }));
      const code =
        'import pyodide_js\n' +
        `print(pyodide_js.FS.mkdir.constructor("let keep = [], n = 0; try { for (;;) { keep.push(${block}); n++ } } catch (e) { return n + ' ' + e.message }")())`;
      const child = startSandbox(argv);
      let stdout = '';
      child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
      child.stdin!.end(JSON.stringify({ code, evidence: '{}' }));
      const stop = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 90_000);
      const exit = await new Promise<number | null>((resolve) => child.on('close', resolve));
      clearTimeout(stop);
      expect(exit, stdout).toBe(0);
      const [blocks, ...message] = stdout.trim().split(' ');
      // the first 64 MiB blocks were given, and never as many as the data limit holds
      expect(Number(blocks)).toBeGreaterThan(2);
      expect(Number(blocks) * 64 * MIB).toBeLessThan(limits.memoryBytes + DATA_MARGIN_BYTES);
      expect(message.join(' ')).toMatch(/allocation failed|could not allocate memory/i);
    },
    120_000,
  );

  it('bounds an output flood: the first bytes kept, the call ended, the flag set', async () => {
    const flood = await calc('import sys\nwhile True:\n    sys.stdout.write("y" * 65536)', { outputBytes: 4096 });
    expect(flood).toMatchObject({ status: 'output_limit', killedBy: 'output', stdoutTruncated: true, stderrTruncated: false });
    expect(flood.stdout).toBe('y'.repeat(4096));
    // the kept bytes are the same at every run: the receipt verifies
    const replayed = await verifyReceipt(flood, 'import sys\nwhile True:\n    sys.stdout.write("y" * 65536)', EVIDENCE);
    expect(replayed).toMatchObject({ ok: true, outputsCompared: true });
    const errors = await calc('import sys\nprint("fine")\nsys.stderr.write("e" * 10**8)');
    expect(errors).toMatchObject({ status: 'output_limit', stdoutTruncated: false, stderrTruncated: true });
    expect(errors.stderr).toHaveLength(65536);
    expect(runnersAlive()).toEqual([]);
  });

  it('bounds the scratch folder: a file past 64 MiB is refused', async () => {
    const results = outcomes(
      await calc(
        attempts(`
import pyodide_js
F = pyodide_js.FS.mkdir.constructor
await attempt('fill', lambda: F("const fs = process.getBuiltinModule('fs'); const b = Buffer.alloc(1 << 20, 1); const fd = fs.openSync('/scratch/big', 'w'); for (let i = 0; i < 100; i++) fs.writeSync(fd, b); return 'written'")())
await attempt('size', lambda: F("return process.getBuiltinModule('fs').statSync('/scratch/big').size")())
`),
      ),
    );
    expect(results.fill).toMatch(/^ERR:.*(EFBIG|ENOSPC)/);
    expect(results.size).toBe(`OK:${64 * 1024 * 1024}`);
  });

  it('runs calculations side by side, each in its own sandbox', async () => {
    const [a, b] = await Promise.all([calc('print("a" * 3)'), calc('import sys\nprint("b", file=sys.stderr)\nsys.exit(2)')]);
    expect(a).toMatchObject({ status: 'ok', stdout: 'aaa\n', stderr: '' });
    expect(b).toMatchObject({ status: 'error', returnCode: 2, stdout: '', stderr: 'b\n' });
  });

  it('dies with its host: killing the process that started a calculation ends the sandbox and everything in it', async () => {
    const host = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test', 'support', 'sandbox-call.ts'), 'while True:\n    pass'], {
      cwd: ROOT,
      stdio: 'ignore',
    });
    const exited = new Promise((resolve) => host.on('exit', resolve));
    // wait (bounded) until the sandbox is up, then kill the host alone: the sandbox has its own group
    for (let i = 0; i < 600 && runnersAlive().length === 0; i++) await sleep(100);
    const alive = runnersAlive();
    expect(alive.length).toBeGreaterThan(0);
    host.kill('SIGKILL');
    await exited;
    for (let i = 0; i < 300 && runnersAlive().length > 0; i++) await sleep(100);
    expect(runnersAlive()).toEqual([]);
  });

  it('still serves after every escape and limit', async () => {
    expect(await calc('print(sum(range(10)))')).toMatchObject({ status: 'ok', stdout: '45\n', stderr: '' });
    expect(connections).toBe(0);
  });

  it('refuses bad input with one line', async () => {
    await expect(runCalculation({ code: 42 as unknown as string, evidence: {} })).rejects.toThrow(
      /^the calculation code must be a string of Python$/,
    );
    await expect(runCalculation({ code: '', evidence: '{"a":' })).rejects.toThrow(/^the evidence is not JSON: /);
    await expect(runCalculation({ code: '', evidence: '[1]' })).rejects.toThrow(/^the evidence must be a JSON object$/);
    await expect(runCalculation({ code: '', evidence: {}, limits: { wallSeconds: 0 } })).rejects.toThrow(
      /^sandbox limit wallSeconds must be a number from 1 to 900, not 0$/,
    );
  });
});

describe.each([
  { layers: 'every layer', osOnly: false },
  { layers: 'the OS sandbox alone (Node permission model left out)', osOnly: true },
])('escapes contained by $layers', ({ osOnly }) => {
  const run = (code: string) => runCalculation({ code, evidence: EVIDENCE, osLayerOnly: osOnly });

  it('shows no host file: Python open, js.process, the host through NODEFS, the Function constructor', async () => {
    const shared = join(ROOT, '..', 'shared', 'spec', 'controls.md');
    const paths = ['/etc/hostname', '/etc/passwd', join(ROOT, 'package.json'), secretFile, shared, '/proc/1/environ', '/proc/self/environ'];
    const list = JSON.stringify(paths);
    const receipt = await run(
      attempts(`
import js, os, pyodide_js
paths = ${list}
for p in paths:
    await attempt('open ' + p, lambda p=p: open(p).read())
fs = js.process.getBuiltinModule('fs')
for p in paths:
    await attempt('js fs ' + p, lambda p=p: fs.readFileSync(p, 'utf8'))
await attempt('js fs list /', lambda: list(fs.readdirSync('/')))
await attempt('require', lambda: js.require('fs'))
await attempt('process.binding fs', lambda: js.process.binding('fs'))
FS = pyodide_js.FS
def mount():
    FS.mkdirTree('/host')
    FS.mount(FS.filesystems.NODEFS, js.JSON.parse('{"root": "/"}'), '/host')
    return os.listdir('/host')
await attempt('NODEFS mount /', mount)
for p in paths:
    await attempt('NODEFS ' + p, lambda p=p: open('/host' + p).read())
F = FS.mkdir.constructor
await attempt('Function is Function', lambda: F.name)
for p in paths:
    await attempt('Function ' + p, lambda p=p: F('p', "return process.getBuiltinModule('fs').readFileSync(p, 'utf8')")(p))
await attempt('Function import', lambda: F("return import('node:fs').then(m => m.readFileSync('${secretFile}', 'utf8'))")())
`),
    );
    const results = outcomes(receipt);
    expect(results['Function is Function']).toBe('OK:Function');
    expect(Object.keys(results)).toHaveLength(4 * paths.length + 6);
    // without Node's permission model the sandbox's own root can be listed and mounted: it holds only
    // what was bound into it
    const seen = new Set(['Function is Function', ...(osOnly ? ['js fs list /', 'NODEFS mount /', 'process.binding fs'] : [])]);
    for (const [name, result] of Object.entries(results)) {
      if (seen.has(name)) continue;
      expect(result, name).toMatch(/^ERR:/);
    }
    if (osOnly) {
      expect(results['js fs list /']).toMatch(/^OK:\[/);
      for (const listing of [results['js fs list /'], results['NODEFS mount /']])
        expect(
          listing!
            .match(/'([^']+)'/g)!
            .map((n) => n.slice(1, -1))
            .sort(),
        ).toEqual(['lib', 'lib64', 'sbx', 'scratch', 'usr']);
    }
    expect(receipt.stdout).not.toContain(SECRET);
    expect(receipt.stdout).not.toContain('"name": "wwref"');
  });

  it('reaches no network: no connection to listeners on 127.0.0.1, on the host address or on a Unix socket', async () => {
    const targets = [`127.0.0.1:${port}`, `localhost:${port}`, ...hostIps.map((ip) => `${ip}:${widePort}`)];
    const receipt = await run(
      attempts(`
import js, pyodide_js
F = pyodide_js.FS.mkdir.constructor
connect = F('host', 'port', 'path', """
  return new Promise((resolve, reject) => {
    const net = process.getBuiltinModule('net');
    const socket = path ? net.connect(path) : net.connect(Number(port), host);
    socket.on('connect', () => { socket.destroy(); resolve('connected'); });
    socket.on('error', (e) => reject(new Error(e.code || e.message)));
    setTimeout(() => reject(new Error('no answer')), 3000);
  });""")
for target in ${JSON.stringify(targets)}:
    host, port = target.rsplit(':', 1)
    await attempt('tcp ' + target, lambda host=host, port=port: connect(host, port, None))
await attempt('unix ${unixPath}', lambda: connect(None, None, '${unixPath}'))
await attempt('fetch', lambda: js.fetch('http://127.0.0.1:${port}/'))
await attempt('dns', lambda: F("return process.getBuiltinModule('dns').promises.lookup('localhost')")())
`),
    );
    const results = outcomes(receipt);
    expect(Object.keys(results)).toHaveLength(targets.length + 3);
    for (const [name, result] of Object.entries(results)) {
      if (name === 'dns') continue; // the sandbox's own loopback may resolve localhost: harmless
      expect(result, name).toMatch(/^ERR:/);
    }
    expect(connections).toBe(0);
  });

  it('starts no process: subprocess, os.system, child_process, process.binding, worker threads', async () => {
    const receipt = await run(
      attempts(`
import os, subprocess, pyodide_js
await attempt('subprocess', lambda: subprocess.run(['id'], capture_output=True))
await attempt('os.system', lambda: os.system('id'))
await attempt('os.fork', lambda: os.fork())
F = pyodide_js.FS.mkdir.constructor
await attempt('execSync', lambda: F("return process.getBuiltinModule('child_process').execSync('id').toString()")())
await attempt('spawnSync node', lambda: F("return process.getBuiltinModule('child_process').spawnSync(process.execPath, ['-e', 'console.log(1)']).stdout.toString()")())
await attempt('spawn_sync binding', lambda: F("return process.binding('spawn_sync')")())
await attempt('worker', lambda: F("const { Worker } = process.getBuiltinModule('worker_threads'); return new Worker('1', { eval: true }).threadId")())
await attempt('dlopen', lambda: F("const m = { exports: {} }; process.dlopen(m, '/usr/lib/x86_64-linux-gnu/libc.so.6'); return 'loaded'")())
`),
    );
    const results = outcomes(receipt);
    expect(Object.keys(results)).toHaveLength(8);
    // Without Node's permission model node can load bindings and start worker threads (threads, not
    // processes): the seccomp filter refuses every new process, node included.
    const inside = osOnly ? ['spawn_sync binding', 'worker'] : [];
    for (const [name, result] of Object.entries(results)) if (!inside.includes(name)) expect(result, name).toMatch(/^ERR:/);
    if (osOnly) expect(results['spawnSync node']).toMatch(/^ERR:/);
    expect(runnersAlive()).toEqual([]);
  });

  it('leaks no environment variable of the host and leaves nothing behind: writes outside scratch refused, scratch fresh every call', async () => {
    const before = createHash('sha256').update(readFileSync(RUNNER)).digest('hex');
    const first = await run(
      attempts(`
import js, os, pyodide_js
F = pyodide_js.FS.mkdir.constructor
await attempt('os.environ', lambda: dict(os.environ))
await attempt('process.env', lambda: js.JSON.stringify(js.process.env))
write = F('p', "process.getBuiltinModule('fs').writeFileSync(p, 'x'); return 'written'")
for p in ['/scratch/marker', '/sbx/runner.mjs', '/tmp/x', '/x', '${join(ROOT, 'escape.txt')}', '${join(secretDir, 'escape.txt')}']:
    await attempt('write ' + p, lambda p=p: write(p))
await attempt('scratch', lambda: list(js.process.getBuiltinModule('fs').readdirSync('/scratch')))
`),
    );
    const results = outcomes(first);
    expect(first.stdout).not.toContain(SECRET);
    expect(results['os.environ']).not.toContain('WWREF_SANDBOX_TEST_SECRET');
    expect(results['process.env']).toBe('OK:{"HOME":"/scratch","PWD":"/scratch"}');
    // (the permission model's layer refuses some writes before the read-only mounts would)
    expect(results['write /scratch/marker']).toBe('OK:written');
    expect(results.scratch).toBe("OK:['marker']");
    for (const p of ['/sbx/runner.mjs', '/tmp/x', '/x', join(ROOT, 'escape.txt'), join(secretDir, 'escape.txt')])
      expect(results[`write ${p}`], p).toMatch(/^ERR:/);
    expect(readdirSync(secretDir).sort()).toEqual(['secret.txt', 'socket']);
    expect(createHash('sha256').update(readFileSync(RUNNER)).digest('hex')).toBe(before);
    const second = outcomes(
      await run(attempts(`import js\nawait attempt('scratch', lambda: list(js.process.getBuiltinModule('fs').readdirSync('/scratch')))`)),
    );
    expect(second.scratch).toBe('OK:[]');
  });
});
