// The calculation sandbox against native code, for both engines: every probe of the escape round that
// broke the earlier sandbox (descriptors inherited from the host, a sandbox outliving its call,
// processes, memory and inodes outside the limits, network families, kernel surfaces, the outcome
// channel, machine-wide facts), each with a mechanical check. The native engine runs the probes as its
// calculation; the Pyodide engine's OS layer runs the same probes in its own sandbox (its binds, its
// filter, its limits) with the runtime's Python added to run them, since only native code can make
// those system calls. Real bubblewrap, real processes; nothing mocked.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { calculationEngine } from '../../pipelines/evaluation/calculations.ts';
import { type Receipt, runCalculation, verifyReceipt } from '../../pipelines/evaluation/sandbox/calculation.ts';
import { type Engine, type EngineName, pyodideEngine } from '../../pipelines/evaluation/sandbox/engines.ts';
import {
  DEFAULT_LIMITS,
  MAX_SIGNALS,
  MAX_TASKS,
  SCRATCH_INODES,
  sandboxArgv,
  sandboxAvailable,
  sandboxTools,
  startSandbox,
} from '../../pipelines/evaluation/sandbox/isolation.ts';
import { seccompArch, syscallNumber } from '../../pipelines/evaluation/sandbox/seccomp.ts';
import { sandboxesAlive } from '../support/processes.ts';

const PYTHON = join(ROOT, '.venv', 'bin', 'python');
const SKIP = !sandboxAvailable().available
  ? `no sandbox here: ${sandboxAvailable().reason}`
  : !existsSync(PYTHON)
    ? 'the pinned runtime (.venv) is not set up: npm run setup'
    : null;
const ARCH = seccompArch() ?? 'x64';
const NR: Record<string, number> = Object.fromEntries(
  [
    'ptrace',
    'inotify_init1',
    'io_setup',
    'vmsplice',
    'splice',
    'fork',
    'vfork',
    'clone',
    'clone3',
    'execveat',
    'io_uring_setup',
    'userfaultfd',
    'perf_event_open',
    'add_key',
    'keyctl',
    'bpf',
    'unshare',
    'setns',
    'mount',
    'memfd_create',
    'shmget',
    'msgget',
    'sysinfo',
    'process_vm_readv',
    'kcmp',
    'pidfd_open',
    'personality',
  ].map((name) => [name, syscallNumber(ARCH, name) ?? -1]),
);

/** Python (native code through ctypes) that runs named probes and prints {name: "OK:…" | "ERR:…"} as JSON. */
function probes(body: string): string {
  return `
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
S = os.getcwd()  # the call's scratch (the working folder)
NR = ${JSON.stringify(NR)}
results = {}
def probe(name, fn):
    try:
        results[name] = 'OK:' + str(fn())[:200]
    except BaseException as e:
        results[name] = 'ERR:' + type(e).__name__ + ':' + str(e)[:200]
def sys_(name, *args):
    if NR[name] < 0:
        raise OSError(errno.ENOSYS, 'no such call on this processor')
    r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, errno.errorcode.get(e, str(e)))
    return r
${body}
print(json.dumps(results))
`;
}

let native: Engine;

/**
 * Runs Python probe code as a calculation of `engine`. For the Pyodide engine: its own sandbox (binds,
 * filter, limits, scratch), with the runtime's Python and its files bound too, running the probes.
 */
async function run(engine: EngineName, code: string, limits: Partial<typeof DEFAULT_LIMITS> = {}): Promise<Receipt> {
  if (engine === 'native') return runCalculation({ code, evidence: {}, engine: native, limits });
  const tools = sandboxTools();
  const all = { ...DEFAULT_LIMITS, ...limits };
  const pyodide = pyodideEngine.command(tools, all);
  const python = native.command(tools, all);
  const inner = {
    ...pyodide,
    binds: [...pyodide.binds, ...python.binds],
    environment: python.environment,
    command: [PYTHON, '-B', '-s', '-c', code],
  };
  const child = startSandbox(sandboxArgv(tools, all, inner));
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  child.stdin!.end();
  const stop = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), (all.wallSeconds + 30) * 1000);
  const code_ = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(stop);
  return { status: code_ === 0 ? 'ok' : 'error', returnCode: code_, stdout, stderr } as Receipt;
}

function outcomes(receipt: Receipt): Record<string, string> {
  expect(receipt.status, receipt.stderr).toBe('ok');
  return JSON.parse(receipt.stdout);
}

