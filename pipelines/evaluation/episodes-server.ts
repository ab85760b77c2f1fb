// Many episodes from one long-lived process: `/episodes/<id>/mcp` is episode <id>'s MCP endpoint
// (Streamable HTTP, stateless, as server.ts serves one episode at `/mcp`), reached only with that
// episode's own bearer token, so an agent given one endpoint can act on no other episode. Episodes are
// added and removed while the server runs (a cohort adds each before its agent starts and removes it
// when the agent has ended: a process the agent left behind reaches nothing). An unknown episode and
// a wrong token are answered alike (401), so the server tells no one which episodes exist. Removing an
// episode stops admitting its requests, refuses the actions of those already admitted that have not
// committed, and waits for what is running (a calculation's receipt): once `remove` resolves, nothing
// more is written to the episode's log from this server.
//
// `openSocket(id)` also serves that one episode on a Unix socket of its own, in a
// private folder (mode 0700) of the system's temporary folder (one every agent's sandbox replaces
// with its own: /tmp else), removed with the episode: a sandbox
// without the host's network reaches its episode through it (bound into the sandbox, see
// cohort/sandbox.ts). It answers the episode's path only, with the same bearer token (the same code
// as the port), and admits a bounded number of connections at once: an agent holding many open ties
// up its own episode only.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
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
  /** The episode's own Unix socket, when it has one (`openSocket`). */
  socket?: { http: Server; folder: string };
}

/** Connections one episode's Unix socket admits at once (more are closed as they come). */
export const SOCKET_CONNECTIONS = 64;

/**
 * Where the episodes' sockets go: the system's temporary folder when it is /tmp, /var/tmp or /dev/shm
 * (or inside one) and short, else /tmp: each agent's sandbox has its own of those three, so no agent
 * sees a sibling's socket (the sandbox runs as the same uid: a folder's 0700 would not keep it out).
 */
function socketBase(): string {
  const base = tmpdir();
  try {
    const real = realpathSync(base);
    if (real.length <= 80 && ['/tmp', '/var/tmp', '/dev/shm'].some((p) => real === p || real.startsWith(`${p}/`))) return base;
  } catch {
    // gone: /tmp
  }
  return '/tmp';
}

/** Closes an episode's own socket and removes its folder. */
function closeSocket(entry: Entry): void {
  if (!entry.socket) return;
  entry.socket.http.closeAllConnections();
  entry.socket.http.close();
  rmSync(entry.socket.folder, { recursive: true, force: true });
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
    /** Answers one request; `only`: the one episode id it may name (an episode's own socket). */
    private readonly handle: (req: IncomingMessage, res: ServerResponse, only?: string) => Promise<void>,
  ) {}

  /** Serves the episode in `dir` at `/episodes/<id>/mcp` with a new token (replacing any earlier one of that id). */
  add(id: string, dir: string): EpisodeEndpoint {
    if (!EPISODE_ID.test(id)) throw new Error(`not an episode id: ${JSON.stringify(id)}`);
    const token = randomBytes(32).toString('base64url');
    const earlier = this.episodes.get(id);
    earlier?.controller.abort(); // the earlier one's calls commit nothing more
    if (earlier) closeSocket(earlier);
    this.episodes.set(id, {
      dir: resolve(dir),
      expected: Buffer.from(`Bearer ${token}`),
      controller: new AbortController(),
      running: new Set(),
    });
    return { id, url: urlOf(this.host, this.port, `/episodes/${id}/mcp`), token };
  }

  /**
   * Serves the added episode `id` on a Unix socket of its own too (the same requests, its path only, its
   * token), removed with it; returns the socket's path.
   */
  async openSocket(id: string): Promise<string> {
    const entry = this.episodes.get(id);
    if (!entry) throw new Error(`no episode ${JSON.stringify(id)} is served`);
    closeSocket(entry);
    // short (sun_path holds 108 bytes) and private: mkdtemp makes it 0700
    const folder = mkdtempSync(join(socketBase(), 'wwref-'));
    const http = createServer((req, res) => void this.handle(req, res, id));
    http.maxConnections = SOCKET_CONNECTIONS;
    entry.socket = { http, folder };
    const path = join(folder, 's');
    try {
      await new Promise<void>((done, fail) => http.once('error', fail).listen(path, done));
    } catch (error) {
      closeSocket(entry);
      throw error;
    }
    return path;
  }

  /**
   * Stops serving the episode: its token no longer opens anything at once, the actions of requests
   * already admitted are refused before they commit, and the promise resolves when every call of the
   * episode has ended (a calculation running ends within its wall limit, its receipt written).
   */
  remove(id: string): Promise<void> {
    const entry = this.episodes.get(id);
    this.episodes.delete(id);
    if (entry) closeSocket(entry);
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
    for (const entry of this.episodes.values()) {
      entry.controller.abort();
      closeSocket(entry);
    }
    this.episodes.clear();
    this.http.closeAllConnections();
    await new Promise<void>((done) => this.http.close(() => done()));
  }
}

/** Listens on HOST:PORT (0: any free port) for the episodes added to the returned server. */
export async function serveEpisodes(settings: Settings, options: { host: string; port: number }): Promise<EpisodesServer> {
  let served: EpisodesServer | undefined;
  // one code for the port and each episode's socket (`only`: its id; the Host header names the port,
  // as the sandbox's forwarder passes the agent's request on unchanged)
  const handle = async (req: IncomingMessage, res: ServerResponse, only?: string) => {
    try {
      if (!served || !admitRequest(req, res, options.host, served.port)) return;
      const id = ROUTE.exec(new URL(req.url ?? '/', 'http://x').pathname)?.[1];
      if (id === undefined) return reply(res, 404, 'the MCP endpoints are /episodes/<id>/mcp');
      if (only !== undefined && id !== only) return reply(res, 403, "this socket serves its own episode's path only");
      const episode = served.episodeFor(id, (expected) => tokenMatches(req, expected));
      if (episode === undefined) return reply(res, 401, "this episode's bearer token is required");
      await answerMcp(req, res, () => episodeServer(settings, episode.dir, { served: episode.served }));
    } catch (error) {
      answerFailure(res, error);
    }
  };
  const http = createServer((req, res) => void handle(req, res));
  const port = await listen(http, options.host, options.port);
  served = new EpisodesServer(http, options.host, port, handle);
  return served;
}
