// The environment handling of pipelines/core/settings.ts, the only module that reads WWREF_* variables:
// precedence (flags > wwref.config.json > environment > defaults), a variable that contradicts the file
// refused in one line, WWREF_PYTHON explicit, WWREF_OFFLINE, the WWREF_MIRROR order, an undeclared
// runtime refused. Every case passes its own environment, so the process's (a workspace's WWREF_*
// variables, a developer's shell) never leaks in, and nothing here writes process.env.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { runCli } from '../../pipelines/cli/main.ts';
import { readConfig } from '../../pipelines/core/config.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { declaredRuntimes, MANIFESTS_DIR, ROOT, SOURCES_DIR, WORKFLOWS_DIR } from '../../pipelines/core/paths.ts';
import { loadSettings, type SettingsFlags } from '../../pipelines/core/settings.ts';
import { profileByName } from '../../pipelines/core/profiles.ts';

type Env = Record<string, string | undefined>;

const config = readConfig(ROOT);
const CONFIG_MIRRORS = config.mirrors.map((m) => resolve(ROOT, m));

/** The settings of `flags` under exactly `env` (no variable of this process). */
const settingsOf = (flags: SettingsFlags = {}, env: Env = {}) => loadSettings(flags, env);

/** The UserError `run` throws. */
function refusal(run: () => unknown): UserError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(UserError);
    return error as UserError;
  }
  throw new Error('accepted');
}

describe('loadSettings: defaults', () => {
  it('with no flags and an empty environment: the repository folders, the pinned runtime, online, 60 s', () => {
    const s = settingsOf();
    expect(s.paths).toEqual({
      root: ROOT,
      sources: SOURCES_DIR,
      workflows: WORKFLOWS_DIR,
      prepared: join(ROOT, 'prepared'),
      references: join(ROOT, 'outputs', 'references'),
      cache: join(ROOT, 'outputs', 'cache'),
      manifests: MANIFESTS_DIR,
      published: resolve(ROOT, '..', 'shared', 'published'),
    });
    expect(s.runtime.name).toBe('pinned');
    expect(s.runtime).toEqual(declaredRuntimes().find((r) => r.name === 'pinned'));
    expect(s.python).toEqual({ executable: join(ROOT, '.venv', 'bin', 'python'), explicit: false });
    expect(s.mirrors).toEqual(CONFIG_MIRRORS);
    expect(s.downloads).toEqual({ online: true, readTimeoutSeconds: 60 });
    expect(s.profile.name).toBe(config.numerical_profile ?? 'x86-64-v3');
    expect(s.environment).toEqual({});
    expect(s.paths.prepared).toBe(join(ROOT, 'prepared'));
  });

  it('the environment it is given is the one the processes it starts inherit (process.env when none is given)', () => {
    const env = { PATH: '/usr/bin', WWREF_CACHE_DIR: '/tmp/wwref-settings-cache' };
    expect(settingsOf({}, env).environment).toBe(env);
    expect(loadSettings().environment).toBe(process.env);
  });

  it('empty or blank variables count as unset', () => {
    const s = settingsOf(
      {},
      { WWREF_RUNTIME: ' ', WWREF_PYTHON: '', WWREF_PREPARED_DIR: '', WWREF_DOWNLOAD_TIMEOUT_SECONDS: ' ', WWREF_NUMERICAL_PROFILE: '' },
    );
    expect(s.runtime.name).toBe('pinned');
    expect(s.python.explicit).toBe(false);
    expect(s.paths.prepared).toBe(join(ROOT, 'prepared'));
    expect(s.downloads.readTimeoutSeconds).toBe(60);
  });
});

