// The calculation sandbox's seccomp filter: its bytes checked as a program (and run through a small
// interpreter of the instructions it uses, for both architectures), then installed for real by
// bubblewrap and by Python's prctl, with every refused call made directly. Nothing mocked.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import {
  refusedSyscalls,
  type SeccompArch,
  type SeccompOptions,
  seccompArch,
  seccompFilter,
  syscallNumber,
} from '../../pipelines/evaluation/sandbox/seccomp.ts';

const ARCHES: SeccompArch[] = ['x64', 'arm64'];
const OPTIONS: SeccompOptions[] = ARCHES.flatMap((arch) => [true, false].map((allowExec) => ({ arch, allowExec })));
const AUDIT_ARCH = { x64: 0xc000003e, arm64: 0xc00000b7, i386: 0x40000003 };
const RET = { kill: 0x80000000, allow: 0x7fff0000, errno: 0x00050000 };
const ERRNO: Record<string, number> = { EPERM: 1, ENOSYS: 38, EAFNOSUPPORT: 97 };
const CLONE_THREAD = 0x10000;
const THREAD_FLAGS = 0x3d0f00; // glibc's pthread_create: VM, FS, FILES, SIGHAND, THREAD, SYSVSEM, SETTLS, PARENT_SETTID, CHILD_CLEARTID
const NAMESPACE_FLAGS = [0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000];

interface Instruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

function decode(bytes: Buffer): Instruction[] {
  return Array.from({ length: bytes.length / 8 }, (_, i) => ({
    code: bytes.readUInt16LE(i * 8),
    jt: bytes.readUInt8(i * 8 + 2),
    jf: bytes.readUInt8(i * 8 + 3),
    k: bytes.readUInt32LE(i * 8 + 4),
  }));
}

/** What the filter returns for one system call, run as the kernel runs it (the four instructions it uses). */
function evaluate(bytes: Buffer, call: { arch: number; nr: number; arg0?: bigint; arg1?: bigint }): number {
  const data = Buffer.alloc(64);
  data.writeUInt32LE(call.nr >>> 0, 0);
  data.writeUInt32LE(call.arch >>> 0, 4);
  data.writeBigUInt64LE(BigInt.asUintN(64, call.arg0 ?? 0n), 16);
  data.writeBigUInt64LE(BigInt.asUintN(64, call.arg1 ?? 0n), 24);
  const program = decode(bytes);
  let a = 0;
  for (let pc = 0; pc < program.length; ) {
    const { code, jt, jf, k } = program[pc]!;
    if (code === 0x20) {
      a = data.readUInt32LE(k);
      pc += 1;
    } else if (code === 0x15) pc += 1 + (a === k ? jt : jf);
    else if (code === 0x45) pc += 1 + ((a & k) >>> 0 !== 0 ? jt : jf);
    else if (code === 0x06) return k;
    else throw new Error(`unexpected instruction ${code} at ${pc}`);
  }
  throw new Error('ran off the end of the program');
}

