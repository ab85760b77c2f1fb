// The wwref command line: wiring only. Each command lives in commands/<name>.ts; this file builds the
// settings once (flags, wwref.config.json, the environment: core/settings.ts), checks what every
// command shares, runs the command and turns its outcome into an exit status. A UserError is printed
// as one line (exit 2), a stopped job exits 128 + signal, anything else is an internal error (1).
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import yargs, { type ArgumentsCamelCase } from 'yargs';
import { hideBin } from 'yargs/helpers';
import * as z from 'zod';
import { readConfig } from '../core/config.ts';
import { Interrupted, UserError } from '../core/errors.ts';
import { ROOT } from '../core/paths.ts';
import { loadSettings, type Settings } from '../core/settings.ts';
import { checkReferenceFolder } from '../references/folder.ts';
import type { Command } from './command.ts';
import acquire from './commands/catalog/acquire.ts';
import addSource from './commands/catalog/add-source.ts';
import audit from './commands/runs/audit.ts';
import diff from './commands/analysis/diff.ts';
import doctor from './commands/runs/doctor.ts';
import effects from './commands/analysis/effects.ts';
import cohort from './commands/evaluation/cohort.ts';
import connect from './commands/evaluation/connect.ts';
import controls from './commands/evaluation/controls.ts';
import episode from './commands/evaluation/episode.ts';
import serve from './commands/evaluation/serve.ts';
import task from './commands/evaluation/task.ts';
import exportCommand from './commands/analysis/export.ts';
import families from './commands/catalog/families.ts';
import grade from './commands/analysis/grade.ts';
import list from './commands/catalog/list.ts';
import newSource from './commands/catalog/new-source.ts';
import planSchema from './commands/catalog/plan-schema.ts';
import prepare from './commands/catalog/prepare.ts';
import rebuild from './commands/runs/rebuild.ts';
import replay from './commands/runs/replay.ts';
import report from './commands/analysis/report.ts';
import worker from './commands/runs/worker.ts';
import { checkBareValues, checkWorkers } from './options.ts';

// Every command module is imported here, so each one is light: at its top it imports only what its
// options need (cli/*.ts, core/errors.ts, node:*), and its run() loads the work it does with
// `await import(...)` (jobs, the store and Apache Arrow, the Python launcher, the MCP SDK). A command
// then starts without loading any other's modules; test/cli/startup.test.ts checks it on the build.
export const COMMANDS: Command[] = [
  list,
  acquire,
  prepare,
  rebuild,
  replay,
  audit,
  effects,
  grade,
  report,
  diff,
  addSource,
  newSource,
  planSchema,
  exportCommand,
  families,
  worker,
  doctor,
  episode,
  task,
  serve,
  controls,
  cohort,
  connect,
];

/**
 * The settings of this run: --references (unless the command's own), --runtime and --mirror on top of
 * the file and `env`; and the reference folder the command names (checked, not yet read).
 */
function settingsFor(
  argv: ArgumentsCamelCase<Record<string, unknown>>,
  command: Command | undefined,
  env: NodeJS.ProcessEnv,
): { settings: Settings; target: string } {
  const own = command?.ownReferences?.(argv as never) ?? false;
  const references = typeof argv.references === 'string' ? argv.references : undefined;
  if (references !== undefined && references.trim() === '') throw new UserError('--references needs a folder');
  if (argv.runtime !== undefined && (typeof argv.runtime !== 'string' || argv.runtime.trim() === ''))
    throw new UserError('--runtime needs a name (see runtimes in wwref.config.json)');
  const mirrors = Array.isArray(argv.mirror) ? argv.mirror.map(String) : [];
  // a mirror named here is one the user means to be read: one that is no folder is a mistake, not a miss
  for (const mirror of mirrors)
    if (!statSync(mirror, { throwIfNoEntry: false })?.isDirectory()) throw new UserError(`--mirror ${mirror} is not a folder`);
  const settings = loadSettings({ references: own ? undefined : references, runtime: argv.runtime as string | undefined, mirrors }, env);
  // a reference folder is never inside prepared/, the raw cache or manifests/ (nor around them)
  const target = own && references !== undefined ? resolve(references) : settings.paths.references;
  checkReferenceFolder(target, settings.paths);
  return { settings, target };
}

/** The references of one runtime are never replaced by another's (the commands that write references). */
async function checkTarget(command: Command, target: string, settings: Settings): Promise<void> {
  if (command !== rebuild && command !== addSource) return;
  const { checkRuntimeTarget } = await import('../execution/identity.ts');
  const { ReferenceStore } = await import('../references/store.ts');
  checkRuntimeTarget(target, new ReferenceStore(target, settings.paths).manifest()?.versions, settings.runtime);
}

async function main(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  readConfig(ROOT); // a malformed wwref.config.json is reported by every command, --help included
  let exitCode = 0;
  let settings: Settings | undefined;
  let target = '';
  let cli = yargs(args)
    .scriptName('wwref')
    .usage('$0 <command> [options]\n\nNative-execution reference pipeline for the WhatWorkedBench catalog.')
    .middleware((argv) => {
      checkBareValues(args);
      checkWorkers(argv);
      ({ settings, target } = settingsFor(
        argv,
        COMMANDS.find((c) => commandName(c) === argv._[0]),
        env,
      ));
    });
  for (const command of COMMANDS) {
    cli = cli.command(command.command, command.describe, command.builder, async (argv) => {
      const out = (line = '') => process.stdout.write(`${line}\n`);
      await checkTarget(command, target, settings!);
      exitCode = (await command.run(argv, { settings: settings!, out })) ?? 0;
    });
  }
  await cli
    .demandCommand(1, 'name a command (see --help)')
    .strict()
    .help()
    .fail((message, error) => {
      // yargs spreads some messages over lines ("Invalid values:\n  Argument: ..."): one line here
      throw error ?? new UserError(commandMistake(args, message) ?? message.replace(/\s*\n\s*/g, ' '));
    })
    .parseAsync();
  return exitCode;
}