describe('loadSettings: precedence, flags > wwref.config.json > environment > defaults', () => {
  it('generated folders: a flag over the variable over the default, resolved to absolute paths', () => {
    const env: Env = {
      WWREF_PREPARED_DIR: '/tmp/env/prepared',
      WWREF_REFERENCES_DIR: '/tmp/env/references',
      WWREF_CACHE_DIR: 'relative/cache',
      WWREF_MANIFESTS_DIR: '/tmp/env/manifests',
      WWREF_PUBLISHED_DIR: '/tmp/env/published',
    };
    const fromEnv = settingsOf({}, env).paths;
    expect(fromEnv).toMatchObject({
      prepared: '/tmp/env/prepared',
      references: '/tmp/env/references',
      cache: resolve('relative/cache'),
      manifests: '/tmp/env/manifests',
      published: '/tmp/env/published',
    });
    const flagged = settingsOf(
      {
        paths: {
          prepared: '/tmp/flag/prepared',
          cache: '/tmp/flag/cache',
          manifests: '/tmp/flag/manifests',
          published: '/tmp/flag/published',
          references: '/tmp/flag/references-path',
        },
      },
      env,
    ).paths;
    expect(flagged).toMatchObject({
      prepared: '/tmp/flag/prepared',
      cache: '/tmp/flag/cache',
      manifests: '/tmp/flag/manifests',
      published: '/tmp/flag/published',
      references: '/tmp/flag/references-path',
    });
    // --references beats both the paths override and WWREF_REFERENCES_DIR
    expect(settingsOf({ references: 'refs', paths: { references: '/tmp/flag/references-path' } }, env).paths.references).toBe(
      resolve('refs'),
    );
    expect(settingsOf({ references: '' }, env).paths.references).toBe('/tmp/env/references');
    // the project's own folders are never read from the environment
    expect(flagged.root).toBe(ROOT);
    expect(flagged.workflows).toBe(WORKFLOWS_DIR);
    expect(flagged.sources).toBe(SOURCES_DIR);
  });

  it('the runtime: --runtime over WWREF_RUNTIME over pinned, with its interpreter', () => {
    expect(settingsOf({}, { WWREF_RUNTIME: 'current' }).runtime.name).toBe('current');
    expect(settingsOf({}, { WWREF_RUNTIME: ' current ' }).python.executable).toBe(join(ROOT, '.venv-current', 'bin', 'python'));
    expect(settingsOf({ runtime: 'pinned' }, { WWREF_RUNTIME: 'current' }).runtime.name).toBe('pinned');
    expect(settingsOf({ runtime: 'current' }, { WWREF_RUNTIME: 'pinned' }).runtime.name).toBe('current');
    // a runtime named by the flag is used even when WWREF_RUNTIME names one that does not exist
    expect(settingsOf({ runtime: 'pinned' }, { WWREF_RUNTIME: 'nosuch' }).runtime.name).toBe('pinned');
  });

  it('the download read timeout: the flag over WWREF_DOWNLOAD_TIMEOUT_SECONDS over 60 s; not positive is refused', () => {
    expect(settingsOf({}, { WWREF_DOWNLOAD_TIMEOUT_SECONDS: '2.5' }).downloads.readTimeoutSeconds).toBe(2.5);
    expect(settingsOf({ readTimeoutSeconds: 1 }, { WWREF_DOWNLOAD_TIMEOUT_SECONDS: '30' }).downloads.readTimeoutSeconds).toBe(1);
    for (const bad of ['0', '-1', 'soon', 'Infinity']) {
      expect(refusal(() => settingsOf({}, { WWREF_DOWNLOAD_TIMEOUT_SECONDS: bad })).message).toMatch(
        /download read timeout \(WWREF_DOWNLOAD_TIMEOUT_SECONDS\) must be a positive number of seconds, not '/,
      );
    }
    expect(refusal(() => settingsOf({ readTimeoutSeconds: 0 })).message).toMatch(/positive number of seconds, not '0'/);
  });

  it('mirrors: the flags first, then wwref.config.json, then WWREF_MIRROR, each once', () => {
    expect(CONFIG_MIRRORS.length).toBeGreaterThan(0);
    const env: Env = { WWREF_MIRROR: ['/tmp/env-a', '/tmp/env-b'].join(delimiter) };
    const s = settingsOf({ mirrors: ['/tmp/flag-a', 'flag-b'] }, env);
    expect(s.mirrors).toEqual(['/tmp/flag-a', resolve('flag-b'), ...CONFIG_MIRRORS, '/tmp/env-a', '/tmp/env-b']);
    // a folder named twice keeps its first (highest) place
    const twice = settingsOf(
      { mirrors: ['/tmp/env-b'] },
      { WWREF_MIRROR: ['/tmp/env-a', '/tmp/env-b', CONFIG_MIRRORS[0]!].join(delimiter) },
    );
    expect(twice.mirrors).toEqual(['/tmp/env-b', ...CONFIG_MIRRORS, '/tmp/env-a']);
  });

  it("the numerical profile is the file's; the same value in WWREF_NUMERICAL_PROFILE is accepted", () => {
    const name = config.numerical_profile;
    expect(name).toBe('x86-64-v3');
    const s = settingsOf({}, { WWREF_NUMERICAL_PROFILE: name });
    expect(s.profile).toEqual(settingsOf().profile);
    expect(s.profile).toEqual(profileByName(name!));
  });
});

