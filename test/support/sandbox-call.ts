// A host process that runs one calculation (the Python code is argv[2], the engine argv[3]: `pyodide`
// or `native`, default pyodide) and prints its receipt as JSON: lets the sandbox's tests kill the host
// in the middle of a call, or start it holding descriptors of its own (test/evaluation/sandbox*.test.ts).
import { loadSettings } from '../../pipelines/core/settings.ts';
import { calculationEngine } from '../../pipelines/evaluation/calculations.ts';
import { runCalculation } from '../../pipelines/evaluation/sandbox/calculation.ts';

const engine = await calculationEngine(loadSettings(), process.argv[3] === 'native' ? 'native' : 'pyodide');
const receipt = await runCalculation({
  code: process.argv[2] ?? '',
  evidence: {},
  engine,
  limits: { cpuSeconds: Number(process.env.CALL_CPU ?? 600), wallSeconds: Number(process.env.CALL_WALL ?? 900) },
});
process.stdout.write(`${JSON.stringify(receipt)}\n`);