describe('seccomp filter program', () => {
  it('is the same bytes every time, whole sock_filter entries, every jump inside the program, every path ending in a return', () => {
    for (const options of OPTIONS) {
      const bytes = seccompFilter(options);
      expect(seccompFilter({ ...options }).equals(bytes)).toBe(true);
      expect(bytes.length % 8).toBe(0);
      const program = decode(bytes);
      // the kernel's limit is 4096 instructions
      expect(program.length).toBeLessThan(4096);
      program.forEach(({ code, jt, jf, k }, i) => {
        expect([0x20, 0x15, 0x45, 0x06]).toContain(code);
        if (code === 0x20) expect(k % 4 === 0 && k < 64, `load at ${i}`).toBe(true);
        if (code === 0x15 || code === 0x45) expect(i + 1 + Math.max(jt, jf), `jump at ${i}`).toBeLessThan(program.length);
        else expect([jt, jf]).toEqual([0, 0]);
      });
      expect(program.at(-1)!.code).toBe(0x06);
    }
    // execve is one more check only when exec is refused
    expect(seccompFilter({ arch: 'x64', allowExec: false }).length).toBe(seccompFilter({ arch: 'x64', allowExec: true }).length + 16);
    expect(() => seccompFilter({ arch: 'ia32' as SeccompArch, allowExec: true })).toThrow(/no filter for architecture ia32/);
  });

  it('names the architectures it has a table for', () => {
    expect(seccompArch('x64')).toBe('x64');
    expect(seccompArch('arm64')).toBe('arm64');
    expect(seccompArch('ia32')).toBeNull();
    expect(seccompArch('riscv64')).toBeNull();
    expect(seccompArch()).toBe(process.arch === 'x64' || process.arch === 'arm64' ? process.arch : null);
  });

  it('lists only calls the architecture has, each with its number', () => {
    for (const options of OPTIONS) {
      const refused = refusedSyscalls(options);
      const names = refused.map((r) => r.name);
      expect(new Set(names).size).toBe(names.length);
      for (const { name, errno } of refused) {
        expect(syscallNumber(options.arch, name), name).toBeTypeOf('number');
        expect(Object.keys(ERRNO)).toContain(errno);
      }
      expect(names.includes('execve')).toBe(!options.allowExec);
      expect(names).toContain('execveat');
      expect(refused.filter((r) => r.when).map((r) => r.name)).toEqual(['clone', 'socketpair', 'setsockopt', 'getsockopt', 'fcntl']);
    }
    const x64 = refusedSyscalls({ arch: 'x64', allowExec: true }).map((r) => r.name);
    const arm64 = refusedSyscalls({ arch: 'arm64', allowExec: true }).map((r) => r.name);
    expect(x64).toEqual(expect.arrayContaining(['fork', 'vfork', 'iopl', 'modify_ldt', '_sysctl', 'ptrace', 'sysinfo']));
    expect(arm64).toEqual(expect.arrayContaining(['ptrace', 'sysinfo', 'shmget', 'mount']));
    expect(arm64.filter((n) => ['fork', 'vfork', 'iopl', 'modify_ldt', '_sysctl', 'uselib'].includes(n))).toEqual([]);
    expect(syscallNumber('x64', 'ptrace')).toBe(101);
    expect(syscallNumber('arm64', 'ptrace')).toBe(117);
    expect(syscallNumber('arm64', 'fork')).toBeUndefined();
    expect(syscallNumber('x64', 'constructor')).toBeUndefined();
  });

  it.each(ARCHES)('decides as specified on %s (run through an interpreter of the program)', (arch) => {
    for (const allowExec of [true, false]) {
      const bytes = seccompFilter({ arch, allowExec });
      const call = (nr: number, arg0?: bigint) => evaluate(bytes, { arch: AUDIT_ARCH[arch], nr, arg0 });
      const nr = (name: string) => syscallNumber(arch, name)!;
      const refused = refusedSyscalls({ arch, allowExec });
      for (const { name, errno, when } of refused) if (!when) expect(call(nr(name)), name).toBe(RET.errno | ERRNO[errno]!);
      // everything else, up to well past the last number there is, is allowed
      const named = new Set(refused.map((r) => nr(r.name)));
      for (let n = 0; n < 1024; n++) if (!named.has(n)) expect(call(n), `syscall ${n}`).toBe(RET.allow);
      // the other conventions die at their first call, whatever it is
      for (const other of Object.values(AUDIT_ARCH).filter((a) => a !== AUDIT_ARCH[arch]))
        for (const n of [0, 1, nr('clone'), nr('socket')]) expect(evaluate(bytes, { arch: other, nr: n })).toBe(RET.kill);
      // x32 numbers on x86-64 die; arm64 has no such table (the kernel answers ENOSYS)
      expect(call(0x40000000 + 39)).toBe(arch === 'x64' ? RET.kill : RET.allow);
      // clone: threads yes, processes and namespaces no; only the low word of the flags is read
      expect(call(nr('clone'), BigInt(THREAD_FLAGS))).toBe(RET.allow);
      expect(call(nr('clone'), BigInt(THREAD_FLAGS) | (0xffn << 32n))).toBe(RET.allow);
      expect(call(nr('clone'), 0x11n)).toBe(RET.errno | ERRNO.EPERM!);
      expect(call(nr('clone'), BigInt(THREAD_FLAGS & ~CLONE_THREAD))).toBe(RET.errno | ERRNO.EPERM!);
      for (const flag of NAMESPACE_FLAGS) expect(call(nr('clone'), BigInt(THREAD_FLAGS | flag))).toBe(RET.errno | ERRNO.EPERM!);
      // socket: none at all (a plain refusal above); socketpair: Unix stream pairs only
      const pair = (domain: bigint, type: bigint) =>
        evaluate(bytes, { arch: AUDIT_ARCH[arch], nr: nr('socketpair'), arg0: domain, arg1: type });
      expect(pair(1n, 1n)).toBe(RET.allow);
      expect(pair(1n, 0x80801n)).toBe(RET.allow); // SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC
      for (const type of [2n, 3n, 5n, 0x80002n]) expect(pair(1n, type)).toBe(RET.errno | ERRNO.EPERM!); // datagram, raw, seqpacket
      for (const domain of [0n, 2n, 10n, 16n, 17n, 40n, 0x100000002n, -1n]) expect(pair(domain, 1n)).toBe(RET.errno | ERRNO.EAFNOSUPPORT!);
      // the kernel reads the domain as an int: high bits are no other family
      expect(pair(0x100000001n, 1n)).toBe(RET.allow);
    }
  });
});

