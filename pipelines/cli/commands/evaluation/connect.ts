import { defineCommand } from '../../command.ts';

export default defineCommand({
  command: 'connect',
  describe:
    "an episode's HTTP endpoint as a stdio MCP server: JSON-RPC lines from stdin POSTed to the endpoint (--url, else " +
    'WWREF_MCP_URL) with its bearer token (--token-file, else WWREF_MCP_TOKEN), each answer one line on stdout ' +
    '(WWREF_MCP_COMMAND of a sandboxed cohort)',
  builder: (y) =>
    y.option('url', { type: 'string', describe: "the episode's endpoint (default: WWREF_MCP_URL)" }).option('token-file', {
      type: 'string',
      describe: 'a file holding the bearer token (default: WWREF_MCP_TOKEN; never the token itself as an argument)',
    }),
  run: async (argv, { settings }) => {
    const { endpointOf, runBridge } = await import('../../../evaluation/cohort/bridge.ts');
    const endpoint = endpointOf({ url: argv.url, tokenFile: argv.tokenFile }, settings.environment);
    await runBridge({ ...endpoint, input: process.stdin, write: (line) => process.stdout.write(`${line}\n`) });
    return 0;
  },
});
