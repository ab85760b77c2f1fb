import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '../../../core/errors.ts';
import { writeFileAtomic } from '../../../core/fsutil.ts';
import type { Settings } from '../../../core/settings.ts';
import { defineCommand } from '../../command.ts';
import { outputPath } from '../../output-path.ts';

/** A bearer token is at least this long. */
const TOKEN_MIN = 16;

export default defineCommand({
  command: 'serve',
  describe:
    "serve an episode to an agent as an MCP server (the benchmark's tools observe, calculate_python where the " +
    'sandbox can be made, submit_diagnosis; task and status; the prompt `episode`): stdio by default, Streamable ' +
    'HTTP on 127.0.0.1 with --http PORT; --episodes DIR serves many, a token each',
  builder: (y) =>
    y
      .option('episode', { type: 'string', describe: "the episode folder ('wwref episode start')" })
      .option('episodes', {
        type: 'string',
        describe: 'a folder of episode folders: each served at /episodes/<folder name>/mcp with a token of its own (needs --endpoints)',
      })
      .option('endpoints', {
        type: 'string',
        describe: "with --episodes: a file to write each episode's URL and bearer token to (JSON, readable by you only)",
      })
      .option('http', {
        type: 'string',
        describe: 'serve Streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio (0: any free port, printed on stderr)',
      })
      .option('host', {
        type: 'string',
        describe: 'with --http: the interface to bind (default 127.0.0.1); one beyond loopback needs --token-file',
      })
      .option('prompt', {
        type: 'string',
        describe: "with --episode: a template replacing the prompt's text ({{task}}, {{budget}}, … filled in; see the README)",
      })
      .option('token-file', {
        type: 'string',
        describe: 'with --http: a file holding the bearer token (at least 16 characters) every request must carry',
      }),
  run: async (argv, { settings }) => {
    if ((argv.episode === undefined) === (argv.episodes === undefined))
      throw new UserError('serve needs one of --episode DIR and --episodes DIR');
    if (argv.episodes !== undefined) return serveMany(settings, argv);
    if (argv.endpoints !== undefined) throw new UserError('--endpoints is for --episodes');
    const dir = outputPath(settings, argv.episode!, 'episode', 'folder');
    const server = await import('../../../evaluation/server.ts');
    const prompt = argv.prompt === undefined ? undefined : (await import('../../../evaluation/prompt.ts')).readPromptTemplate(argv.prompt);
    if (argv.http === undefined) {
      if (argv.host !== undefined || argv.tokenFile !== undefined) throw new UserError('--host and --token-file are for --http');
      await server.serveStdio(settings, dir, { prompt });
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
    const { server: http, url } = await server.serveHttp(settings, dir, { port, host: argv.host ?? '127.0.0.1', token, prompt });
    process.stderr.write(`wwref: serving episode ${argv.episode} at ${url} (Ctrl-C stops)\n`);
    await stopSignal();
    http.closeAllConnections();
    await new Promise<void>((done) => http.close(() => done()));
    await (await import('../../../evaluation/estimator-submission.ts')).closeEstimatorWorker();
    return 0;
  },
});

const stopSignal = () =>
  new Promise<void>((done) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, done);
  });

/** `--episodes DIR`: every episode folder in DIR on one server, the endpoints written to --endpoints FILE (mode 0600). */
async function serveMany(
  settings: Settings,
  argv: { episodes?: string; endpoints?: string; http?: string; host?: string; tokenFile?: string; prompt?: string },
): Promise<number> {
  if (argv.endpoints === undefined) throw new UserError('--episodes needs --endpoints FILE: the tokens are made when the server starts');
  if (argv.tokenFile !== undefined) throw new UserError('--token-file is for --episode: with --episodes every episode has its own token');
  if (argv.prompt !== undefined) throw new UserError('--prompt is for --episode');
  const port = argv.http === undefined ? 0 : /^[0-9]{1,5}$/.test(argv.http) ? Number(argv.http) : Number.NaN;
  if (!(port >= 0 && port <= 65535))
    throw new UserError(`--http takes a port number from 0 to 65535 in decimal digits, not ${JSON.stringify(argv.http)}`);
  const root = outputPath(settings, argv.episodes!, 'episodes', 'folder');
  const endpointsFile = outputPath(settings, argv.endpoints, 'endpoints', 'file', { reads: [root] });
  const { EPISODE_ID, serveEpisodes } = await import('../../../evaluation/episodes-server.ts');
  const { EVENTS_FILE } = await import('../../../evaluation/episode.ts');
  if (!existsSync(root)) throw new UserError(`--episodes ${argv.episodes} does not exist`);
  const ids = episodeFolders(root, EPISODE_ID, EVENTS_FILE);
  if (!ids.length) throw new UserError(`--episodes ${argv.episodes} holds no episode folder (one with ${EVENTS_FILE})`);
  const server = await serveEpisodes(settings, { host: argv.host ?? '127.0.0.1', port });
  const endpoints = Object.fromEntries(ids.map((id) => [id, server.add(id, join(root, id))]));
  // the tokens are secrets: written to a private file (mode 0600 from its creation), then renamed into place
  writeFileAtomic(endpointsFile, `${JSON.stringify({ episodes: endpoints }, null, 2)}\n`, { mode: 0o600 });
  process.stderr.write(
    `wwref: serving ${ids.length} episode(s) of ${argv.episodes} at ${server.host}:${server.port}/episodes/<id>/mcp; ` +
      `URLs and tokens in ${argv.endpoints} (Ctrl-C stops)\n`,
  );
  await stopSignal();
  await server.close();
  return 0;
}

/**
 * The names of the episode folders in `root` (a folder holding `events`), sorted. A folder that holds
 * an episode but cannot be served is said on stderr, one line each: its name is not an episode id (the
 * path segment of its URL: ASCII letters, digits, '.', '_' and '-', not starting with '.' or '-'), or it
 * is a symbolic link (served only as the folder itself, never through a link).
 */
function episodeFolders(root: string, id: RegExp, events: string): string[] {
  const ids: string[] = [];
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    const isLink = entry.isSymbolicLink();
    if (!(entry.isDirectory() || isLink) || !existsSync(join(root, entry.name, events))) continue;
    const name = JSON.stringify(entry.name); // quoted and escaped: a space, a control character or a non-ASCII letter shows
    if (isLink) process.stderr.write(`wwref: skipped ${name}: a symbolic link to a folder (name the episode folder itself)\n`);
    else if (!id.test(entry.name))
      process.stderr.write(
        `wwref: skipped ${name}: not an episode id, the path of its URL ` +
          "(ASCII letters, digits, '.', '_' and '-', not starting with '.' or '-', at most 200); rename the folder to serve it\n",
      );
    else ids.push(entry.name);
  }
  return ids.sort();
}