// ---- the filter installed for real ------------------------------------------------------------------

const PYTHON = join(ROOT, '.venv', 'bin', 'python');
const BWRAP = (process.env.PATH ?? '/usr/bin:/bin')
  .split(':')
  .map((dir) => join(dir, 'bwrap'))
  .find((path) => existsSync(path));
const SANDBOX = [
  ...['--unshare-all', '--unshare-user', '--uid', '65534', '--gid', '65534', '--die-with-parent', '--new-session'],
  ...['--cap-drop', 'ALL', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp'],
];
const ARCH = seccompArch();

function skipReason(): string | null {
  if (process.platform !== 'linux') return `seccomp is Linux's (this is ${process.platform})`;
  if (!ARCH) return `no filter is written for ${process.arch}`;
  if (!BWRAP) return 'bubblewrap (bwrap) is not installed';
  if (!existsSync(PYTHON)) return `no Python at ${PYTHON} (npm run setup)`;
  const check = spawnSync(BWRAP, [...SANDBOX, '--', PYTHON, '-c', 'print("ok")'], { encoding: 'utf8', timeout: 30_000 });
  if (check.stdout !== 'ok\n') return `bubblewrap cannot make a sandbox here: ${(check.stderr || String(check.error)).trim()}`;
  return null;
}
const SKIP = skipReason();
const SIGSYS_EXIT = 128 + 31; // bubblewrap exits 128 + the signal that ended the command

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Python's `-c script` in bubblewrap, the filter (if any) given on fd 3 through a pipe, `stdin` on fd 0. */
async function sandboxed(script: string, options: { filter?: Buffer; args?: string[]; stdin?: Buffer } = {}): Promise<Run> {
  const argv = [...SANDBOX, ...(options.filter ? ['--seccomp', '3'] : []), '--', PYTHON, '-c', script, ...(options.args ?? [])];
  const child = spawn(BWRAP!, argv, {
    env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', PYTHONDONTWRITEBYTECODE: '1' },
    stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe', ...(options.filter ? (['pipe'] as const) : [])],
  });
  if (options.filter) (child.stdio[3] as Writable).on('error', () => {}).end(options.filter);
  if (options.stdin) child.stdin!.on('error', () => {}).end(options.stdin);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { status, stdout, stderr };
}

async function sandboxedJson(script: string, options: Parameters<typeof sandboxed>[1] = {}): Promise<Record<string, string>> {
  const run = await sandboxed(script, options);
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout);
}

