// One run of the agent command for one episode: `/bin/sh -c CMD` in a process group of its own, its
// stdout and stderr written to files (each cut at a bound: past it the agent is stopped), ended by its
// own exit, by the episode closing (a grace period, then stopped), or by the deadline. Whatever the
// agent leaves running in its group when it ends (children, grandchildren) is killed then. A process
// that leaves the group (setsid) escapes this, unless the run is sandboxed (`sandbox`: bwrap's
// arguments, sandbox.ts): the sandbox's pid namespace ends with the agent's shell, and all in it.
import { spawn } from 'node:child_process';
import { closeSync, constants, fstatSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import { readRegularFile } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';
import { fsError, writeFileAtomic } from '../../core/fsutil.ts';

/** The bytes of each output stream kept in the episode folder; past them the agent is stopped. */
export const OUTPUT_MAX_BYTES = 1 << 20;
/** How long an agent may go on after its episode closed. */
export const GRACE_SECONDS = 3;
/** Between SIGTERM and SIGKILL of a stopped agent's group. */
const TERM_SECONDS = 1;

export interface AgentRun {
  command: string;
  cwd: string;
  /** bwrap and its arguments up to `--` (sandbox.ts `sandboxArguments`): the shell runs inside; none: as the user. */
  sandbox?: readonly string[];
  /** Written on the child's descriptor 3 (a pipe, then closed): the token bwrap makes a file of in the sandbox (`--ro-bind-data 3`). */
  data?: string;
  env: NodeJS.ProcessEnv;
  deadlineSeconds: number;
  stdoutFile: string;
  stderrFile: string;
  /** Whether the episode is closed (asked a few times a second while the agent runs). */
  closed: () => boolean;
  /** Registers the running group's killer, for a run stopped from outside (Ctrl-C). */
  onStart?: (kill: () => void) => void;
  /** Where the group's id and the run's WWREF_MCP_URL are written as soon as it runs, for `stopLeftAgent` after a kill -9. */
  groupFile?: string;
}

/** The name of the episode's file that records its agent's process group (see `stopLeftAgent`). */
export const AGENT_GROUP_FILE = 'agent.group';

/**
 * Kills what an agent run recorded in `groupFile` left running when its cohort process was killed
 * (kill -9: no cleanup ran): the processes of that group whose environment still holds the run's
 * `WWREF_MCP_URL` (a random port and the episode id), so a reused group id kills nothing else.
 * Linux (/proc) only; returns how many were killed.
 */
export function stopLeftAgent(groupFile: string): number {
  let pgid: unknown;
  let url: unknown;
  try {
    // in the agent's reach: never followed through a link, never waited on (a FIFO is refused), bounded
    ({ pgid, url } = JSON.parse(readRegularFile(groupFile, 'agent group file', 4096).toString('utf8')) as { pgid: unknown; url: unknown });
  } catch {
    return 0;
  }
  if (!Number.isInteger(pgid) || (pgid as number) <= 1 || typeof url !== 'string') return 0;
  const marker = `WWREF_MCP_URL=${url}`;
  let killed = 0;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((f) => /^\d+$/.test(f));
  } catch {
    return 0;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) !== pgid) continue;
      if (!readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(marker)) continue;
      process.kill(Number(pid), 'SIGKILL');
      killed++;
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return killed;
}

export interface AgentOutcome {
  /** The shell's exit status (127: the command was not found), or null when a signal ended it. */
  exit_code: number | null;
  signal: string | null;
  /** Why the agent was stopped, when it did not end by itself: deadline, output, closed (grace period over), stopped. */
  stopped: 'deadline' | 'output' | 'closed' | 'stopped' | null;
  /** Processes of its group were still running when the agent ended, and were killed. */
  left_children: boolean;
  wall_seconds: number;
  stdout_bytes: number;
  stderr_bytes: number;
  output_truncated: boolean;
}

