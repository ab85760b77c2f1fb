// Mistakes in the command word and in the folders a reading command is given (pipelines/cli/main.ts,
// commands/catalog/list.ts): each is one line on stderr and exit 2, said in the user's terms.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../pipelines/core/paths.ts';
import { cliInProcess } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'wwref-mistakes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function refused(args: string[]): Promise<string> {
  const r = await cliInProcess(args, ROOT);
  expect(r.code, r.stdout).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  return r.stderr.trim();
}

describe('a mistaken command line', () => {
  it('an unknown command is named, with the commands there are', async () => {
    const said = await refused(['lsit']);
    expect(said).toMatch(/^wwref: unknown command 'lsit'; the commands: acquire, .*\blist\b.*, worker \(wwref --help\)$/);
  });

  it('a command without its action says what it needs', async () => {
    expect(await refused(['cohort'])).toBe('wwref: cohort needs <action> (wwref cohort --help)');
    expect(await refused(['episode', '--episode', dir])).toBe('wwref: episode needs <action> (wwref episode --help)');
  });

  it('an unknown option of a known command is still named as yargs names it', async () => {
    expect(await refused(['list', '--bogus'])).toBe('wwref: Unknown argument: bogus');
  });

  it('list of a reference folder that is not there, and a --mirror that is no folder, are refused', async () => {
    const missing = join(dir, 'no-references');
    expect(await refused(['list', '--references', missing])).toBe(`wwref: reference folder ${missing} does not exist`);
    const file = join(dir, 'a-file');
    writeFileSync(file, 'not a folder\n');
    for (const mirror of [join(dir, 'no-mirror'), file])
      expect(await refused(['acquire', '--source', 'wine', '--mirror', mirror])).toBe(`wwref: --mirror ${mirror} is not a folder`);
  });
});
