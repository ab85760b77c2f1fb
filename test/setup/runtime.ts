// vitest globalSetup: before any test file starts, the pinned Python runtime and the profile's libm pin
// exist (created on first use, as every wwref command does) and so do the prepared inputs of the committed references
// (prepared from the mirror or package files and kept only when they match the reference manifest,
// as `wwref replay` does), so `npm ci && npm test` works on a fresh clone.
import { join } from 'node:path';
import { ROOT } from '../../pipelines/core/paths.ts';
import { ensureLibmPin, ensurePythonRuntime } from '../../pipelines/core/runtime.ts';
import { replayNeeds } from '../../pipelines/jobs/audit.ts';
import { loadSettings } from '../../pipelines/core/settings.ts';
import { prepareMissing } from '../../pipelines/sources/prepare.ts';

export default async function setup(): Promise<void> {
  const settings = loadSettings({}, process.env);
  ensurePythonRuntime(settings);
  if (settings.profile.libm) ensureLibmPin(settings, settings.profile.libm);
  await prepareMissing(replayNeeds(settings, join(ROOT, 'outputs', 'references')), { settings, workers: 2, online: false });
}
