// `wwref serve --episode DIR --http 0` as a real process for the server tests: started, its URL read
// from what it prints, and kept in `servers` so that the test file stops it at the end.
import { execa, type ResultPromise } from 'execa';
import { ROOT } from '../../pipelines/core/paths.ts';
import { BIN } from './cli.ts';

/** Starts a server on a free port of 127.0.0.1 and resolves with its MCP URL (rejects if it exits first). */
export function startHttpServer(servers: ResultPromise[], ep: string, extra: string[] = []): Promise<string> {
  const child = execa('node', [BIN, 'serve', '--episode', ep, '--http', '0', ...extra], { cwd: ROOT, reject: false });
  servers.push(child);
  return new Promise((done, fail) => {
    let seen = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      const url = /at (http:\/\/\S+\/mcp)/.exec(seen)?.[1];
      if (url) done(url);
    });
    child.once('exit', () => fail(new Error(`serve exited: ${seen}`)));
  });
}