let dir: string;
beforeAll(async () => {
  if (SKIP) return;
  native = await calculationEngine(loadSettings(), 'native');
  dir = mkdtempSync(join(tmpdir(), 'wwref-escapes-'));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(SKIP !== null).each(['native', 'pyodide'] as const)(
  `escapes by native code, %s engine${SKIP ? ` (skipped: ${SKIP})` : ''}`,
  (engine) => {
    it('starts no process and replaces none: fork, vfork, clone, clone3, execve of the interpreter, of a copy in the scratch, of ld.so', async () => {
      const results = outcomes(
        await run(
          engine,
          probes(`
import shutil, stat, subprocess, mmap
probe('os.fork', os.fork)
probe('vfork', lambda: sys_('vfork') if NR['vfork'] >= 0 else 'none here')
probe('clone process', lambda: sys_('clone', 17, 0, 0, 0, 0))
probe('clone3', lambda: sys_('clone3', 0, 0))
probe('subprocess', lambda: subprocess.run(['/bin/true']))
probe('posix_spawn', lambda: os.posix_spawn(sys.executable, [sys.executable, '-c', '1'], {}))
shutil.copy(sys.executable, S + '/prog')
os.chmod(S + '/prog', 0o755)
probe('mmap exec of a scratch file', lambda: mmap.mmap(os.open(S + '/prog', os.O_RDONLY), 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC))
probe('thread', lambda: __import__('threading').Thread(target=lambda: None).start() or 'started')
`),
        ),
      );
      for (const name of ['os.fork', 'clone process', 'subprocess', 'posix_spawn'])
        expect(results[name], name).toMatch(/^ERR:.*(Errno 1\]|PermissionError)/);
      expect(results.clone3).toMatch(/ENOSYS|Errno 38/);
      expect(results['mmap exec of a scratch file']).toMatch(/^ERR:PermissionError/); // noexec scratch
      expect(results.thread).toBe('OK:started');
      if ((NR.vfork ?? -1) >= 0) expect(results.vfork).toMatch(/^ERR:.*EPERM/);
    }, 120_000);

    it.runIf(engine === 'native')(
      "refuses execve once the code runs (the runner's second filter): the interpreter, a copy in the scratch, ld.so",
      async () => {
        const results = outcomes(
          await run(
            engine,
            probes(`
import shutil
shutil.copy(sys.executable, '/tmp/prog')
os.chmod('/tmp/prog', 0o755)
probe('execv interpreter', lambda: os.execv(sys.executable, [sys.executable, '-c', 'print(1)']))
probe('execv scratch copy', lambda: os.execv('/tmp/prog', ['prog', '-c', 'print(1)']))
probe('execv ld.so', lambda: os.execv('/lib64/ld-linux-x86-64.so.2', ['ld.so', '/tmp/prog']))
probe('execveat', lambda: sys_('execveat', -100, 0, 0, 0, 0))
`),
          ),
        );
        for (const [name, result] of Object.entries(results)) expect(result, name).toMatch(/^ERR:.*(PermissionError|EPERM|Errno 1\])/);
      },
    );

    it('refuses the kernel surfaces the earlier round reached: ptrace, io_uring, userfaultfd, perf_event_open, keys, bpf, namespaces, mounts', async () => {
      const results = outcomes(
        await run(
          engine,
          probes(`
probe('ptrace attach init', lambda: sys_('ptrace', 16, 1, 0, 0))
probe('ptrace traceme', lambda: sys_('ptrace', 0, 0, 0, 0))
probe('process_vm_readv', lambda: sys_('process_vm_readv', 1, 0, 0, 0, 0, 0))
probe('io_uring_setup', lambda: sys_('io_uring_setup', 8, 0))
probe('userfaultfd', lambda: sys_('userfaultfd', 0))
probe('perf_event_open', lambda: sys_('perf_event_open', 0, 0, -1, -1, 0))
probe('add_key', lambda: sys_('add_key', 0, 0, 0, 0, 0))
probe('keyctl', lambda: sys_('keyctl', 0, 0, 0, 0, 0))
probe('bpf', lambda: sys_('bpf', 0, 0, 0))
probe('unshare', lambda: sys_('unshare', 0x10000000))
probe('setns', lambda: sys_('setns', 0, 0))
probe('mount', lambda: sys_('mount', 0, 0, 0, 0, 0))
probe('kcmp', lambda: sys_('kcmp', 1, 1, 0, 0, 0))
probe('pidfd_open', lambda: sys_('pidfd_open', 1, 0))
probe('personality', lambda: sys_('personality', 0x0040000))
`),
        ),
      );
      expect(Object.keys(results)).toHaveLength(15);
      expect(results.io_uring_setup).toMatch(/ENOSYS/);
      for (const [name, result] of Object.entries(results))
        if (name !== 'io_uring_setup') expect(result, name).toMatch(/^ERR:(OSError|PermissionError):.*EPERM/);
    });

    it('keeps memory and files within limits: memfd, SysV memory and queues refused; the scratch holds at most its inodes and bytes', async () => {
      const results = outcomes(
        await run(
          engine,
          probes(`
probe('memfd_create', lambda: os.memfd_create('x'))
probe('shmget', lambda: sys_('shmget', 0, 1 << 30, 0o1600))
probe('msgget', lambda: sys_('msgget', 0, 0o1600))
def files():
    n = 0
    try:
        while n < 100000:
            open(S + '/f%d' % n, 'w').close()
            n += 1
    except OSError as e:
        return '%d %s' % (n, errno.errorcode.get(e.errno))
    return '%d none' % n
probe('empty files', files)
for k in range(0, 100000, 1):
    try:
        os.unlink(S + '/f%d' % k)
    except OSError:
        break
def big():
    with open(S + '/big', 'wb') as f:
        for _ in range(100):
            f.write(b'x' * (1 << 20))
probe('big file', big)
probe('queue limit', lambda: __import__('resource').getrlimit(__import__('resource').RLIMIT_MSGQUEUE))
`),
        ),
      );
      expect(results.memfd_create).toMatch(/^ERR:PermissionError/);
      expect(results.shmget).toMatch(/EPERM/);
      expect(results.msgget).toMatch(/EPERM/);
      const [made, why] = results['empty files']!.slice(3).split(' ');
      expect(Number(made)).toBeLessThanOrEqual(SCRATCH_INODES);
      expect(why).toBe('ENOSPC');
      expect(results['big file']).toMatch(/^ERR:.*(EFBIG|No space left|File too large)/);
      expect(results['queue limit']).toBe('OK:(0, 0)');
    }, 120_000);

    it('holds no kernel memory or per-user count of the machine: no AIO, no datagram or socket but Unix stream pairs, nothing in flight, no pipe growth, its own share of queued signals', async () => {
      const results = outcomes(
        await run(
          engine,
          probes(`
import array, fcntl, signal
probe('io_setup', lambda: sys_('io_setup', 1, 0))
probe('unix socket', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))
probe('datagram pair', lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
a, b = socket.socketpair()
probe('stream pair', lambda: a.send(b'x'))
probe('fd in flight', lambda: a.sendmsg([b'f'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [b.fileno()]))]))
probe('peer of stdout', lambda: socket.socket(fileno=os.dup(1)).getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
probe('peer pidfd', lambda: socket.socket(fileno=os.dup(1)).getsockopt(socket.SOL_SOCKET, 77))
r, w = os.pipe()
probe('pipe growth', lambda: fcntl.fcntl(w, 1031, 1 << 20))
probe('evict a page', lambda: os.posix_fadvise(os.open(sys.executable, os.O_RDONLY), 0, 0, os.POSIX_FADV_DONTNEED))
probe('pin pages in a pipe', lambda: sys_('vmsplice', w, 0, 0, 0))
probe('splice', lambda: sys_('splice', r, 0, w, 0, 1, 0))
probe('pass pidfds', lambda: a.setsockopt(socket.SOL_SOCKET, 76, 1))
probe('pass credentials', lambda: a.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1))
probe('signals', lambda: __import__('resource').getrlimit(__import__('resource').RLIMIT_SIGPENDING))
`),
        ),
      );
      expect(results.io_setup).toMatch(/ENOSYS/);
      expect(results['unix socket']).toMatch(/Errno 97\]/);
      expect(results['datagram pair']).toMatch(/^ERR:PermissionError/);
      expect(results['stream pair']).toBe('OK:1');
      for (const name of ['pin pages in a pipe', 'splice']) expect(results[name], name).toMatch(/EPERM/);
      for (const name of ['fd in flight', 'peer of stdout', 'peer pidfd', 'pipe growth', 'evict a page', 'pass pidfds', 'pass credentials'])
        expect(results[name], name).toMatch(/^ERR:PermissionError/);
      expect(results.signals).toBe(`OK:(${MAX_SIGNALS}, ${MAX_SIGNALS})`);
    });

    it('starts a bounded number of threads (the task limit counts the sandbox alone)', async () => {
      const results = outcomes(
        await run(
          engine,
          probes(`
import threading
stop = threading.Event()
threads = []
def bomb():
    try:
        while len(threads) < 5000:
            t = threading.Thread(target=stop.wait)
            t.start()
            threads.append(t)
    except RuntimeError as e:
        return '%d %s' % (len(threads), e)
    return '%d none' % len(threads)
probe('threads', bomb)
stop.set()
`),
        ),
      );
      const made = Number(results.threads!.slice(3).split(' ')[0]);
      expect(made).toBeGreaterThan(8);
      expect(made).toBeLessThan(MAX_TASKS);
    }, 120_000);

    it('opens no network socket but Unix ones (inet, vsock, netlink, packet), and hides load, uptime and free memory (sysinfo)', async () => {
      const results = outcomes(
        await run(
          engine,
          probes(`
for family, name in [(socket.AF_INET, 'inet'), (socket.AF_INET6, 'inet6'), (40, 'vsock'), (16, 'netlink'), (17, 'packet')]:
    probe(name, lambda f=family: socket.socket(f, socket.SOCK_DGRAM if f in (16, 17) else socket.SOCK_STREAM))
probe('unix pair', lambda: len(socket.socketpair()))
a, b = socket.socketpair()
probe('grow a buffer', lambda: a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 26))
probe('force a buffer', lambda: a.setsockopt(socket.SOL_SOCKET, 32, 1 << 26))
probe('another option', lambda: a.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
probe('sysinfo', lambda: sys_('sysinfo', 0))
probe('flock', lambda: __import__('fcntl').flock(open(sys.executable, 'rb'), 2 | 4))
probe('record lock', lambda: __import__('fcntl').lockf(open(sys.executable, 'rb'), 1 | 4))
probe('lock test', lambda: __import__('fcntl').fcntl(open(sys.executable, 'rb'), 5, bytes(32)))
probe('other fcntl', lambda: __import__('fcntl').fcntl(open(sys.executable, 'rb'), 1))
probe('inotify', lambda: sys_('inotify_init1', 0))
probe('loadavg', os.getloadavg)
probe('proc', lambda: os.listdir('/proc'))
`),
        ),
      );
      for (const name of ['inet', 'inet6', 'vsock', 'netlink', 'packet']) expect(results[name], name).toMatch(/Errno 97\]/);
      expect(results['unix pair']).toBe('OK:2');
      // a Unix socket's buffer stays at the kernel's default (grown, they held gigabytes outside the limit)
      expect(results['grow a buffer']).toMatch(/^ERR:PermissionError/);
      expect(results['force a buffer']).toMatch(/^ERR:PermissionError/);
      expect(results['another option']).toBe('OK:None');
      expect(results.sysinfo).toMatch(/EPERM/);
      // the bound runtime is the host's files: no lock or watch on them (a channel between calls, the machine's program starts)
      expect(results.flock).toMatch(/^ERR:PermissionError/);
      expect(results['record lock']).toMatch(/^ERR:PermissionError/);
      expect(results['lock test']).toMatch(/^ERR:PermissionError/);
      expect(results['other fcntl']).toBe('OK:1'); // F_GETFD: FD_CLOEXEC (Python opens files close-on-exec)
      expect(results.inotify).toMatch(/EPERM/);
      expect(results.loadavg).toMatch(/^ERR:OSError/);
      expect(results.proc).toMatch(/^ERR:FileNotFoundError/);
    });

    it('cannot reach a descriptor the host inherited from its launcher, for reading or writing', async () => {
      const victim = join(dir, `victim-${engine}`);
      const secret = join(dir, `secret-${engine}`);
      writeFileSync(victim, 'untouched\n');
      writeFileSync(secret, 'SECRET-BYTES-OF-THE-HOST\n');
      // every open descriptor of the code's process that is a file: written to and read (the runner's
      // own are pipes; writing into node's internal pipes would only crash the code's own process)
      const code =
        engine === 'native'
          ? `
import os, stat
found = []
for fd in range(3, 1024):
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            continue
    except OSError:
        continue
    found.append(fd)
    for attempt in (lambda: os.write(fd, b'WRITTEN-FROM-SANDBOX\\n'), lambda: found.append(os.pread(fd, 64, 0))):
        try:
            attempt()
        except OSError:
            pass
print(found)
`
          : `
import pyodide_js
print(pyodide_js.FS.mkdir.constructor("const fs = process.getBuiltinModule('fs'); const found = []; for (let fd = 3; fd < 1024; fd++) { try { if (!fs.fstatSync(fd).isFile()) continue } catch { continue } found.push(fd); try { fs.writeSync(fd, 'WRITTEN-FROM-SANDBOX') } catch {} try { const b = Buffer.alloc(64); fs.readSync(fd, b, 0, 64, 0); found.push(String(b)) } catch {} } return JSON.stringify(found)")())
`;
      // the host holds the two descriptors as its fds 40 and 250 (not close-on-exec), as a launcher may
      // leave them (node reuses its low descriptors at start: those higher up stay open in it)
      const launcher = 'exec 40>>"$1" 250<"$2"; shift 2; exec "$@"';
      const host = spawn(
        'bash',
        [
          '-c',
          launcher,
          'launcher',
          victim,
          secret,
          process.execPath,
          '--import',
          'tsx',
          join(ROOT, 'test', 'support', 'sandbox-call.ts'),
          code,
          engine,
        ],
        { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...(engine === 'pyodide' ? { CALL_CPU: '60' } : {}) } },
      );
      let out = '';
      host.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      await new Promise((resolve) => host.on('close', resolve));
      const receipt = JSON.parse(out) as Receipt;
      expect(receipt.status, receipt.stderr).toBe('ok');
      expect(receipt.stdout).not.toContain('SECRET');
      expect(receipt.stdout.trim()).toBe('[]'); // no file open at all: not the host's 40 and 250
      expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
    }, 120_000);
  },
);

