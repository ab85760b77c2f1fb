// The processes a command started, read from /proc (Linux): tests show that a stopped command leaves
// none of them running.
import { readdirSync, readFileSync } from 'node:fs';

/** Parent of every live process, from /proc/<pid>/stat. */
function parents(): Map<number, number> {
  const found = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // the command name is in parentheses and may hold spaces: the fields after it are fixed
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z') found.set(Number(name), Number(fields[1]));
    } catch {
      // the process ended while being read
    }
  }
  return found;
}

/** Every live descendant of `pid`. */
export function descendants(pid: number): number[] {
  const tree = parents();
  const out: number[] = [];
  const queue = [pid];
  while (queue.length) {
    const parent = queue.shift()!;
    for (const [child, of] of tree) {
      if (of === parent) {
        out.push(child);
        queue.push(child);
      }
    }
  }
  return out;
}

/** Which of `pids` are still running (zombies excluded). */
export function alive(pids: readonly number[]): number[] {
  const live = parents();
  return pids.filter((p) => live.has(p));
}
