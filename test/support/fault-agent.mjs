// A deliberately faulty agent for the cohort tests, one fault per repeat (the `__r<k>` of
// WWREF_EPISODE_ID): it reaches its episode with the MCP SDK's own client over the cohort's HTTP
// endpoint, and then crashes, hangs, floods its output, leaves a child running, or exits without
// submitting. It prints its process id first, so that a test can check it was stopped.
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const FAULTS = ['crash', 'hang', 'flood', 'child', 'quiet', 'submit'];
const fault = FAULTS[Number(/__r(\d+)$/.exec(process.env.WWREF_EPISODE_ID ?? '')?.[1])];
process.stdout.write(`pid ${process.pid}\n`);

const client = new Client({ name: 'fault-agent', version: '1.0.0' });
await client.connect(
  new StreamableHTTPClientTransport(new URL(process.env.WWREF_MCP_URL), {
    requestInit: { headers: { authorization: `Bearer ${process.env.WWREF_MCP_TOKEN}` } },
  }),
);
const call = async (name, args = {}) => JSON.parse((await client.callTool({ name, arguments: args })).content[0].text);
const task = await call('task');
const width = task.dimensions;
const mask = (k) => k.toString(2).padStart(width, '0');
await call('observe', { masks: [mask(1)] });
const submit = () =>
  call('submit_diagnosis', { predictions_json: Object.fromEntries(Array.from({ length: 2 ** width }, (_, k) => [mask(k), 0.5])) });

if (fault === 'crash') {
  process.stderr.write('fault-agent: crashing\n');
  process.exit(1);
} else if (fault === 'hang') {
  process.stdout.write('hanging\n');
  setInterval(() => {}, 1000);
} else if (fault === 'flood') {
  const line = `${'x'.repeat(1023)}\n`;
  const flood = () => {
    while (process.stdout.write(line));
    process.stdout.once('drain', flood);
  };
  flood();
} else if (fault === 'child') {
  // a child in the agent's process group, left running after the agent submits and exits
  const child = spawn('sleep', ['300'], { stdio: 'ignore' });
  process.stdout.write(`child ${child.pid}\n`);
  child.unref();
  await submit();
  process.exit(0);
} else if (fault === 'quiet') {
  process.exit(0); // no submission
} else {
  await submit();
  process.exit(0);
}
