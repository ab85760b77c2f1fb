// vitest globalSetup: the pinned Python runtime exists before any test file starts (created on first
// use, as every wwref command does), so `npm ci && npm test` works on a fresh clone.
import { ensurePythonRuntime } from '../../pipelines/core/runtime.ts';

export default function setup(): void {
  ensurePythonRuntime();
}