describe('loadSettings: refusals and switches', () => {
  it('a WWREF_NUMERICAL_PROFILE that contradicts wwref.config.json is refused in one line', () => {
    const error = refusal(() => settingsOf({}, { WWREF_NUMERICAL_PROFILE: 'native' }));
    expect(error.message).toBe(
      `WWREF_NUMERICAL_PROFILE=native contradicts numerical_profile '${config.numerical_profile}' of wwref.config.json, which decides it; unset the variable or edit the file`,
    );
    expect(error.message).not.toMatch(/\n/);
    // an unknown name is refused the same way (the file decides), not looked up
    expect(refusal(() => settingsOf({}, { WWREF_NUMERICAL_PROFILE: 'avx9000' })).message).toMatch(
      /^WWREF_NUMERICAL_PROFILE=avx9000 contradicts numerical_profile/,
    );
  });

  it('the command line reports that contradiction as one line on stderr, exit status 2, whatever the command', async () => {
    const written: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => written.push(String(chunk)) > 0);
    let code: number;
    try {
      code = await runCli(['list'], { ...process.env, WWREF_NUMERICAL_PROFILE: 'native' });
    } finally {
      spy.mockRestore();
    }
    expect(code).toBe(2);
    expect(written.join('')).toBe(
      `wwref: WWREF_NUMERICAL_PROFILE=native contradicts numerical_profile '${config.numerical_profile}' of wwref.config.json, which decides it; unset the variable or edit the file\n`,
    );
  });

  it('WWREF_PYTHON names an explicit interpreter (checked, never created); a flag beats it', () => {
    const s = settingsOf({}, { WWREF_PYTHON: '/opt/python/bin/python3' });
    expect(s.python).toEqual({ executable: '/opt/python/bin/python3', explicit: 'WWREF_PYTHON' });
    expect(settingsOf({ python: '/usr/bin/python3' }, { WWREF_PYTHON: '/opt/python/bin/python3' }).python).toEqual({
      executable: '/usr/bin/python3',
      explicit: 'a flag',
    });
    // the runtime does not change an explicit interpreter
    expect(settingsOf({ runtime: 'current' }, { WWREF_PYTHON: '/opt/python/bin/python3' }).python.executable).toBe(
      '/opt/python/bin/python3',
    );
  });

  it('WWREF_OFFLINE=1 forbids downloads; any other value does not; the flag beats it', () => {
    expect(settingsOf({}, { WWREF_OFFLINE: '1' }).downloads.online).toBe(false);
    expect(settingsOf({}, { WWREF_OFFLINE: '0' }).downloads.online).toBe(true);
    expect(settingsOf({}, { WWREF_OFFLINE: '' }).downloads.online).toBe(true);
    expect(settingsOf({ online: true }, { WWREF_OFFLINE: '1' }).downloads.online).toBe(true);
    expect(settingsOf({ online: false }, {}).downloads.online).toBe(false);
  });

  it('an undeclared runtime is refused, from the flag or WWREF_RUNTIME, naming the declared ones', () => {
    const declared = declaredRuntimes()
      .map((r) => r.name)
      .join(', ');
    expect(declared).toBe('pinned, current');
    expect(refusal(() => settingsOf({ runtime: 'nosuch' })).message).toBe(
      `runtime 'nosuch' is not declared in wwref.config.json (declared: ${declared})`,
    );
    expect(refusal(() => settingsOf({}, { WWREF_RUNTIME: 'nosuch' })).message).toBe(
      `runtime 'nosuch' is not declared in wwref.config.json (declared: ${declared})`,
    );
    expect(refusal(() => settingsOf({ runtime: '../pinned' })).message).toBe(
      `runtime '../pinned' is not a runtime name (declared: ${declared})`,
    );
  });
});

describe('the command line', () => {
  it('a flag beats the environment there too: --runtime pinned with WWREF_RUNTIME=nope', async () => {
    const { runCli } = await import('../../pipelines/cli/main.ts');
    const err: string[] = [];
    const write = process.stderr.write;
    process.stderr.write = ((chunk: string | Uint8Array) => err.push(String(chunk)) > 0) as typeof process.stderr.write;
    try {
      const code = await runCli(['rebuild', '--runtime', 'pinned', '--condition', 'no_such_condition'], {
        ...process.env,
        WWREF_RUNTIME: 'nope',
      });
      expect(code).toBe(2);
    } finally {
      process.stderr.write = write;
    }
    expect(err.join('')).not.toMatch(/runtime 'nope'/);
    expect(err.join('')).toMatch(/no_such_condition/);
  });
});

describe('wwref.config.json read strictly', () => {
  it('a key written twice in one object is refused, naming it; the same key in two objects is fine', () => {
    const root = mkdtempSync(join(tmpdir(), 'wwref-config-'));
    try {
      const write = (text: string) => writeFileSync(join(root, 'wwref.config.json'), text);
      write('{"numerical_profile": "pinned", "mirrors": [], "numerical_profile": "native"}');
      expect(() => readConfig(root)).toThrow(UserError);
      expect(() => readConfig(root)).toThrow(/wwref\.config\.json: the key "numerical_profile" is written twice in one object; keep one$/);
      write('{"numerical_profile": "pinned", "mirrors": ["a,\\"b\\"{"], "n\\u0075merical_profile": "native"}');
      expect(() => readConfig(root)).toThrow(/the key "numerical_profile" is written twice/);
      write('{"numerical_profile": "pinned", "mirrors": ["x"]}');
      expect(readConfig(root).numerical_profile).toBe('pinned');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