/** Calls each {name: number} directly with every argument -1 and prints {name: errno name, or "ok"}. */
const PROBE = `
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
args = [ctypes.c_long(-1)] * 6
found = {}
for name, nr in json.loads(sys.argv[1]).items():
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *args)
    if result == 0 and name in ("fork", "vfork", "clone"):
        os._exit(0)  # a process the filter should have refused: only the parent reports
    code = ctypes.get_errno()
    found[name] = "ok" if result >= 0 else errno.errorcode.get(code, str(code))
print(json.dumps(found))
`;

/** Python that runs named attempts and prints {name: "OK:…" | "ERR:<errno name>" | "ERR:<exception>"} as JSON. */
function attempts(body: string): string {
  return `
import errno, json, os, sys
results = {}
def attempt(name, fn):
    try:
        results[name] = "OK:" + str(fn())[:200]
    except OSError as e:
        results[name] = "ERR:" + errno.errorcode.get(e.errno, str(e.errno))
    except BaseException as e:
        results[name] = "ERR:" + type(e).__name__ + ":" + str(e)[:200]
${body}
print(json.dumps(results))
`;
}

/** Installs the sock_filter bytes read on stdin as a second filter (as a runner would), then runs the body. */
const INSTALL = `
import ctypes, sys
class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
def install_filter():
    data = sys.stdin.buffer.read()
    program = ctypes.create_string_buffer(data, len(data))
    fprog = SockFprog(len(data) // 8, ctypes.addressof(program))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(38, 1, None, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")
    return len(data) // 8
`;

const EXEC = `attempt("exec", lambda: os.execv(sys.executable, [sys.executable, "-c", "print('{\\"exec\\": \\"ran\\"}')"]))`;