/** Whether any process of group `pgid` is alive. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // the group is gone
  }
}

/** A bounded output file: the first OUTPUT_MAX_BYTES bytes are written, the rest counted. */
class BoundedFile {
  private readonly fd: number;
  bytes = 0;
  constructor(readonly path: string) {
    try {
      // in a folder agents can reach: never through a link, never blocked on a FIFO, a regular file of one name only
      this.fd = openSync(
        path,
        constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK,
        0o644,
      );
    } catch (error) {
      throw fsError(error, 'create', path);
    }
    const stats = fstatSync(this.fd);
    if (!stats.isFile() || stats.nlink !== 1) {
      closeSync(this.fd);
      throw new UserError(`cannot create ${path}: something other than a new file was put there; refused`);
    }
  }
  /** Writes what fits; false when the bound was passed. */
  write(chunk: Buffer): boolean {
    const room = OUTPUT_MAX_BYTES - this.bytes;
    if (room > 0) writeSync(this.fd, chunk, 0, Math.min(room, chunk.length));
    this.bytes += chunk.length;
    return this.bytes <= OUTPUT_MAX_BYTES;
  }
  close(): void {
    closeSync(this.fd);
  }
}

export function runAgent(run: AgentRun): Promise<AgentOutcome> {
  const started = Date.now();
  const out = new BoundedFile(run.stdoutFile);
  const err = new BoundedFile(run.stderrFile);
  const argv = [...(run.sandbox ?? []), '/bin/sh', '-c', run.command];
  const stdio = run.data === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe', 'pipe'];
  const child = spawn(argv[0]!, argv.slice(1), { cwd: run.cwd, env: run.env, detached: true, stdio: stdio as ['ignore', 'pipe', 'pipe'] });
  const pgid = child.pid!;
  const data = child.stdio[3] as NodeJS.WritableStream | undefined;
  if (data && run.data !== undefined) {
    data.on('error', () => {}); // bwrap gone before it read it: its exit says why
    data.end(run.data);
  }
  if (run.groupFile) writeFileAtomic(run.groupFile, `${JSON.stringify({ pgid, url: run.env.WWREF_MCP_URL ?? null })}\n`);
  let stopped: AgentOutcome['stopped'] = null;
  const stop = (why: NonNullable<AgentOutcome['stopped']>) => {
    if (stopped) return;
    stopped = why;
    killGroup(pgid, 'SIGTERM');
    setTimeout(() => killGroup(pgid, 'SIGKILL'), TERM_SECONDS * 1000).unref();
  };
  run.onStart?.(() => stop('stopped'));
  const onOutput = (file: BoundedFile) => (chunk: Buffer) => {
    if (!file.write(chunk)) stop('output');
  };
  child.stdout.on('data', onOutput(out));
  child.stderr.on('data', onOutput(err));
  const deadline = setTimeout(() => stop('deadline'), run.deadlineSeconds * 1000);
  let closedAt: number | undefined;
  const watch = setInterval(() => {
    if (closedAt === undefined && run.closed()) closedAt = Date.now();
    if (closedAt !== undefined && Date.now() - closedAt > GRACE_SECONDS * 1000) stop('closed');
  }, 200);
  return new Promise((done, fail) => {
    child.once('error', fail);
    child.once('exit', (code, signal) => {
      clearTimeout(deadline);
      clearInterval(watch);
      const wall = (Date.now() - started) / 1000;
      const leftChildren = groupAlive(pgid);
      killGroup(pgid, 'SIGKILL');
      // the pipes close when the last process holding them dies; one that escaped the group may hold
      // them open, so they are given a moment, then closed from this side
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        child.stdout.destroy();
        child.stderr.destroy();
        out.close();
        err.close();
        done({
          exit_code: code,
          signal,
          stopped,
          left_children: leftChildren,
          wall_seconds: wall,
          stdout_bytes: out.bytes,
          stderr_bytes: err.bytes,
          output_truncated: out.bytes > OUTPUT_MAX_BYTES || err.bytes > OUTPUT_MAX_BYTES,
        });
      };
      let ended = 0;
      const timer = setTimeout(finish, 1000);
      const onEnd = () => {
        if (++ended === 2) {
          clearTimeout(timer);
          finish();
        }
      };
      if (child.stdout.readableEnded) ended++;
      else child.stdout.once('close', onEnd);
      if (child.stderr.readableEnded) ended++;
      else child.stderr.once('close', onEnd);
      if (ended === 2) {
        clearTimeout(timer);
        finish();
      }
    });
  });
}
