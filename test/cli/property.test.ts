// Property test of the command line (pipelines/cli/main.ts): seeded random plan names, paths and flag
// values thrown at `add-source --dry-run` (with a generated plan file) and at replay, export,
// plan-schema, report, effects, list, grade and rebuild (of an unknown condition, so nothing runs).
// For every case: the exit status is 0, 1 or 2; stderr holds no stack trace; nothing is written into
// the reference, prepared or source-manifest folders; and nothing appears outside the temporary root.
//
// Every generated path stays inside the temporary root (relative to a working folder two levels down,
// absolute into the root, through links made there) or names a place that cannot be written
// (/proc, below /dev/null), so a file outside the root can only be a product bug. The root sits alone
// in a folder of its own, which must hold nothing else after every case.
//
// The cases run in this process through runCli, what bin/wwref.mjs runs (test/support/cli.ts); every
// 15th also runs as a real process right after, and must give the same status and message.
import { loadCatalog } from '../../pipelines/references/store.ts';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, SOURCES_DIR } from '../../pipelines/core/paths.ts';
import { cliInProcess, cliProcess } from '../support/cli.ts';
import { guardRepository, listing } from '../sources/hardening-support.ts';
import { seededRandom, type Random } from '../support/random.ts';
import { currentSettings } from '../support/workspace.ts';

const CASES = 200;
const VARIABLES = ['WWREF_PREPARED_DIR', 'WWREF_REFERENCES_DIR', 'WWREF_CACHE_DIR', 'WWREF_MANIFESTS_DIR'] as const;

let outer: string;
let root: string;
let cwd: string;
const dirs = { references: '', prepared: '', manifests: '', cache: '' };
let guard: ReturnType<typeof guardRepository>;
let repository: () => string[];
let savedEnv: Record<string, string | undefined>;
let known: Set<string>;

beforeAll(async () => {
  guard = guardRepository();
  // the generated folders of the repository that a misdirected write would land in
  const watched = [join(ROOT, 'outputs', 'references'), join(ROOT, 'outputs', 'reports')];
  const before = watched.flatMap(listing);
  repository = () => {
    const now = watched.flatMap(listing);
    expect(now, 'outputs/references and outputs/reports of the repository must be unchanged').toEqual(before);
    return now;
  };
  outer = mkdtempSync(join(tmpdir(), 'wwref-property-'));
  root = join(outer, 'root');
  cwd = join(root, 'w1', 'w2');
  mkdirSync(cwd, { recursive: true });
  dirs.references = join(root, 'references');
  dirs.prepared = join(root, 'prepared');
  dirs.manifests = join(root, 'manifests');
  dirs.cache = join(root, 'cache');
  savedEnv = Object.fromEntries(VARIABLES.map((v) => [v, process.env[v]]));
  process.env.WWREF_REFERENCES_DIR = dirs.references;
  process.env.WWREF_PREPARED_DIR = dirs.prepared;
  process.env.WWREF_MANIFESTS_DIR = dirs.manifests;
  process.env.WWREF_CACHE_DIR = dirs.cache;

  // a real table (nile, 16 records) so that export, report, effects and grade have something to write
  const built = await cliProcess(['rebuild', '--condition', 'nile', '--workers', '1'], cwd);
  expect(built.code, built.stderr).toBe(0);
  // what generated paths may run into: links to the protected folders and to a folder of the root,
  // a file used as a folder, a FIFO, an existing folder
  symlinkSync(dirs.references, join(cwd, 'refs-link'));
  symlinkSync(dirs.prepared, join(cwd, 'prep-link'));
  mkdirSync(join(root, 'elsewhere'));
  symlinkSync(join(root, 'elsewhere'), join(cwd, 'elsewhere-link'));
  writeFileSync(join(cwd, 'a-file'), 'a file');
  execFileSync('mkfifo', [join(cwd, 'a-fifo')]);
  mkdirSync(join(cwd, 'a-folder'));
  mkdirSync(join(root, 'plans'));
  const catalog = loadCatalog(currentSettings());
  known = new Set([...catalog.conditions.keys(), ...catalog.plans.keys()]);
}, 120_000);

afterAll(() => {
  for (const v of VARIABLES) {
    if (savedEnv[v] === undefined) delete process.env[v];
    else process.env[v] = savedEnv[v];
  }
  rmSync(outer, { recursive: true, force: true });
  guard.check();
  repository();
});

