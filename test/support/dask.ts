// Helpers of the tests that start Dask processes.
import type { ResultPromise } from 'execa';

/** Resolves once a `dask worker` process started by a test has registered with its scheduler. */
export function registered(worker: ResultPromise): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the worker did not register within 60 s')), 60_000);
    worker.stderr!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('Registered to')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}
