// Hardening of acquisition (pipelines/sources/acquire.ts) and of the plan fields it reads:
// - a mirror_path or package.path that is absolute, climbs out with '..' or leaves its folder through a
//   symbolic link is refused before anything is read (plan schema and runtime check);
// - only regular files are read: a FIFO or a directory named by mirror_path is refused at once;
// - downloads are streamed to a temporary file in the cache, bounded by the declared size (and 2 GiB),
//   with a read timeout; the temporary file is removed on every failure.
// Everything is created under a temporary root; local HTTP servers listen on 127.0.0.1 only.
import { writeSurfaceCatalog } from '../support/fixtures.ts';
import { readReferenceManifest, writeReferenceManifest } from '../support/raw-references.ts';
import { execa } from 'execa';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { acquireFile, rawCachePath, sitePackages } from '../../pipelines/sources/acquire.ts';
import { UserError } from '../../pipelines/core/errors.ts';
import { parsePlan, type RawFile } from '../../pipelines/catalog/plan.ts';
import { ROOT, SOURCES_DIR } from '../../pipelines/core/paths.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { useTempWorkspace, type Workspace } from '../support/workspace.ts';
import { filesUnder, guardRepository, victim } from './hardening-support.ts';

const sha256 = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

let ws: Workspace;
let guard: ReturnType<typeof guardRepository>;
beforeAll(() => {
  guard = guardRepository();
});
afterAll(() => guard.check());
beforeEach(() => {
  ws = useTempWorkspace();
});
afterEach(() => ws.dispose());

/** A raw file known only by the given bytes, with no other origin than the one under test. */
function rawFile(bytes: string | Buffer, fields: Partial<RawFile>): RawFile {
  return { name: 'data.csv', sha256: sha256(bytes), bytes: Buffer.byteLength(bytes), mirror_path: 'nowhere/data.csv', ...fields };
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, 'acquisition succeeded').toBeInstanceOf(UserError);
  return error as Error;
}

/** Nothing entered the cache and no temporary file is left. */
function cacheEmpty(): void {
  expect(filesUnder(join(ws.cache, 'raw'))).toEqual([]);
  expect(filesUnder(join(ws.cache, 'tmp'))).toEqual([]);
}

