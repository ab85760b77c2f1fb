import { UserError } from '../../../core/errors.ts';
import { defineCommand } from '../../command.ts';
import { outputPath } from '../../output-path.ts';

/** A bearer token is at least this long. */
const TOKEN_MIN = 16;

export default defineCommand({
  command: 'serve',
  describe:
    'serve an episode to an agent as an MCP server (tools task, observe, status, calculate ' +
    'where the sandbox can be made, submit): stdio by default, Streamable HTTP on 127.0.0.1 with --http PORT',
  builder: (y) =>
    y
      .option('episode', { type: 'string', demandOption: true, describe: "the episode folder ('wwref episode start')" })
      .option('http', {
        type: 'string',
        describe: 'serve Streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio (0: any free port, printed on stderr)',
      })
      .option('host', {
        type: 'string',
        describe: 'with --http: the interface to bind (default 127.0.0.1); one beyond loopback needs --token-file',
      })
      .option('token-file', {
        type: 'string',
        describe: 'with --http: a file holding the bearer token (at least 16 characters) every request must carry',
      }),
  run: async (argv, { settings }) => {
    const dir = outputPath(settings, argv.episode, 'episode', 'folder');
    const server = await import('../../../evaluation/server.ts');
    if (argv.http === undefined) {
      if (argv.host !== undefined || argv.tokenFile !== undefined) throw new UserError('--host and --token-file are for --http');
      await server.serveStdio(settings, dir);
      return 0;
    }
    // decimal digits only: '0x50' or '' is no port (a number parser would take them for 80 and 0)
    const port = /^[0-9]{1,5}$/.test(argv.http) ? Number(argv.http) : Number.NaN;
    if (!(port >= 0 && port <= 65535))
      throw new UserError(`--http takes a port number from 0 to 65535 in decimal digits, not ${JSON.stringify(argv.http)}`);
    let token: string | undefined;
    if (argv.tokenFile !== undefined) {
      const { readBoundedText } = await import('../../../analysis/strict-json.ts');
      token = readBoundedText(argv.tokenFile, 'token file', 4096).trim();
      // printable ASCII only: an HTTP client cannot send other bytes in a header
      if (token.length < TOKEN_MIN || !/^[\x21-\x7e]+$/.test(token))
        throw new UserError(
          `token file ${argv.tokenFile} must hold one token of at least ${TOKEN_MIN} printable ASCII characters, without spaces`,
        );
    }
    const { server: http, url } = await server.serveHttp(settings, dir, { port, host: argv.host ?? '127.0.0.1', token });
    process.stderr.write(`wwref: serving episode ${argv.episode} at ${url} (Ctrl-C stops)\n`);
    await new Promise<void>((done) => {
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, done);
    });
    http.closeAllConnections();
    await new Promise<void>((done) => http.close(() => done()));
    await (await import('../../../evaluation/estimator-submission.ts')).closeEstimatorWorker();
    return 0;
  },
});
