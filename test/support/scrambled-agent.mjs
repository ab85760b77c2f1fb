// An agent for the records tests: it buys its budget in two batches in a seeded, unsorted order (so the
// acquisition order is neither the masks' order nor the index order), then submits a seeded table on
// even repeats and exits without submitting on odd ones (an undelivered episode). Reaches its episode
// with the MCP SDK's own client over the cohort's endpoint.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const id = process.env.WWREF_EPISODE_ID ?? '';
const repeat = Number(/__r(\d+)$/.exec(id)?.[1]);
const client = new Client({ name: 'scrambled-agent', version: '1.0.0' });
await client.connect(
  new StreamableHTTPClientTransport(new URL(process.env.WWREF_MCP_URL), {
    requestInit: { headers: { authorization: `Bearer ${process.env.WWREF_MCP_TOKEN}` } },
  }),
);
const call = async (name, args = {}) => JSON.parse((await client.callTool({ name, arguments: args })).content[0].text);
const task = await call('task');
const width = task.dimensions;
const mask = (k) => k.toString(2).padStart(width, '0');
let seed = 7 + 13 * repeat + id.length;
const random = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
};
const budget = (await call('status')).credits_remaining;
const picks = [];
while (picks.length < budget) {
  const k = 1 + Math.floor(random() * (2 ** width - 2));
  if (!picks.includes(k)) picks.push(k);
}
await call('observe', { masks: picks.slice(0, 3).map(mask) });
if (picks.length > 3) await call('observe', { masks: picks.slice(3).map(mask) });
if (repeat % 2 === 0)
  await call('submit_diagnosis', {
    predictions_json: Object.fromEntries(Array.from({ length: 2 ** width }, (_, k) => [mask(k), 0.3 + 0.4 * random()])),
  });
process.exit(0);
