#!/usr/bin/env node
// Entry point of the `wwref` command. It runs the build in dist/ (scripts/build.mjs, made by `npm ci`),
// so that no TypeScript is compiled at start, and only while that build matches the sources
// (scripts/build-stamp.mjs): after an edit it builds again first (a second or so, once).
// WWREF_FROM_SOURCES=1, or a build that cannot be made (no esbuild, a read-only folder), runs the
// sources through tsx instead.
import module from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { builtEntry } from '../scripts/build-stamp.mjs';
import { loadBundle } from '../scripts/code-cache.mjs';

// Node 22+: V8 keeps the compiled code of the ES modules Node loads (in the system's temporary folder,
// NODE_COMPILE_CACHE elsewhere): this file's few, and tsx's when running from the sources. The build's
// bundle has a code cache of its own, on Node 20 too (scripts/code-cache.mjs).
module.enableCompileCache?.();

// A reader of stdout or stderr that has gone (EPIPE: `wwref … | head`) fails a write with an 'error'
// event, which unheard ends the process with a stack trace: heard from the start here (the notice below
// is written before the command line runs); cliProcess tells the status from the stream (errored).
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});

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