describe.skipIf(SKIP !== null)(`seccomp filter under bubblewrap${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  const arch = ARCH!;
  const filter = (allowExec: boolean) => seccompFilter({ arch, allowExec });
  const numbers = (names: string[]) => JSON.stringify(Object.fromEntries(names.map((name) => [name, syscallNumber(arch, name)!])));

  it('refuses every listed call with its errno, where the kernel alone answers otherwise', async () => {
    // setsockopt, getsockopt and fcntl are refused for some options only: the escape suite makes those calls
    const refused = refusedSyscalls({ arch, allowExec: true }).filter((r) => !['setsockopt', 'getsockopt', 'fcntl'].includes(r.name));
    const filtered = await sandboxedJson(PROBE, { filter: filter(true), args: [numbers(refused.map((r) => r.name))] });
    // every argument -1: clone's flags carry every namespace bit, socket's domain is no AF_UNIX
    expect(filtered).toEqual(Object.fromEntries(refused.map((r) => [r.name, r.errno])));
    // the same calls without the filter (less those that would make a process): mostly other answers,
    // so the answers above are the filter's (some the kernel also refuses for want of a capability)
    const harmless = refused.map((r) => r.name).filter((name) => !['fork', 'vfork', 'clone', 'clone3'].includes(name));
    const unfiltered = await sandboxedJson(PROBE, { args: [numbers(harmless)] });
    const differing = harmless.filter((name) => unfiltered[name] !== filtered[name]);
    expect(differing.length, JSON.stringify(unfiltered)).toBeGreaterThan(harmless.length * 0.75);
    // execve is refused only by the filter that says so
    const exec = await sandboxedJson(PROBE, { filter: filter(true), args: [numbers(['execve'])] });
    expect(exec.execve).toBe('EFAULT');
  });

  it('stops processes but not threads; refuses every socket but Unix stream pairs; ordinary work goes on', async () => {
    const results = await sandboxedJson(
      attempts(`
import hashlib, math, socket, subprocess, threading
def thread():
    box = []
    t = threading.Thread(target=lambda: box.append(sum(range(1000))))
    t.start()
    t.join()
    return box[0]
def pair():
    a, b = socket.socketpair()
    a.sendall(b"ping")
    return b.recv(4).decode()
def files():
    with open("/tmp/work.txt", "w") as f:
        f.write("x" * 100000)
    with open("/tmp/work.txt") as f:
        size = len(f.read())
    os.remove("/tmp/work.txt")
    return size
attempt("fork", os.fork)
attempt("subprocess", lambda: subprocess.run(["/bin/true"]).returncode)
attempt("thread", thread)
attempt("threads", lambda: __import__("concurrent.futures").futures.ThreadPoolExecutor(4).map(abs, [-1, -2]).__next__())
attempt("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt("inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))
attempt("pair", pair)
attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).fileno() > 0)
attempt("datagram pair", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))
attempt("files", files)
attempt("math", lambda: round(math.fsum(math.sin(i) ** 2 for i in range(10000)), 6))
attempt("hash", lambda: hashlib.sha256(b"abc").hexdigest()[:8])
attempt("urandom", lambda: len(os.urandom(16)))
attempt("cpus", lambda: os.cpu_count() > 0)
`),
      { filter: filter(true) },
    );
    expect(results).toEqual({
      fork: 'ERR:EPERM',
      subprocess: 'ERR:EPERM',
      thread: 'OK:499500',
      threads: 'OK:1',
      inet: 'ERR:EAFNOSUPPORT',
      inet6: 'ERR:EAFNOSUPPORT',
      netlink: 'ERR:EAFNOSUPPORT',
      pair: 'OK:ping',
      unix: 'ERR:EAFNOSUPPORT',
      'datagram pair': 'ERR:EPERM',
      files: 'OK:100000',
      math: `OK:${results.math!.slice(3)}`,
      hash: 'OK:ba7816bf',
      urandom: 'OK:16',
      cpus: 'OK:True',
    });
    expect(Number(results.math!.slice(3))).toBeCloseTo(4999.5, 0);
  });

  it('lets the command exec when allowExec; a second filter with allowExec false, installed by Python with prctl, refuses it', async () => {
    const bwrapOnly = await sandboxed(attempts(EXEC), { filter: filter(true) });
    expect(bwrapOnly.status, bwrapOnly.stderr).toBe(0);
    expect(JSON.parse(bwrapOnly.stdout)).toEqual({ exec: 'ran' });
    const layered = await sandboxedJson(
      `${INSTALL}\n${attempts(`
import threading
attempt("install", install_filter)
def thread():
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    return "joined"
attempt("thread", thread)
attempt("execveat", lambda: os.execve(os.open(sys.executable, os.O_RDONLY), [sys.executable], {}))
${EXEC}`)}`,
      { filter: filter(true), stdin: filter(false) },
    );
    expect(layered).toEqual({
      install: `OK:${filter(false).length / 8}`,
      thread: 'OK:joined',
      execveat: 'ERR:EPERM',
      exec: 'ERR:EPERM',
    });
  });

  it.skipIf(arch !== 'x64')('kills a process that makes an i386 (int 0x80) or x32 system call (x86-64 only)', async () => {
    // i386's getpid (20, asm/unistd_32.h) through int 0x80, from a page of machine code:
    // mov eax, 20; int 0x80; ret
    const i386 = `
import ctypes, mmap
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))
getpid = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
print("before", flush=True)
print("i386 getpid", getpid(), flush=True)
`;
    // x86-64's getpid (39) with the x32 bit
    const x32 = `
import ctypes
print("before", flush=True)
print("x32 getpid", ctypes.CDLL(None).syscall(ctypes.c_long(0x40000000 + 39)), flush=True)
`;
    for (const script of [i386, x32]) {
      const killed = await sandboxed(script, { filter: filter(true) });
      expect(killed).toMatchObject({ status: SIGSYS_EXIT, stdout: 'before\n' });
      // without the filter the same program runs to its end (i386's getpid answers where the kernel
      // has i386 emulation, x32's is refused with ENOSYS where it has none)
      const free = await sandboxed(script);
      expect(free.status, free.stderr).toBe(0);
      expect(free.stdout).toMatch(/^before\n(i386|x32) getpid -?\d+\n$/);
    }
  });
});
