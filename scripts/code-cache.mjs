// Runs the build's CommonJS bundle (scripts/build.mjs) with V8's code cache: the machine code V8
// compiled for it in an earlier run of the same command, kept beside the bundle as
// <bundle>.<node version>-<arch>.<command>.v8cache. Parsing and compiling the bundle is most of what
// a command pays at start beyond Node itself and its work; with the cache V8 reads instead what it
// compiled last time (README, Start-up). A cache belongs to one bundle by its name (the bundle's
// carries esbuild's hash of its contents, and a build never rewrites it); V8 itself refuses a cache
// of another V8 version, other flags, another source length or damaged bytes (`cachedDataRejected`):
// the code then compiles as without a cache, and this run's cache replaces the file. A folder that
// cannot be written keeps no cache; nothing else changes.
import { closeSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Script } from 'node:vm';

/** What names a command's cache: its first word when it is one a command can have, else 'other' (--help, --version). */
function commandKey(args) {
  const first = args[0];
  return first !== undefined && /^[a-z][a-z-]{0,39}$/.test(first) ? first : 'other';
}

/**
 * Compiles and runs the bundle `file` as Node runs a CommonJS module, with the code cache of the
 * command `args` names, and returns its exports. The cache is written when the process exits with
 * status 0 (so an unknown command, exit 2, leaves no file) and there was none or V8 refused it.
 */
export function loadBundle(file, args) {
  const cacheFile = `${file}.${process.version}-${process.arch}.${commandKey(args)}.v8cache`;
  let cachedData;
  try {
    cachedData = readFileSync(cacheFile);
  } catch {
    // none yet
  }
  // the build writes the bundle in ASCII (build.mjs asciiOnly): Latin-1 reads it as UTF-8 would, faster
  const wrapped = `(function (exports, require, module, __filename, __dirname) { ${readFileSync(file, 'latin1')}\n})`;
  const script = new Script(wrapped, { filename: file, cachedData });
  if (cachedData === undefined || script.cachedDataRejected) {
    process.once('exit', (code) => {
      if (code !== 0) return;
      // a name no one can plant ahead, created new ('wx': never a file, FIFO or link already there)
      const { randomBytes } = createRequire(import.meta.url)('node:crypto');
      const temporary = `${cacheFile}.${process.pid}.${randomBytes(8).toString('hex')}.tmp`;
      let fd;
      let created = false;
      try {
        fd = openSync(temporary, 'wx');
        created = true;
        writeFileSync(fd, script.createCachedData());
        closeSync(fd);
        fd = undefined;
        renameSync(temporary, cacheFile);
      } catch {
        // no cache this time (a full disk, a read-only folder): nothing of ours is left
        try {
          if (fd !== undefined) closeSync(fd);
          if (created) rmSync(temporary, { force: true });
        } catch {
          // nothing more to do on the way out
        }
      }
    });
  }
  const module = { exports: {}, filename: file, id: file, loaded: false };
  script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file));
  module.loaded = true;
  return module.exports;
}
