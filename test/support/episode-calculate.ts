// A host process that runs one calculation of an episode (`node --import tsx episode-calculate.ts
// EPISODE CODE`): lets test/evaluation/episode-tools.test.ts kill it between the call's reservation
// and its receipt.
import { loadSettings } from '../../pipelines/core/settings.ts';
import { calculate } from '../../pipelines/evaluation/calculations.ts';

const [ep, code] = process.argv.slice(2);
process.stdout.write(`${JSON.stringify(await calculate(loadSettings(), ep!, code ?? ''))}\n`);
