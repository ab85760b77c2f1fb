// Test doubles of slow, crashing or failing processes, injected from test code only: the Python
// variables go to the workers (ExecutorOptions.env, replay's workerEnv, or a CLI process's
// environment), the Node preload to a CLI process (`node --import`).
import { delimiter, join } from 'node:path';
import { ROOT } from '../../pipelines/core/paths.ts';

const PYTHON_DOUBLE = join(ROOT, 'test', 'support', 'python');
/** `node --import FAIL_WRITE_PRELOAD bin/wwref.mjs …` with TEST_FAIL_WRITE=<file name>. */
export const FAIL_WRITE_PRELOAD = join(ROOT, 'test', 'support', 'fail-write.mjs');

const withDouble = (variables: Record<string, string>): Record<string, string> => ({
  PYTHONPATH: [ROOT, PYTHON_DOUBLE].join(delimiter),
  ...variables,
});

/** Every record takes `seconds` longer (and says so in its timings). */
export const slowRecords = (seconds: number) => withDouble({ TEST_DELAY_SECONDS: String(seconds) });

/** The worker process exits in the middle of `mask`'s record. */
export const exitOnMask = (mask: string) => withDouble({ TEST_EXIT_ON_MASK: mask });

/** The worker reports, for `mask`, a prediction hash its prediction's bytes do not give. */
export const wrongHashOnMask = (mask: string) => withDouble({ TEST_WRONG_HASH_ON_MASK: mask });

/** The worker reports, for `mask`, a native value and utility 0.01 above what its prediction gives. */
export const wrongMetricOnMask = (mask: string) => withDouble({ TEST_WRONG_METRIC_ON_MASK: mask });

/** The next atomic write of `name` fails with ENOSPC (for a CLI process started with FAIL_WRITE_PRELOAD). */
export const failWrite = (name: string) => ({ TEST_FAIL_WRITE: name });
