// Many episodes from one long-lived process: `/episodes/<id>/mcp` is episode <id>'s MCP endpoint
// (Streamable HTTP, stateless, as server.ts serves one episode at `/mcp`), reached only with that
// episode's own bearer token, so an agent given one endpoint can act on no other episode. Episodes are
// added and removed while the server runs (a cohort adds each before its agent starts and removes it
// when the agent has ended: a process the agent left behind reaches nothing). An unknown episode and
// a wrong token are answered alike (401), so the server tells no one which episodes exist. Removing an
// episode stops admitting its requests, refuses the actions of those already admitted that have not
// committed, and waits for what is running (a calculation's receipt): once `remove` resolves, nothing
// more is written to the episode's log from this server.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { resolve } from 'node:path';
import type { Settings } from '../core/settings.ts';
import { admitRequest, answerFailure, answerMcp, episodeServer, listen, reply, type Served, tokenMatches, urlOf } from './server.ts';

/** An episode id: a path segment of letters, digits, `.`, `_` and `-`. */
export const EPISODE_ID = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$/;
const ROUTE = /^\/episodes\/([^/]+)\/mcp$/;

/** What an agent needs to reach one episode over HTTP. */
export interface EpisodeEndpoint {
  id: string;
  url: string;
  /** Sent as `Authorization: Bearer <token>`: 43 URL-safe characters (256 random bits). */
  token: string;
}

/** An episode being served: its folder, its token, and its calls (stopped by `controller`, awaited by `remove`). */
interface Entry {
  dir: string;
  expected: Buffer;
  controller: AbortController;
  running: Set<Promise<unknown>>;
}

/** Stops admitting `entry`'s calls and waits for those running (they settle however they end). */
async function stopServing(entry: Entry): Promise<void> {
  entry.controller.abort();
  while (entry.running.size) await Promise.allSettled([...entry.running]);
}

export class EpisodesServer {
  private readonly episodes = new Map<string, Entry>();

  constructor(
    private readonly http: Server,
    readonly host: string,
    readonly port: number,
  ) {}

  /** Serves the episode in `dir` at `/episodes/<id>/mcp` with a new token (replacing any earlier one of that id). */
  add(id: string, dir: string): EpisodeEndpoint {
    if (!EPISODE_ID.test(id)) throw new Error(`not an episode id: ${JSON.stringify(id)}`);
    const token = randomBytes(32).toString('base64url');
    this.episodes.get(id)?.controller.abort(); // the earlier one's calls commit nothing more
    this.episodes.set(id, {
      dir: resolve(dir),
      expected: Buffer.from(`Bearer ${token}`),
      controller: new AbortController(),
      running: new Set(),
    });
    return { id, url: urlOf(this.host, this.port, `/episodes/${id}/mcp`), token };
  }

  /**
   * Stops serving the episode: its token no longer opens anything at once, the actions of requests
   * already admitted are refused before they commit, and the promise resolves when every call of the
   * episode has ended (a calculation running ends within its wall limit, its receipt written).
   */
  remove(id: string): Promise<void> {
    const entry = this.episodes.get(id);
    this.episodes.delete(id);
    return entry ? stopServing(entry) : Promise.resolve();
  }

  /** The episode a request may act on (its folder and how its calls are served), or undefined (answered 401 by the caller). */
  episodeFor(id: string, authorised: (expected: Buffer) => boolean): { dir: string; served: Served } | undefined {
    const entry = this.episodes.get(id);
    if (!entry || !authorised(entry.expected)) return undefined;
    const track = (running: Promise<unknown>) => {
      entry.running.add(running);
      const done = () => entry.running.delete(running);
      running.then(done, done);
    };
    return { dir: entry.dir, served: { signal: entry.controller.signal, track } };
  }

  /**
   * Stops serving every episode and closes the port at once: actions not yet committed are refused, and
   * running calculations are not waited for (a shutdown: a call whose process ends with this one stays
   * reserved without a receipt, as after a kill). `remove` each episode first to wait for them.
   */
  async close(): Promise<void> {
    for (const entry of this.episodes.values()) entry.controller.abort();
    this.episodes.clear();
    this.http.closeAllConnections();
    await new Promise<void>((done) => this.http.close(() => done()));
  }
}

/** Listens on HOST:PORT (0: any free port) for the episodes added to the returned server. */
export async function serveEpisodes(settings: Settings, options: { host: string; port: number }): Promise<EpisodesServer> {
  let served: EpisodesServer | undefined;
  const http = createServer(async (req, res) => {
    try {
      if (!served || !admitRequest(req, res, options.host, served.port)) return;
      const id = ROUTE.exec(new URL(req.url ?? '/', 'http://x').pathname)?.[1];
      if (id === undefined) return reply(res, 404, 'the MCP endpoints are /episodes/<id>/mcp');
      const episode = served.episodeFor(id, (expected) => tokenMatches(req, expected));
      if (episode === undefined) return reply(res, 401, "this episode's bearer token is required");
      await answerMcp(req, res, () => episodeServer(settings, episode.dir, { served: episode.served }));
    } catch (error) {
      answerFailure(res, error);
    }
  });
  const port = await listen(http, options.host, options.port);
  served = new EpisodesServer(http, options.host, port);
  return served;
}
