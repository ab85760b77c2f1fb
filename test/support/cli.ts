// Running the wwref command line in tests: as a real process (bin/wwref.mjs), or in this process through
// runCli, the function bin/wwref.mjs runs, with stdout and stderr captured and the working folder and
// environment restored afterwards (about fifty times faster than starting a process).
import { execa } from 'execa';
import { join } from 'node:path';
import { runCli } from '../../pipelines/cli/main.ts';
import { ROOT } from '../../pipelines/core/paths.ts';

export const BIN = join(ROOT, 'bin', 'wwref.mjs');

export interface CliOutcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** `node bin/wwref.mjs ...args` in `cwd`, with `env` added to this process's environment. */
export async function cliProcess(args: string[], cwd: string, env: Record<string, string> = {}): Promise<CliOutcome> {
  const result = await execa('node', [BIN, ...args], { cwd, env, reject: false });
  return { code: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr) };
}

/**
 * The command line run in this process, in `cwd`. A call of process.exit (which would end the test
 * worker) is turned into an error, which the command line then reports as an internal error.
 */
export async function cliInProcess(args: string[], cwd: string): Promise<CliOutcome> {
  const out: string[] = [];
  const err: string[] = [];
  const writes = { stdout: process.stdout.write, stderr: process.stderr.write };
  const env = { ...process.env };
  const exit = process.exit;
  const here = process.cwd();
  process.stdout.write = ((chunk: string | Uint8Array) => out.push(String(chunk)) > 0) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => err.push(String(chunk)) > 0) as typeof process.stderr.write;
  process.exit = ((code?: number) => {
    throw new Error(`the command line called process.exit(${code}) in process`);
  }) as typeof process.exit;
  process.chdir(cwd);
  try {
    const code = await runCli(args);
    return { code, stdout: out.join(''), stderr: err.join('') };
  } finally {
    process.chdir(here);
    process.exit = exit;
    process.stdout.write = writes.stdout;
    process.stderr.write = writes.stderr;
    for (const key of Object.keys(process.env)) if (!(key in env)) delete process.env[key];
    Object.assign(process.env, env);
  }
}