// ---------------------------------------------------------------- generators

const LONG = 'l'.repeat(200);
const TOO_LONG = 'L'.repeat(300);
const NAMES = [
  'out',
  'x.csv',
  'report.html',
  'a b',
  'ünïcödé',
  '日本語',
  'emoji💥',
  'tab\tname',
  'new\nline',
  'back\\slash',
  'quote"s',
  "apo'strophe",
  '$HOME',
  '~',
  '*',
  '%s',
  'manifest.json',
  'nile.arrow',
  '.wwref.lock',
  '.hidden',
  'name.',
  'CON',
  LONG,
  TOO_LONG,
];
const UNWRITABLE = ['/proc/wwref-property-nowhere/out.csv', '/dev/null/out.csv', '/proc/wwref-property-nowhere'];

/** A path that stays inside the root (or names an unwritable place), with the folder it starts from. */
function randomPath(r: Random): string {
  const roll = r.next();
  if (roll < 0.05) return r.pick(UNWRITABLE);
  if (roll < 0.08) return '';
  if (roll < 0.12) return r.pick(['a-file', 'a-fifo', 'a-folder', 'refs-link', 'prep-link', '.', '..', '../..']);
  const starts: [string, number][] = [
    ['', 2],
    ['./', 2],
    ['../', 1],
    ['../../', 0],
    [`${root}/`, 0],
    [`${dirs.references}/`, 1],
    [`${dirs.prepared}/`, 1],
    [`${dirs.manifests}/`, 1],
    ['refs-link/', 3],
    ['prep-link/', 3],
    ['elsewhere-link/', 3],
    ['a-file/', 3],
    ['a-folder/', 3],
    ['../../references/', 1],
  ];
  const [start, base] = r.pick(starts);
  let depth = base;
  const segments: string[] = [];
  for (let i = r.int(1, 4); i > 0; i--) {
    const kind = r.next();
    if (kind < 0.15 && depth > 0) {
      segments.push('..');
      depth--;
    } else if (kind < 0.22) segments.push('.');
    else if (kind < 0.26) segments.push('');
    else {
      segments.push(r.pick(NAMES));
      depth++;
    }
  }
  const path = start + segments.join('/');
  return path.startsWith('-') ? `./${path}` : path;
}

/**
 * A condition or source name that is not in the catalog: unicode, long, a path, empty, dots... With
 * `nul`, also one holding a NUL character (possible in a plan file, not in a command-line argument).
 */
function randomName(r: Random, nul = false): string {
  const name = r.pick([
    'no_such_condition',
    'ünï',
    '日本',
    '',
    ' ',
    '.',
    '..',
    '../x',
    '../../etc/passwd',
    '/abs/name',
    'a/b',
    'NILE',
    'nile ',
    ' nile',
    'nile\n',
    'wine__d7',
    `a${'b'.repeat(63)}`,
    `a${'b'.repeat(64)}`,
    `a${'b'.repeat(299)}`,
    'a b',
    'x.y',
    '💥',
    '$(touch pwned)',
    '`id`',
    'diabetes_',
    ...(nul ? ['name\u0000nul'] : []),
  ]);
  return known.has(name) ? `${name}_unknown` : name;
}

function randomWorkers(r: Random): string {
  return r.pick([
    '0',
    '-1',
    '1',
    '2',
    '3',
    'abc',
    '1.5',
    '1e3',
    '0x2',
    'Infinity',
    'NaN',
    '',
    ' 2 ',
    '100000',
    '-0',
    '2.0',
    '٣',
    '9007199254740993',
  ]);
}

