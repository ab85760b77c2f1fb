// The processes a command started, read from /proc (Linux): tests show that a stopped command leaves
// none of them running. A process is identified by its id and start time, so a reused id is not
// mistaken for a survivor.
import { readdirSync, readFileSync } from 'node:fs';

export interface Running {
  pid: number;
  started: string;
  command: string;
}

/** The fields of /proc/PID/stat after the command name: state, parent, ..., start time (field 22). */
function stat(pid: number): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** Every process below `root`, as it runs now. */
export function descendants(root: number): Running[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    const fields = stat(Number(name));
    if (fields) children.set(Number(fields[1]), [...(children.get(Number(fields[1])) ?? []), Number(name)]);
  }
  const found: Running[] = [];
  const walk = (pid: number) => {
    for (const child of children.get(pid) ?? []) {
      let command = '';
      try {
        command = readFileSync(`/proc/${child}/cmdline`, 'utf8').replaceAll('\0', ' ');
      } catch {
        // gone meanwhile
      }
      found.push({ pid: child, started: stat(child)?.[19] ?? '', command });
      walk(child);
    }
  };
  walk(root);
  return found;
}

/** Still the same process, and not a zombie waiting for its new parent to reap it. */
export function alive(p: Running): boolean {
  const fields = stat(p.pid);
  return fields !== undefined && fields[19] === p.started && fields[0] !== 'Z';
}

/** Process `pid` runs (exists and is no zombie), whatever it is. */
export function runningPid(pid: number): boolean {
  const fields = stat(pid);
  return fields !== undefined && fields[0] !== 'Z';
}

/** The parent of process `pid`, or undefined when it is gone. */
export function parentOf(pid: number): number | undefined {
  const fields = stat(pid);
  return fields === undefined ? undefined : Number(fields[1]);
}

/**
 * Processes of this machine whose command line holds `marker` (a sandbox's runner) that this test
 * process started, or that were left orphaned (their parent gone): other test files run sandboxes of
 * their own at the same time.
 */
export function sandboxesAlive(marker = '/sbx/runner.'): number[] {
  const ours = (pid: number) => {
    for (let p: number | undefined = parentOf(pid); p !== undefined && p > 1; p = parentOf(p)) if (p === process.pid) return true;
    return parentOf(pid) === 1;
  };
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker);
      } catch {
        return false;
      }
    })
    .map(Number)
    .filter(ours);
}