describe('plan fields naming paths are contained', () => {
  it('mirror_path with .., absolute, or a link out of the mirror is refused and the file outside is never read', async () => {
    const mirror = join(ws.root, 'mirror');
    mkdirSync(mirror, { recursive: true });
    // the file outside the mirror has exactly the declared bytes: had it been read, it would have been cached
    const secret = victim(join(ws.root, 'secret', 'data.csv'), 'a,b\n1,2\n');
    const file = rawFile(secret.content, {});
    for (const mirror_path of ['../secret/data.csv', secret.path, 'sub/../../secret/data.csv']) {
      const error = await failure(acquireFile({ ...file, mirror_path }, { settings: ws.settings, mirrors: [mirror], online: false }));
      expect(error.message).toMatch(/mirror_path of raw file data\.csv '.*' (climbs out with '\.\.'|is absolute); refused/);
    }
    symlinkSync(join(ws.root, 'secret'), join(mirror, 'link'));
    const error = await failure(
      acquireFile({ ...file, mirror_path: 'link/data.csv' }, { settings: ws.settings, mirrors: [mirror], online: false }),
    );
    expect(error.message).toMatch(
      /mirror_path of raw file data\.csv 'link\/data\.csv' resolves to .*secret\/data\.csv, outside .*mirror; refused/,
    );
    cacheEmpty();
    secret.intact();
  });

  it('package.path climbing out of site-packages is refused and the file outside is never read', async () => {
    const purelib = sitePackages(ws.settings)!;
    expect(purelib).toMatch(/site-packages$/);
    const secret = victim(join(ws.root, 'secret', 'pkg.csv'), 'x\n1\n');
    const climbing = relative(purelib, secret.path); // ../../.../wwref-test-*/secret/pkg.csv
    expect(climbing.startsWith('..')).toBe(true);
    for (const path of [climbing, secret.path]) {
      const file = rawFile(secret.content, { package: { distribution: 'numpy', version: '2.2.6', path } });
      const error = await failure(acquireFile(file, { settings: ws.settings, mirrors: [], online: false }));
      expect(error.message).toMatch(/package\.path of raw file data\.csv '.*' (climbs out with '\.\.'|is absolute); refused/);
    }
    cacheEmpty();
    secret.intact();
  });

  it('the plan schema refuses such paths, a record name that is a path, and absurd sizes, naming the field', () => {
    const base = JSON.parse(readFileSync(join(SOURCES_DIR, 'mitdb_100.plan.json'), 'utf8'));
    const invalid = (mutate: (plan: any) => void): string => {
      const plan = structuredClone(base);
      mutate(plan);
      try {
        parsePlan('bad.plan.json', JSON.stringify(plan));
      } catch (error) {
        expect(error).toBeInstanceOf(UserError);
        return (error as Error).message;
      }
      throw new Error('the plan was accepted');
    };
    expect(invalid((p) => (p.raw_files[0].mirror_path = '../../etc/passwd'))).toMatch(
      /raw_files\.0\.mirror_path: expected a relative path inside its folder/,
    );
    expect(invalid((p) => (p.raw_files[0].mirror_path = '/etc/passwd'))).toMatch(/raw_files\.0\.mirror_path: expected a relative path/);
    expect(invalid((p) => (p.raw_files[0].mirror_path = 'a/./b'))).toMatch(/raw_files\.0\.mirror_path/);
    expect(invalid((p) => (p.raw_files[0].package = { distribution: 'wfdb', version: '4', path: '../../x' }))).toMatch(
      /raw_files\.0\.package\.path: expected a relative path/,
    );
    expect(invalid((p) => (p.raw_files[0].package = { distribution: 'wfdb', version: '4', path: '/x' }))).toMatch(
      /raw_files\.0\.package\.path/,
    );
    expect(invalid((p) => (p.raw_files[0].name = '../100.hea'))).toMatch(/raw_files\.0\.name: expected a relative path/);
    // the ECG recipe builds file names <record>.hea/.dat/.atr from the record name
    expect(
      invalid((p) => {
        p.preparation.params.record = '../100';
        for (const f of p.raw_files) f.name = f.name.replace('100', 'x/100');
      }),
    ).toMatch(/preparation\.params\.record: '\.\.\/100' is not a plain file name/);
    expect(invalid((p) => (p.preparation.params.record = '/tmp/100'))).toMatch(
      /preparation\.params\.record: '\/tmp\/100' is not a plain file name/,
    );
    expect(invalid((p) => (p.raw_files[0].bytes = 1e15))).toMatch(/raw_files\.0\.bytes: expected at most 2147483648 bytes \(2 GiB\)/);
    // the committed plans (names with '/', e.g. scifact's qrels/train.tsv) stay valid
    expect(() => parsePlan('scifact.plan.json', readFileSync(join(SOURCES_DIR, 'scifact.plan.json'), 'utf8'))).not.toThrow();
  });
});

