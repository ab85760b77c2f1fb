// The interpreter's memory snapshot: Pyodide started once (no agent code) in the same sandbox, its
// WebAssembly memory saved, and bound read-only into every later call, which then skips most of
// Python's start-up (about 4 CPU seconds down to about 0.5). Kept under .tools/, named by everything
// that shapes it (Pyodide's files, the runner, node), made again when any of them changes.
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { ROOT } from '../../core/paths.ts';
import { UserError } from '../../core/errors.ts';
import { PYODIDE_RUNNER, pyodideEngine, pyodideInstall } from './engines.ts';
import { DEFAULT_LIMITS, sandboxArgv, startSandbox, type Tools } from './isolation.ts';

const SNAPSHOT_DIR = join(ROOT, '.tools', 'pyodide-snapshot');
const MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024;
let made: Promise<string> | undefined;

function snapshotKey(): string {
  const { node, pyodide } = pyodideInstall();
  const hash = createHash('sha256');
  for (const file of ['package.json', 'pyodide.asm.wasm', 'pyodide.asm.mjs', 'python_stdlib.zip'])
    hash.update(readFileSync(join(pyodide, file)));
  hash.update(readFileSync(PYODIDE_RUNNER));
  hash.update(`${node} ${process.version} ${process.arch}`);
  return hash.digest('hex').slice(0, 24);
}

async function makeSnapshot(tools: Tools, path: string): Promise<void> {
  const child = startSandbox(sandboxArgv(tools, DEFAULT_LIMITS, pyodideEngine.command(tools, DEFAULT_LIMITS)));
  const chunks: Buffer[] = [];
  let size = 0;
  let stderr = '';
  let status = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_SNAPSHOT_BYTES) chunks.push(chunk);
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    if (stderr.length < 4096) stderr += chunk.toString('utf8');
  });
  (child.stdio[3] as Readable).on('data', (chunk: Buffer) => {
    status += chunk.toString('utf8');
  });
  const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 120_000);
  child.stdin!.end(JSON.stringify({ makeSnapshot: true }));
  const code = await new Promise<number | null>((resolve) => {
    child.on('error', () => resolve(null));
    child.on('close', (c) => resolve(c));
  });
  clearTimeout(timer);
  const bytes = Buffer.concat(chunks);
  if (code !== 0 || status.trim() !== JSON.stringify({ snapshot: bytes.length }))
    throw new UserError(`the interpreter snapshot could not be made (exit ${code}): ${stderr.trim().split('\n')[0] ?? ''}`);
  mkdirSync(SNAPSHOT_DIR, { recursive: true });
  const partial = `${path}.${process.pid}.tmp`;
  writeFileSync(partial, bytes);
  // readable by `nobody`, who makes the sandbox when we are root, whatever our umask
  chmodSync(SNAPSHOT_DIR, 0o755);
  chmodSync(partial, 0o644);
  renameSync(partial, path); // atomic: a concurrent maker writes the same bytes
}

/** The path of the snapshot for these tools, made first if missing (once per process at most). */
export function interpreterSnapshot(tools: Tools): Promise<string> {
  made ??= (async () => {
    const path = join(SNAPSHOT_DIR, `${snapshotKey()}.bin`);
    if (!existsSync(path)) await makeSnapshot(tools, path);
    return path;
  })();
  made.catch(() => {
    made = undefined; // a failure is not remembered: the next call tries again
  });
  return made;
}