/** A command's word: `episode` of 'episode <action>'. */
const commandName = (command: Command): string => command.command.split(' ')[0]!;

/**
 * yargs' message for a mistake in the command word itself, said in the user's terms: an unknown
 * command ("Unknown argument: lsit") with the commands there are, and a command without its
 * positional arguments ("Not enough non-option arguments: got 0 …") with what it needs.
 */
function commandMistake(args: readonly string[], message: string): string | undefined {
  const word = args.find((a) => !a.startsWith('-'));
  if (word === undefined) return undefined;
  const command = COMMANDS.find((c) => commandName(c) === word);
  if (!command && message === `Unknown argument: ${word}`)
    return `unknown command '${word}'; the commands: ${COMMANDS.map(commandName).sort().join(', ')} (wwref --help)`;
  if (command && /^Not enough non-option arguments/.test(message)) {
    const needs = command.command
      .split(' ')
      .slice(1)
      .filter((w) => w.startsWith('<'))
      .join(' '); // the required ones
    return `${word} needs ${needs} (wwref ${word} --help)`;
  }
  return undefined;
}

const ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * A user error as one line (and the `  - ` items listing several problems, each on its own line):
 * control characters inside it, as in a file name given on the command line, are shown escaped.
 */
function oneLine(message: string): string {
  return message
    .split(/\n(?= {2}- )/)
    .map((part) => part.replace(/[\u0000-\u001f\u007f]/g, (c) => ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`))
    .join('\n');
}

/**
 * Runs the command line on `args` (without `node` and the script) under `env` and returns the exit
 * status: a UserError is printed as one line (status 2), a stopped job with its signal's status, and
 * anything else is an internal error with its stack (1).
 */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  try {
    return await main(args, env);
  } catch (error) {
    if (error instanceof UserError) {
      process.stderr.write(`wwref: ${oneLine(error.message)}\n`);
      return error instanceof Interrupted ? error.exitCode : 2;
    }
    process.stderr.write(`wwref: internal error: ${(error as Error).stack ?? String(error)}\n`);
    return 1;
  }
}

/** The status of a process whose output's reader went away, as of one a SIGPIPE ended (128 + 13). */
export const READER_GONE = 141;

/**
 * Watches stdout or stderr for a failed write: without a listener the error (EPIPE when the reader
 * has gone, `wwref … | head`; ENOSPC for a full disk behind `>file`) would end the process with a stack
 * trace. After one the rest of that stream's output is dropped (writes to a failed stream are
 * discarded) and the command finishes its work, so nothing it writes to files is left half done.
 * Returns the failure's code, if any.
 */
function watchOutput(stream: NodeJS.WriteStream): () => NodeJS.ErrnoException | undefined {
  let failed: NodeJS.ErrnoException | undefined;
  stream.on('error', (error: NodeJS.ErrnoException) => {
    failed ??= error;
  });
  // a write that failed just before exit is known to the stream before its 'error' event is emitted
  return () => failed ?? ((stream.errored ?? undefined) as NodeJS.ErrnoException | undefined);
}

/**
 * Resolves once everything written to `stream` so far has been handed to the system: Node writes to a
 * pipe asynchronously once the pipe is full, and process.exit drops what is still queued (a slow
 * reader got 170 kB of 236 kB). Writes complete in order, so an empty write's callback comes last.
 */
function drained(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || stream.writableLength === 0) return Promise.resolve();
  return new Promise((done) => stream.write('', () => done()));
}

/**
 * `node bin/wwref.mjs ...`: runs the command line and exits with its status once stdout and stderr
 * are delivered. When one could not be: a reader that went away (EPIPE) is said by no line, as by any
 * program a SIGPIPE ends, and exits READER_GONE; another failure (a full disk behind `>file`) is one
 * line on stderr, exit 2; a command that failed keeps its own status.
 */
export async function cliProcess(): Promise<never> {
  // zod checks the same rules either way; by default it compiles a parser of its own for each object
  // schema on first use (new Function), which a process that parses a few plans and a manifest once
  // pays for and never gets back: some 20 ms of `wwref list` or `episode status` (scripts/bench.ts)
  z.config({ jitless: true });
  const stdoutFailed = watchOutput(process.stdout);
  const stderrFailed = watchOutput(process.stderr);
  let code = await runCli(hideBin(process.argv));
  await drained(process.stdout);
  await drained(process.stderr);
  const [out, err] = [stdoutFailed(), stderrFailed()];
  const gone = (failure?: NodeJS.ErrnoException) => failure?.code === 'EPIPE';
  if (code === 0 && ((out && !gone(out)) || (err && !gone(err)))) {
    if (out && !gone(out) && !err) {
      const { fsError } = await import('../core/fsutil.ts');
      process.stderr.write(`wwref: ${fsError(out, 'write', 'stdout').message}; the output is incomplete\n`);
      await drained(process.stderr);
    }
    code = 2;
  } else if (code === 0 && (gone(out) || gone(err))) code = READER_GONE;
  process.exit(code);
}
