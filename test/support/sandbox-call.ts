// A host process that runs one calculation (the Python code is argv[2]) and prints its receipt as
// JSON: lets the sandbox's tests kill the host in the middle of a call (test/evaluation/sandbox.test.ts).
import { runCalculation } from '../../pipelines/evaluation/sandbox/calculation.ts';

const receipt = await runCalculation({ code: process.argv[2] ?? '', evidence: {}, limits: { cpuSeconds: 600, wallSeconds: 900 } });
process.stdout.write(`${JSON.stringify(receipt)}\n`);
