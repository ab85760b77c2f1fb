// Whole-number options take decimal digits only: 0x2, 1e0 and +2, which a number parser reads as 2, 1
// and 2, are refused with one line naming the option and what it got (exit 2), for every whole-number
// option of every command; and no command declares an option of yargs' number type (which would read
// them as numbers before any check). The commands run in this process (runCli), from a scratch folder.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yargs from 'yargs';
import { afterAll, describe, expect, it } from 'vitest';
import { COMMANDS } from '../../pipelines/cli/main.ts';
import { cliInProcess } from '../support/cli.ts';

const cwd = mkdtempSync(join(tmpdir(), 'wwref-numbers-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

/** Each whole-number option, with a command line that reaches its check (`V` stands for the value). */
const CASES: [string, string[]][] = [
  ...[
    'rebuild --condition nile',
    'replay --condition nile',
    'audit',
    'prepare --source nile',
    'controls run --condition nile --budget 4 --out o',
  ].map((line): [string, string[]] => ['workers', [...line.split(' '), '--workers', 'V']]),
  ['workers-max', ['rebuild', '--condition', 'nile', '--workers', '1', '--workers-max', 'V']],
  ['nworkers', ['worker', '--scheduler', 'tcp://127.0.0.1:1', '--nworkers', 'V']],
  ...['budget', 'calls', 'call-seconds', 'session-seconds'].map((flag): [string, string[]] => [
    flag,
    [
      'episode',
      'start',
      '--episode',
      'e1',
      '--condition',
      'nile',
      '--budget',
      flag === 'budget' ? 'V' : '4',
      ...(flag === 'budget' ? [] : [`--${flag}`, 'V']),
    ],
  ]),
  ...['budget', 'repeats', 'parallel', 'calls', 'call-seconds', 'session-seconds'].map((flag): [string, string[]] => [
    flag,
    [
      'cohort',
      'run',
      '--agent',
      'true',
      '--condition',
      'nile',
      '--out',
      join(cwd, 'cohort'),
      '--budget',
      flag === 'budget' ? 'V' : '4',
      ...(flag === 'budget' ? [] : [`--${flag}`, 'V']),
    ],
  ]),
  ['budget', ['controls', 'run', '--condition', 'nile', '--out', 'o', '--budget', 'V']],
  ['seeds', ['controls', 'run', '--condition', 'nile', '--out', 'o', '--budget', '4', '--seeds', 'V']],
  ['http', ['serve', '--episode', 'e1', '--http', 'V']],
  ['http', ['serve', '--episodes', 'eps', '--endpoints', 'ep.json', '--http', 'V']],
];

describe('whole-number options', () => {
  it('no command declares an option of yargs number type', () => {
    const numeric = COMMANDS.flatMap((command) => {
      const options = (command.builder(yargs([])) as unknown as { getOptions(): { number: string[] } }).getOptions();
      return options.number.map((name) => `${command.command.split(' ')[0]} --${name}`);
    });
    expect(numeric).toEqual([]);
  });

  it.each(['0x2', '1e0', '+2'])(
    '%s is refused by every whole-number option: one line naming the option and the value, exit 2',
    async (value) => {
      for (const [flag, args] of CASES) {
        const r = await cliInProcess(
          args.map((a) => (a === 'V' ? value : a)),
          cwd,
        );
        const label = `${args.join(' ')}\n${r.stderr}`;
        expect(r.code, label).toBe(2);
        expect(r.stderr.trimEnd().split('\n'), label).toHaveLength(1);
        expect(r.stderr, label).toMatch(new RegExp(`^wwref: --${flag} .*${value.replace('+', '\\+')}`));
      }
      expect(readdirSync(cwd)).toEqual([]); // nothing was made
    },
  );

  it("a single whole number is taken as written: ' 2' is refused (a list option, --budget ' 2', is split at spaces)", async () => {
    const r = await cliInProcess(['controls', 'run', '--condition', 'wine', '--budget', '4', '--workers', ' 2', '--out', 'x'], cwd);
    expect([r.code, r.stderr.trim()]).toEqual([2, "wwref: --workers takes one whole number written in decimal digits, not ' 2'"]);
  });
});