describe('only regular files are read', () => {
  it('a directory named by mirror_path is refused as such, not read', async () => {
    const mirror = join(ws.root, 'mirror');
    mkdirSync(join(mirror, 'adir'), { recursive: true });
    const error = await failure(
      acquireFile(rawFile('abc', { mirror_path: 'adir' }), { settings: ws.settings, mirrors: [mirror], online: false }),
    );
    expect(error.message).toMatch(/mirror file of data\.csv .*adir is a directory, not a regular file; refused/);
    cacheEmpty();
  });

  it('a mirror that is a file or a FIFO is refused with one line, never opened', async () => {
    const file = join(ws.root, 'mirror-file');
    writeFileSync(file, 'not a folder');
    const fifo = join(ws.root, 'mirror-fifo');
    execFileSync('mkfifo', [fifo]);
    for (const mirror of [file, fifo]) {
      const error = await failure(
        acquireFile(rawFile('abc', { mirror_path: 'data.csv' }), { settings: ws.settings, mirrors: [mirror], online: false }),
      );
      expect(error).toBeInstanceOf(UserError);
      expect(error.message).toMatch(/^mirror \S+ is not a folder \(a mirror holds raw files under their mirror_path\)$/);
    }
    cacheEmpty();
  });

  it('a FIFO named by mirror_path is refused at once (run in a child process, bounded, so that a hang fails the test)', async () => {
    const mirror = join(ws.root, 'mirror');
    mkdirSync(mirror, { recursive: true });
    execFileSync('mkfifo', [join(mirror, 'pipe.csv')]);
    const script = join(ws.root, 'fifo.mts');
    writeFileSync(
      script,
      `import { acquireFile } from ${JSON.stringify(pathToFileURL(join(ROOT, 'pipelines', 'sources', 'acquire.ts')).href)};\n` +
        `import { loadSettings } from ${JSON.stringify(pathToFileURL(join(ROOT, 'pipelines', 'core', 'settings.ts')).href)};\n` +
        `const file = { name: 'data.csv', sha256: '${sha256('abc')}', bytes: 3, mirror_path: 'pipe.csv' };\n` +
        `acquireFile(file, { settings: loadSettings({}, process.env), mirrors: [${JSON.stringify(mirror)}], online: false }).then(() => console.log('ACQUIRED'), (e) => console.log('REFUSED ' + e.message));\n`,
    );
    const started = performance.now();
    const child = await execa('node', ['--import', 'tsx', script], { cwd: ROOT, reject: false, timeout: 30_000 });
    const seconds = (performance.now() - started) / 1000;
    expect(child.timedOut, 'the acquisition hung on the FIFO').toBe(false);
    expect(child.stdout).toMatch(/REFUSED mirror file of data\.csv .*pipe\.csv is a FIFO, not a regular file; refused/);
    expect(seconds).toBeLessThan(20);
    cacheEmpty();
  });

  it('a plan file named by a reference manifest that is a FIFO is refused by the catalog, not waited on (child process, bounded)', async () => {
    const fifo = join(ws.root, 'plans', 'evil.plan.json');
    mkdirSync(join(ws.root, 'plans'), { recursive: true });
    execFileSync('mkfifo', [fifo]);
    mkdirSync(ws.references, { recursive: true });
    writeSurfaceCatalog(ws.references, [{ condition: 'evil', dimensions: 4, utility: () => 0.5 }]);
    const manifest = readReferenceManifest(ws.references)!;
    manifest.conditions.evil!.plan_file = fifo;
    writeReferenceManifest(manifest, ws.references);
    const script = join(ws.root, 'catalog.mts');
    writeFileSync(
      script,
      `import { loadCatalog } from ${JSON.stringify(pathToFileURL(join(ROOT, 'pipelines', 'references', 'store.ts')).href)};\n` +
        `import { loadSettings } from ${JSON.stringify(pathToFileURL(join(ROOT, 'pipelines', 'core', 'settings.ts')).href)};\n` +
        `try { loadCatalog(loadSettings({}, process.env)); console.log('LOADED'); } catch (e) { console.log('REFUSED ' + e.message); }\n`,
    );
    const child = await execa('node', ['--import', 'tsx', script], { cwd: ROOT, reject: false, timeout: 30_000 });
    expect(child.timedOut, 'the catalog hung on the FIFO').toBe(false);
    expect(child.stdout).toMatch(/REFUSED construction plan .*evil\.plan\.json is not a regular file/);
  });
});