/** A construction plan (from the camera example) with random ids, paths and record names. */
function randomPlan(r: Random): unknown {
  const plan = JSON.parse(readFileSync(join(SOURCES_DIR, 'examples', 'camera.plan.json'), 'utf8'));
  delete plan.$schema;
  if (r.next() < 0.3) {
    // a valid plan under a fresh name: the dry run accepts it
    const fresh = `prop_${r.int(0, 99999)}`;
    plan.source = plan.conditions[0].id = plan.conditions[1].paired_with = fresh;
    plan.conditions[1].id = `${fresh}__d6`;
    return plan;
  }
  const source = r.next() < 0.3 ? `prop_${r.int(0, 9999)}` : randomName(r, true);
  plan.source = source;
  plan.conditions[0].id = r.next() < 0.5 ? source : randomName(r, true);
  plan.conditions[1].id = r.next() < 0.5 ? `${plan.conditions[0].id}__d6` : randomName(r, true);
  plan.conditions[1].paired_with = r.next() < 0.7 ? plan.conditions[0].id : randomName(r, true);
  const file = plan.raw_files[0];
  if (r.next() < 0.4)
    file.mirror_path = r.pick([
      '../../etc/passwd',
      '/etc/passwd',
      'a/../../b',
      'ok/path.png',
      '',
      'a//b',
      './x',
      'x/./y',
      'name\u0000nul',
      TOO_LONG,
    ]);
  if (r.next() < 0.3)
    file.package.path = r.pick(['../../../etc/passwd', '/etc/passwd', 'skimage/data/camera.png', '..', 'skimage/../../x']);
  if (r.next() < 0.3) file.name = r.pick(['../x.png', '/abs.png', 'x/y.png', '.', '..', '', TOO_LONG, 'ok.png']);
  if (r.next() < 0.2) file.bytes = r.pick([0, -1, 1.5, 1e15, 2 ** 53, '10']);
  if (r.next() < 0.2) plan.preparation.params.file = r.pick(['../camera.png', '/etc/passwd', 'camera.png', '']);
  if (r.next() < 0.2)
    plan.preparation = {
      recipe: 'mitdb_ecg',
      params: { record: r.pick(['100', '../100', '/tmp/x', '..', 'a/b', '']), channels: ['MLII'], samples: 10, qrs_codes: [1] },
    };
  return plan;
}

interface Case {
  args: string[];
  /** Arguments that are paths (to check that none was created relative to the repository). */
  paths: string[];
}

function flag(r: Random, name: string, value: string): string[] {
  return r.next() < 0.3 ? [`--${name}=${value}`] : [`--${name}`, value];
}

function randomCase(r: Random, index: number): Case {
  const paths: string[] = [];
  const path = () => {
    const p = randomPath(r);
    paths.push(p);
    return p;
  };
  const maybe = (p: number, make: () => string[]) => (r.next() < p ? make() : []);
  const references = () => maybe(0.25, () => flag(r, 'references', r.next() < 0.5 ? path() : dirs.references));
  const command = r.pick([
    'add-source',
    'add-source',
    'replay',
    'export',
    'export',
    'plan-schema',
    'report',
    'effects',
    'list',
    'rebuild',
    'rebuild',
    'grade',
  ]);
  switch (command) {
    case 'add-source': {
      const name = r.next() < 0.7 ? `plan-${index}.plan.json` : r.pick(NAMES);
      const file = join(root, 'plans', name);
      try {
        writeFileSync(file, JSON.stringify(randomPlan(r), null, 2));
      } catch {
        // a name the file system refuses: the command gets a path that does not exist
      }
      const planArg = r.next() < 0.8 ? file : path();
      return {
        args: [
          'add-source',
          planArg,
          '--dry-run',
          ...maybe(0.3, () => ['--force']),
          ...references(),
          ...maybe(0.2, () => flag(r, 'workers', randomWorkers(r))),
        ],
        paths,
      };
    }
    case 'replay':
      // an unknown condition: the report path is checked, nothing is replayed
      return { args: ['replay', ...flag(r, 'report', path()), ...flag(r, 'condition', randomName(r)), ...references()], paths };
    case 'export':
      return {
        args: [
          'export',
          ...flag(r, 'out', path()),
          ...maybe(0.4, () => ['--format', r.pick(['csv', 'wwb', 'xml', ''])]),
          ...maybe(0.3, () => flag(r, 'condition', r.next() < 0.5 ? 'nile' : randomName(r))),
          ...references(),
        ],
        paths,
      };
    case 'plan-schema':
      return { args: ['plan-schema', ...flag(r, 'out', path())], paths };
    case 'report':
    case 'effects':
      return {
        args: [
          command,
          ...flag(r, 'out', path()),
          ...maybe(0.3, () => flag(r, 'condition', r.next() < 0.5 ? 'nile' : randomName(r))),
          ...references(),
        ],
        paths,
      };
    case 'list':
      return { args: ['list', ...references(), ...maybe(0.2, () => ['--bogus', path()])], paths };
    case 'grade':
      return {
        args: ['grade', ...flag(r, 'condition', r.next() < 0.5 ? 'nile' : randomName(r)), ...flag(r, 'table', path()), ...references()],
        paths,
      };
    default: {
      // always at least one unknown condition, so nothing is prepared or executed
      const conditions = [randomName(r), ...maybe(0.3, () => ['nile'])];
      return {
        args: [
          'rebuild',
          ...flag(r, 'workers', randomWorkers(r)),
          ...maybe(0.3, () => flag(r, 'workers-max', randomWorkers(r))),
          ...conditions.flatMap((c) => flag(r, 'condition', c)),
          ...maybe(0.2, () => ['--fresh']),
          ...references(),
        ],
        paths,
      };
    }
  }
}

