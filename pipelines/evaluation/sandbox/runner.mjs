// Runs ONE calculation inside the OS sandbox (see README.md): plain JavaScript, started by
// `node --experimental-permission … /sbx/runner.mjs` in a fresh process. Reads {code, evidence} as JSON
// on stdin, runs the code in Pyodide with `evidence` defined, writes the code's raw stdout/stderr bytes
// to fd 1/2, says on fd 3 that it is ready (then closes it), and exits with the program's exit status:
// the outcome is what the supervisor sees of this process, never a line it writes. Nothing here is a
// security boundary: the code can reach everything this process can; the boundary is the OS sandbox.
import { createHash } from 'node:crypto';
import crypto from 'node:crypto';
import fs from 'node:fs';

const SBX = '/sbx';
const CLOCK_START_MS = 1767225600000; // 2026-01-01T00:00:00Z: the clock every calculation starts at

// NODEFS (which Pyodide sets up at load) reads file-flag constants through process.binding, which the
// permission model denies; hand it those constants and nothing else.
const denyBinding = process.binding;
process.binding = (name) => (name === 'constants' ? { fs: fs.constants, os: { signals: {} } } : denyBinding.call(process, name));

// Determinism: Pyodide draws os.urandom (and so `random`'s seed, uuid4, tempfile names) from
// crypto.randomFillSync and reads the clocks through Date.now / performance.now. Replace them with a
// fixed byte stream and a virtual clock that advances 1 ms at every reading.
let counter = 0;
crypto.randomFillSync = (view, offset = 0, size) => {
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  const end = size === undefined ? bytes.length : offset + size;
  for (let i = offset; i < end; ) {
    const block = createHash('sha256').update(`wwref-sandbox-random-${counter++}`).digest();
    for (let k = 0; k < block.length && i < end; k++, i++) bytes[i] = block[k];
  }
  return view;
};
let ticks = 0;
const resetClock = () => {
  ticks = 0;
};
Date.now = () => CLOCK_START_MS + ticks++;
globalThis.performance.now = () => ticks++;
// `new Date()` and `Date()` read the same virtual clock (the real one stays readable to code that looks
// for it elsewhere: the kernel serves clocks without a system call; see README.md)
const RealDate = Date;
globalThis.Date = new Proxy(RealDate, {
  construct: (target, args, newTarget) => Reflect.construct(target, args.length ? args : [RealDate.now()], newTarget),
  apply: () => new RealDate(RealDate.now()).toString(),
});

/** The modules the driver imports, imported before a snapshot is taken. */
const PRELOAD = 'import ast, errno, inspect, json, os, sys, traceback';

/** A line on fd 3: the snapshot's size, or that the code starts now (the descriptor is then closed). */
function status(object) {
  fs.writeSync(3, `${JSON.stringify(object)}\n`);
}

const input = JSON.parse(fs.readFileSync(0, 'utf8'));
const { loadPyodide } = await import(`${SBX}/pyodide/pyodide.mjs`);
const options = {
  indexURL: `${SBX}/pyodide/`,
  env: { PYTHONHASHSEED: '0', HOME: '/home/pyodide', TZ: 'UTC', LANG: 'C.UTF-8' },
  stdout: () => {},
  stderr: () => {},
};
// A memory snapshot of the interpreter after start-up (made once by this script in snapshot mode, in
// the same sandbox, and bound read-only at /sbx/snapshot) skips most of Python's initialisation.
if (input.makeSnapshot) options._makeSnapshot = true;
else if (fs.existsSync(`${SBX}/snapshot`)) options._loadSnapshot = fs.readFileSync(`${SBX}/snapshot`);
const pyodide = await loadPyodide(options);
if (input.makeSnapshot) {
  pyodide.runPython(PRELOAD);
  const snapshot = pyodide.makeMemorySnapshot();
  for (let done = 0; done < snapshot.length; ) done += fs.writeSync(1, snapshot, done, snapshot.length - done);
  status({ snapshot: snapshot.length });
  process.exit(0);
}
const writeAll = (fd) => ({
  isatty: false,
  write(buffer) {
    let done = 0;
    while (done < buffer.length) done += fs.writeSync(fd, buffer, done, buffer.length - done);
    return buffer.length;
  },
});
pyodide.setStdout(writeAll(1));
pyodide.setStderr(writeAll(2));

pyodide.FS.mkdirTree('/wwref');
pyodide.FS.writeFile('/wwref/wwref_helpers.py', fs.readFileSync(`${SBX}/wwref_helpers.py`));
pyodide.FS.writeFile('/home/pyodide/evidence.json', input.evidence);
pyodide.globals.set('_wwref_code', input.code);

// The driver runs the code as `__main__` with CPython's own rules for SystemExit and tracebacks
// (frames of the driver left out), and reports whether an uncaught MemoryError ended it. Top-level
// `await` is allowed (asyncio, JavaScript promises); whatever is still pending when the code returns
// is dropped with the process.
const DRIVER = `
import ast, errno, inspect, json, os, sys, traceback
sys.path.insert(0, '/wwref')
def _no_system(command):
    # Emscripten's system() would call child_process, which the sandbox denies with a fatal error
    raise OSError(errno.ENOSYS, 'the calculation sandbox starts no process')
os.system = _no_system
sys.argv = ['<calculation>']
with open('/home/pyodide/evidence.json', encoding='utf-8') as _f:
    _evidence = json.load(_f)
_ns = {'__name__': '__main__', '__builtins__': __builtins__, 'evidence': _evidence,
       'task': _evidence.get('task'), 'observations': _evidence.get('observations')}
_exit = 0
try:
    _result = eval(compile(_wwref_code, '<calculation>', 'exec', flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), _ns)
    if inspect.iscoroutine(_result):
        await _result
except SystemExit as _e:
    if _e.code is None:
        _exit = 0
    elif isinstance(_e.code, int):
        _exit = _e.code & 0xFF
    else:
        print(_e.code, file=sys.stderr)
        _exit = 1
except BaseException as _e:
    _exit = 1
    traceback.print_exception(type(_e), _e, _e.__traceback__.tb_next)
for _s in (sys.stdout, sys.stderr):
    try:
        _s.flush()
    except Exception:
        pass
_exit
`;
// os._exit(n) ends Emscripten's program with an `Exit` error (thrown, or uncaught from a callback):
// the exit status n; any other error outside the driver's reach is said in one line on stderr
function ended(error) {
  if ((error?.name === 'Exit' || error?.name === 'ExitStatus') && Number.isInteger(error.status)) process.exit(error.status & 0xff);
  fs.writeSync(
    2,
    `sandbox: the interpreter failed: ${String(error?.message ?? error)
      .split('\n')[0]
      .slice(0, 300)}\n`,
  );
  process.exit(1);
}
process.on('uncaughtException', ended);
process.on('unhandledRejection', ended);
// the limits on CPU and wall time count from here: the interpreter's start-up is not the code's
status({ ready: true });
fs.closeSync(3);
resetClock();
let exit;
try {
  exit = await pyodide.runPythonAsync(DRIVER, { filename: '<wwref-driver>' });
} catch (error) {
  ended(error);
}
process.exit(exit);
