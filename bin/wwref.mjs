#!/usr/bin/env node
// Entry point of the `wwref` command. It runs the build in dist/ (scripts/build.mjs, made by `npm ci`),
// so that no TypeScript is compiled at start, and only while that build matches the sources
// (scripts/build-stamp.mjs): after an edit it builds again first (a second or so, once). WWREF_FROM_SOURCES=1, or a build that
// cannot be made (no esbuild, a read-only folder), runs the sources through tsx instead.
import module from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { builtEntry } from '../scripts/build-stamp.mjs';
import { loadBundle } from '../scripts/code-cache.mjs';

// Node 22+: V8 keeps the compiled code of every module it loads (in the system's temporary folder,
// NODE_COMPILE_CACHE elsewhere): about a fifth less CPU at start (22.23, loaded machine: --help 0.27 s
// -> 0.21 s, episode status 0.36 s -> 0.28 s). Node 20 has no such cache.
module.enableCompileCache?.();

async function entry() {
  if (process.env.WWREF_FROM_SOURCES === '1') return undefined;
  const built = builtEntry(resolve(dirname(fileURLToPath(import.meta.url)), '..'));
  if (built) return built;
  try {
    const { build } = await import('../scripts/build.mjs');
    return await build();
  } catch (error) {
    const reason = String(error?.message ?? error).split('\n')[0];
    process.stderr.write(`wwref: the build in dist/ is missing or stale and could not be made (${reason}); running from the sources\n`);
    return undefined;
  }
}

const built = await entry();
if (built) {
  await loadBundle(built, process.argv.slice(2)).cliProcess();
} else {
  const { register } = await import('tsx/esm/api');
  register();
  const { cliProcess } = await import('../pipelines/cli/main.ts');
  await cliProcess();
}
