// A worker refused by admission never runs a task: the one check both the numerical-profile tests and
// the libm-pin tests make of a worker started with other numerics.
import { expect } from 'vitest';
import type { Settings } from '../../pipelines/core/settings.ts';
import { RuntimeRefused } from '../../pipelines/execution/executor.ts';
import { WorkerPool } from '../../pipelines/execution/local/local-pool.ts';

/** A one-worker pool with the extra environment `env` refuses its first task, unrun, with a message matching `message`. */
export async function expectRefusedBeforeAnyTask(settings: Settings, env: Record<string, string>, message: RegExp): Promise<void> {
  const pool = new WorkerPool(1, { settings, env });
  let ran = false;
  try {
    const attempt = pool.submit(async () => {
      ran = true;
    }, 60);
    await expect(attempt).rejects.toThrow(RuntimeRefused);
    await expect(attempt).rejects.toThrow(message);
    expect(ran).toBe(false);
  } finally {
    await pool.close();
  }
}