describe('bounded downloads from a local server (127.0.0.1)', () => {
  let server: Server;
  let base: string;
  /** Bytes the server handed to the socket for the last request (what the client could have buffered). */
  let sent = 0;
  let handler: (req: IncomingMessage, res: ServerResponse) => void;

  // A server of its own for every test: a fresh origin, so that no connection of fetch's pool (it
  // opens a new one when a request is aborted) outlives its test into the next.
  beforeEach(async () => {
    sent = 0;
    server = createServer((req, res) => {
      res.setHeader('connection', 'close');
      handler(req, res);
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((done) => server.close(done));
  });

  /** Writes `total` bytes in 1 MiB blocks, respecting back-pressure, stopping when the client goes away. */
  async function stream(res: ServerResponse, total: number): Promise<void> {
    const block = Buffer.alloc(1 << 20, 0x61);
    let closed = false;
    res.on('close', () => (closed = true));
    while (sent < total && !closed) {
      const n = Math.min(block.length, total - sent);
      sent += n;
      if (!res.write(block.subarray(0, n))) await new Promise((done) => res.once('drain', done).once('close', done));
    }
    if (!closed) res.end();
  }

  it('a correct download is streamed into the cache (control)', async () => {
    const body = 'hello, raw file\n'.repeat(1000);
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    const file = rawFile(body, { upstream_url: `${base}/ok.csv` });
    const got = await acquireFile(file, { settings: ws.settings, mirrors: [], online: true, readTimeoutSeconds: 5 });
    expect(got.origin).toBe('upstream');
    expect(got.path).toBe(rawCachePath(ws.settings, file.sha256));
    expect(readFileSync(got.path, 'utf8')).toBe(body);
    expect(filesUnder(join(ws.cache, 'tmp'))).toEqual([]);
  });

  it('more bytes than declared (no Content-Length): aborted as soon as the declared size is exceeded, nothing buffered or kept', async () => {
    const total = 512 * 1024 * 1024;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' }); // chunked: no announced length
      void stream(res, total);
    };
    const file = rawFile('x'.repeat(4096), { upstream_url: `${base}/big.bin` });
    const started = performance.now();
    const error = await failure(acquireFile(file, { settings: ws.settings, mirrors: [], online: true, readTimeoutSeconds: 5 }));
    expect(error.message).toMatch(/big\.bin: the download exceeds the 4096 bytes declared by the plan: aborted after \d+ bytes/);
    expect((performance.now() - started) / 1000).toBeLessThan(10);
    // the client stopped reading: the server could hand over only what the socket buffers hold, not the body
    await new Promise((done) => setTimeout(done, 200));
    expect(sent).toBeLessThan(64 * 1024 * 1024);
    cacheEmpty();
  });

  it('an announced Content-Length above the declared size is refused before the body is read', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-length': String(256 * 1024 * 1024) });
      void stream(res, 256 * 1024 * 1024);
    };
    const file = rawFile('y'.repeat(1000), { upstream_url: `${base}/announced.bin` });
    const error = await failure(acquireFile(file, { settings: ws.settings, mirrors: [], online: true, readTimeoutSeconds: 5 }));
    expect(error.message).toMatch(/the server announces 268435456 bytes, more than the 1000 bytes declared by the plan; not downloaded/);
    await new Promise((done) => setTimeout(done, 200));
    expect(sent).toBeLessThan(64 * 1024 * 1024);
    cacheEmpty();
  });

  it('fewer bytes than declared: the size mismatch is named, nothing kept', async () => {
    handler = (_req, res) => res.end('z'.repeat(100));
    const file = rawFile('z'.repeat(200), { upstream_url: `${base}/short.bin` });
    const error = await failure(acquireFile(file, { settings: ws.settings, mirrors: [], online: true, readTimeoutSeconds: 5 }));
    expect(error.message).toMatch(/size mismatch for data\.csv from .*short\.bin: the plan declares 200 bytes, got 100; not cached/);
    cacheEmpty();
  });

  it('a server that stalls after the headers times out after the configured read timeout (option)', async () => {
    handler = (_req, res) => {
      res.writeHead(200);
      res.write('0123456789'); // then nothing, connection kept open
    };
    const file = rawFile('w'.repeat(50), { upstream_url: `${base}/stall.bin` });
    const started = performance.now();
    const error = await failure(acquireFile(file, { settings: ws.settings, mirrors: [], online: true, readTimeoutSeconds: 1 }));
    const seconds = (performance.now() - started) / 1000;
    expect(error.message).toMatch(/stall\.bin: no data for 1 s \(after 10 bytes\): download aborted/);
    expect(seconds).toBeLessThan(5);
    cacheEmpty();
  }, 20_000);

  it("a server that never answers times out after the settings' read timeout (WWREF_DOWNLOAD_TIMEOUT_SECONDS)", async () => {
    handler = () => {}; // accepts the connection, never responds
    const file = rawFile('v'.repeat(50), { upstream_url: `${base}/silent.bin` });
    // the settings' read timeout, from the variable, is the default of an acquisition that names none
    const settings = loadSettings({}, { ...process.env, WWREF_DOWNLOAD_TIMEOUT_SECONDS: '1' });
    expect(settings.paths.cache).toBe(ws.cache);
    expect(settings.downloads.readTimeoutSeconds).toBe(1);
    const started = performance.now();
    const error = await failure(acquireFile(file, { settings, mirrors: [], online: true }));
    expect(error.message).toMatch(/silent\.bin: no data for 1 s \(after 0 bytes\): download aborted/);
    expect((performance.now() - started) / 1000).toBeLessThan(5);
    cacheEmpty();
  }, 20_000);
});