/** Files under the protected folders (the reference store's own, and the preparation's). */
const protectedState = () => [dirs.references, dirs.prepared, dirs.manifests].flatMap(listing);

/** Every SAMPLE-th case also runs as a real process, right after its in-process run. */
const SAMPLE = 15;

describe('random names, paths and flag values', () => {
  it(`${CASES} cases: exit 0, 1 or 2, no stack trace, nothing written into protected folders or outside the root; a sample as real processes agrees`, async () => {
    const r = seededRandom(20260912);
    const protectedBefore = protectedState();
    const seen = new Map<string, number>();
    let sampled = 0;
    for (let i = 0; i < CASES; i++) {
      const c = randomCase(r, i);
      const underRepo = c.paths.filter((p) => p !== '' && !isAbsolute(p)).map((p) => resolve(ROOT, p));
      const existedInRepo = underRepo.map((p) => existsSync(p));
      const outcome = await cliInProcess(c.args, cwd);
      const label = `case ${i}: wwref ${JSON.stringify(c.args)}\n${outcome.stderr}`;
      seen.set(`${c.args[0]} ${outcome.code}`, (seen.get(`${c.args[0]} ${outcome.code}`) ?? 0) + 1);
      expect([0, 1, 2], label).toContain(outcome.code);
      expect(outcome.stderr, label).not.toMatch(/internal error|\n\s+at /);
      if (outcome.code === 2) {
        // one line, `wwref: <message>`; an input with several problems (a plan, a prediction table) lists them below it as `  - ...`
        const [first, ...more] = outcome.stderr.trimEnd().split('\n');
        expect(first, label).toMatch(/^wwref: \S/);
        for (const line of more) expect(line, label).toMatch(/^ {2}- \S/);
      }
      if (i % SAMPLE === 0) {
        const result = await cliProcess(c.args, cwd);
        expect(result.code, `as a process: ${label}${result.stderr}`).toBe(outcome.code);
        expect(result.stderr, label).not.toMatch(/internal error|\n\s+at /);
        if (outcome.code === 2) expect(result.stderr.trim(), label).toBe(outcome.stderr.trim());
        sampled++;
      }
      expect(protectedState(), `${label}\nthe protected folders changed`).toEqual(protectedBefore);
      expect(readdirSync(outer), `${label}\nsomething was created next to the root`).toEqual(['root']);
      underRepo.forEach((p, k) => {
        expect(existsSync(p), `${label}\ncreated ${p} in the repository`).toBe(existedInRepo[k]);
      });
    }
    repository();
    expect(sampled).toBe(Math.ceil(CASES / SAMPLE));
    // the generator reaches both the accepting and the refusing paths of the commands
    const count = (pattern: RegExp) => [...seen].filter(([key]) => pattern.test(key)).reduce((sum, [, n]) => sum + n, 0);
    expect(count(/ 0$/), `cases that succeeded: ${JSON.stringify([...seen])}`).toBeGreaterThan(20);
    expect(count(/ 2$/), 'cases refused as user errors').toBeGreaterThan(CASES / 3);
    for (const command of ['add-source', 'export', 'plan-schema', 'report', 'effects', 'list'])
      expect(seen.get(`${command} 0`) ?? 0, `${command} succeeded at least once`).toBeGreaterThan(0);
    for (const command of ['add-source', 'replay', 'export', 'plan-schema', 'report', 'effects', 'rebuild', 'grade'])
      expect(seen.get(`${command} 2`) ?? 0, `${command} refused at least once`).toBeGreaterThan(0);
  });
});
