import { defineCommand } from '../../command.ts';

export default defineCommand({
  command: 'connect',
  describe:
    "an episode's HTTP endpoint as a stdio MCP server: JSON-RPC lines from stdin POSTed to WWREF_MCP_URL with the bearer " +
    'token WWREF_MCP_TOKEN (both from the environment), each answer one line on stdout (WWREF_MCP_COMMAND of a sandboxed cohort)',
  builder: (y) => y,
  run: async (_argv, { settings }) => {
    const { endpointFromEnvironment, runBridge } = await import('../../../evaluation/cohort/bridge.ts');
    const endpoint = endpointFromEnvironment(settings.environment);
    await runBridge({ ...endpoint, input: process.stdin, write: (line) => process.stdout.write(`${line}\n`) });
    return 0;
  },
});