describe.skipIf(SKIP !== null)(`the call's end and its receipt${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  it('leaves nothing running after a timed-out call that cleared its parent-death signal and tried to trace its init', async () => {
    const code = `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0
libc.syscall(${NR.ptrace}, 16, 1, 0, 0)  # PTRACE_ATTACH the sandbox's init
libc.setsid()
while True:
    pass
`;
    const receipt = await runCalculation({ code, evidence: {}, engine: native, limits: { wallSeconds: 2, cpuSeconds: 30 } });
    expect(receipt).toMatchObject({ status: 'timed_out', killedBy: 'wall' });
    for (let i = 0; i < 20 && sandboxesAlive().length; i++) await sleep(100);
    expect(sandboxesAlive()).toEqual([]);
  });

  it("sees the sources' raw files in the pinned packages empty (red team 6 rebuilt wine's table from sklearn's copy); the packages import", async () => {
    const code = `
import json, os, sklearn, statsmodels, skimage
import statsmodels.api, sklearn.datasets
roots = {m.__name__: os.path.dirname(m.__file__) for m in (sklearn, statsmodels, skimage)}
files = {
    "wine": (roots["sklearn"], "datasets/data/wine_data.csv"),
    "breast": (roots["sklearn"], "datasets/data/breast_cancer.csv"),
    "nile": (roots["statsmodels"], "datasets/nile/nile.csv"),
    "astronaut": (roots["skimage"], "data/astronaut.png"),
}
sizes = {k: len(open(os.path.join(r, f), "rb").read()) for k, (r, f) in files.items()}
try:
    sklearn.datasets.load_wine()
    loaded = "loaded"
except Exception as error:
    loaded = type(error).__name__
print(json.dumps({"sizes": sizes, "load_wine": loaded, "code": os.path.getsize(os.path.join(roots["statsmodels"], "datasets/nile/data.py")) > 0}))
`;
    const receipt = await runCalculation({ code, evidence: {}, engine: native, limits: { wallSeconds: 60, cpuSeconds: 60 } });
    expect(receipt.status, receipt.stderr).toBe('ok');
    const seen = JSON.parse(receipt.stdout);
    expect(seen.sizes).toEqual({ wine: 0, breast: 0, nile: 0, astronaut: 0 });
    expect(seen.load_wine).not.toBe('loaded');
    expect(seen.code).toBe(true);
  });

  it('stops a 2.4 GB allocation (the address-space limit: MemoryError) and a CPU loop, and serves the next call', async () => {
    const big = await runCalculation({
      code: 'import numpy as np\nx = np.ones(300_000_000)\nprint(x.sum())',
      evidence: {},
      engine: native,
    });
    expect(big).toMatchObject({ status: 'over_memory', killedBy: null, returnCode: 1 });
    expect(big.stderr).toMatch(/MemoryError: Unable to allocate 2\.2\d GiB/);
    const loop = await runCalculation({ code: 'while True:\n    pass', evidence: {}, engine: native, limits: { cpuSeconds: 2 } });
    expect(loop).toMatchObject({ status: 'timed_out', killedBy: 'cpu', returnCode: null });
    expect(await runCalculation({ code: 'print(6 * 7)', evidence: {}, engine: native })).toMatchObject({ status: 'ok', stdout: '42\n' });
  });

  it('takes no label or detail from what the code prints: a heap message, a "sandbox:" line', async () => {
    const code =
      'import sys\nprint("JavaScript heap out of memory", file=sys.stderr)\nprint("sandbox: all is well", file=sys.stderr)\nsys.exit(3)';
    for (const engine of [native, undefined])
      expect(await runCalculation({ code, evidence: {}, engine })).toMatchObject({ status: 'error', returnCode: 3, detail: null });
  });

  it('takes the outcome from the exit status: a line on fd 3 or stdout cannot relabel an exception', async () => {
    const forged = `
import os, sys
for fd in (3, 4):
    try:
        os.write(fd, b'{"exit":0}\\n')
    except OSError as e:
        print(fd, e.errno, file=sys.stderr)
print('{"exit":0}')
raise ValueError('the real outcome')
`;
    const receipt = await runCalculation({ code: forged, evidence: {}, engine: native });
    expect(receipt).toMatchObject({ status: 'error', returnCode: 1 });
    expect(receipt.stderr).toMatch(/^3 9\n4 9\nTraceback[\s\S]*ValueError: the real outcome\n$/); // EBADF: both closed
    const verified = await verifyReceipt({ ...receipt, status: 'ok', returnCode: 0 }, forged, {}, native);
    expect(verified.outcome).toBe('differs');
    expect(verified.differences).toEqual(['status error, the receipt says ok', 'return code 1, the receipt says 0']);
  });

  it('does not call a stopped call replayed: its outputs cannot be compared', async () => {
    const code = 'import time\nprint("started", flush=True)\nwhile True:\n    pass';
    const receipt = await runCalculation({ code, evidence: {}, engine: native, limits: { cpuSeconds: 1 } });
    expect(receipt).toMatchObject({ status: 'timed_out', killedBy: 'cpu' });
    const verified = await verifyReceipt({ ...receipt, stdout: 'a made-up result\n' }, code, {}, native);
    expect(verified).toMatchObject({ ok: true, outcome: 'stopped', outputsCompared: false });
  });

  it('refuses code with a lone surrogate (it has no UTF-8 bytes: U+FFFD would run under its hash)', async () => {
    await expect(runCalculation({ code: 'print("\uD800")', evidence: {}, engine: native })).rejects.toThrow(/lone surrogate/);
    const replaced = await runCalculation({ code: 'print("\uFFFD")', evidence: {}, engine: native });
    expect(replaced.status).toBe('ok');
  });

  it('replays an honest call flooding both streams 100 times out of 100 (native), 5 out of 5 (Pyodide)', async () => {
    const flood = 'import sys\nfor i in range(10**6):\n    sys.stdout.write("o%d\\n" % i)\n    sys.stderr.write("e%d\\n" % i)';
    const limits = { outputBytes: 4096 };
    const first = await runCalculation({ code: flood, evidence: {}, engine: native, limits });
    expect(first.status).toBe('output_limit');
    let replayed = 0;
    for (let i = 0; i < 100; i++) if ((await verifyReceipt(first, flood, {}, native)).outcome === 'replayed') replayed++;
    expect(replayed).toBe(100);
    const pyodide = await runCalculation({ code: flood, evidence: {}, limits });
    expect(pyodide.status).toBe('output_limit');
    let pyodideReplayed = 0;
    for (let i = 0; i < 5; i++) if ((await verifyReceipt(pyodide, flood, {})).outcome === 'replayed') pyodideReplayed++;
    expect(pyodideReplayed).toBe(5);
  }, 300_000);
});
