// The write helpers of core/fsutil.ts under a full disk and planted names, on real files:
// - writeFileAtomic's temporary name is `<name>.<pid>.<64 random bits>.tmp` (it was <pid>.<time>, which
//   anyone could name in advance), made with O_EXCL|O_NOFOLLOW: a FIFO, a link or a file planted under a
//   temporary-looking name is never opened or written through;
// - a full disk (a real one: a 64 kB tmpfs, when this runs as root; else the fail-write double in a
//   child process) fails writeFileAtomic in one line naming the file, the earlier file intact, no
//   temporary left; appendNoFollow's half-written line is cut back.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  watch,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '../../pipelines/core/errors.ts';
import { appendNoFollow, writeFileAtomic } from '../../pipelines/core/fsutil.ts';
import { ROOT } from '../../pipelines/core/paths.ts';
import { FAIL_WRITE_PRELOAD, failWrite } from '../support/doubles.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-fsutil-'));
const small = join(dir, 'small');
let mounted = false;
beforeAll(() => {
  mkdirSync(small);
  if (process.getuid?.() !== 0) return;
  mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', small]).status === 0;
});
afterAll(() => {
  if (mounted) spawnSync('umount', [small]);
  rmSync(dir, { recursive: true, force: true });
});

/** The error `action` throws (it must throw). */
function thrown(action: () => void): Error {
  try {
    action();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a failure');
}

describe('writeFileAtomic: the temporary name', () => {
  it('is <name>.<pid>.<random>.tmp, a different unpredictable number each time (watched as they are made)', async () => {
    const folder = join(dir, 'watched');
    mkdirSync(folder);
    const seen = new Set<string>();
    const watcher = watch(folder, (_event, name) => name && seen.add(String(name)));
    for (let k = 0; k < 40; k++) writeFileAtomic(join(folder, 'f.json'), `${k}\n`);
    await sleep(200);
    watcher.close();
    const temporary = [...seen].filter((name) => name !== 'f.json');
    expect(temporary.length).toBeGreaterThan(20);
    const numbers = temporary.map((name) => {
      const match = new RegExp(`^f\\.json\\.${process.pid}\\.(\\d{1,20})\\.tmp$`).exec(name);
      expect(match, name).not.toBeNull();
      return BigInt(match![1]!);
    });
    expect(new Set(numbers).size).toBe(numbers.length);
    // 64 random bits: not a clock (Date.now() * 1000 is below 2^51), and spread over the whole range
    expect(numbers.filter((n) => n > 2n ** 52n).length).toBeGreaterThan(numbers.length / 2);
    expect(readFileSync(join(folder, 'f.json'), 'utf8')).toBe('39\n');
    expect(readdirSync(folder)).toEqual(['f.json']);
  });

  it('never opens or writes through a FIFO, a link or a file planted under temporary-looking names', () => {
    const folder = join(dir, 'planted');
    mkdirSync(folder);
    const victim = join(dir, 'victim.txt');
    writeFileSync(victim, 'untouched\n');
    const path = join(folder, 'state.json');
    // names of the old scheme's shape (<pid>.<time in ms × 1000 + n>) around now: what an agent could
    // plant then; the random part of a name today cannot be planted ahead (the test above)
    const now = Date.now();
    const names: string[] = [];
    for (let ms = 0; ms < 20; ms++) for (let n = 0; n < 3; n++) names.push(`${path}.${process.pid}.${(now + ms) * 1000 + n}.tmp`);
    execFileSync(
      'mkfifo',
      names.filter((_, k) => k % 3 === 0),
    );
    for (const [k, name] of names.entries()) {
      if (k % 3 === 1) symlinkSync(victim, name);
      if (k % 3 === 2) writeFileSync(name, 'planted');
    }
    for (let k = 0; k < 5; k++) writeFileAtomic(path, `{"k": ${k}}\n`);
    expect(readFileSync(path, 'utf8')).toBe('{"k": 4}\n');
    expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
    expect(
      names.every((name, k) =>
        k % 3 === 0 ? lstatSync(name).isFIFO() : k % 3 === 1 ? lstatSync(name).isSymbolicLink() : readFileSync(name, 'utf8') === 'planted',
      ),
    ).toBe(true);
    expect(readdirSync(folder)).toHaveLength(names.length + 1);
  });

  it('keeps the mode it is given from the creation of the temporary file', () => {
    const path = join(dir, 'secret.json');
    writeFileAtomic(path, '{}\n', { mode: 0o600 });
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('a path that cannot be written is one line naming it', () => {
    writeFileSync(join(dir, 'a-file'), '');
    const error = thrown(() => writeFileAtomic(join(dir, 'a-file', 'below.json'), '{}'));
    expect(error).toBeInstanceOf(UserError);
    expect(error.message).toMatch(/^cannot write .*a-file\/below\.json: .*\(E[A-Z]+\)$/);
  });
});

describe('a full disk', () => {
  it.skipIf(process.getuid?.() !== 0)('writeFileAtomic on a full tmpfs: one line, the earlier file intact, no temporary left', () => {
    expect(mounted, 'a 64 kB tmpfs is mounted (root)').toBe(true);
    const path = join(small, 'table.json');
    writeFileAtomic(path, 'earlier\n');
    const error = thrown(() => writeFileAtomic(path, 'x'.repeat(200_000)));
    expect(error).toBeInstanceOf(UserError);
    expect(error.message).toBe(`cannot write ${path}: the disk is full (ENOSPC)`);
    expect(readFileSync(path, 'utf8')).toBe('earlier\n');
    expect(readdirSync(small)).toEqual(['table.json']);
  });

  it.skipIf(process.getuid?.() !== 0)('appendNoFollow on a full tmpfs: one line, the half-written line cut back', () => {
    expect(mounted).toBe(true);
    const path = join(small, 'log.jsonl');
    appendNoFollow(path, '{"line": 1}\n');
    const error = thrown(() => appendNoFollow(path, `${'y'.repeat(200_000)}\n`));
    expect(error.message).toBe(`cannot append to ${path}: the disk is full (ENOSPC)`);
    expect(readFileSync(path, 'utf8')).toBe('{"line": 1}\n');
    rmSync(path);
  });

  it('the same through the fail-write double (any user): one line, earlier file intact, no temporary left', () => {
    const folder = join(dir, 'double');
    mkdirSync(folder);
    const path = join(folder, 'table.json');
    writeFileSync(path, 'earlier\n');
    appendNoFollow(join(folder, 'log.jsonl'), '{"line": 1}\n');
    const script = [
      `import { writeFileAtomic, appendNoFollow } from ${JSON.stringify(join(ROOT, 'pipelines', 'core', 'fsutil.ts'))};`,
      'for (const [name, action] of [["table.json", () => writeFileAtomic(process.argv[1] + "/table.json", "new\\n")],',
      '  ["log.jsonl", () => appendNoFollow(process.argv[1] + "/log.jsonl", "{\\"line\\": 2}\\n")]]) {',
      '  if (process.env.TEST_FAIL_WRITE !== name) continue;',
      '  try { action(); console.log("written"); } catch (e) { console.log(e.name + ": " + e.message); }',
      '}',
    ].join('\n');
    for (const [name, expected] of [
      ['table.json', `UserError: cannot write ${path}: the disk is full (ENOSPC)`],
      ['log.jsonl', `UserError: cannot append to ${join(folder, 'log.jsonl')}: the disk is full (ENOSPC)`],
    ] as const) {
      const r = spawnSync('node', ['--import', FAIL_WRITE_PRELOAD, '--import', 'tsx', '--input-type=module', '-e', script, folder], {
        cwd: ROOT,
        env: { ...process.env, ...failWrite(name) },
        encoding: 'utf8',
      });
      expect(r.stdout.trim(), r.stderr).toBe(expected);
    }
    expect(readFileSync(path, 'utf8')).toBe('earlier\n');
    expect(readFileSync(join(folder, 'log.jsonl'), 'utf8')).toBe('{"line": 1}\n');
    expect(readdirSync(folder).sort()).toEqual(['log.jsonl', 'table.json']);
    expect(existsSync(join(folder, 'table.json'))).toBe(true);
  });
});
