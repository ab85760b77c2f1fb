// `wwref connect`: an episode's Streamable HTTP endpoint as a stdio MCP server, for an MCP client that
// launches its server (WWREF_MCP_COMMAND of a sandboxed cohort, whose agents cannot start `wwref serve`
// on a folder they do not see). Each newline-delimited JSON-RPC message read from stdin is POSTed at
// once to the endpoint (--url URL, else WWREF_MCP_URL) with `Authorization: Bearer TOKEN`: the token
// read from --token-file FILE (a sandboxed cohort's is a file only its sandbox sees), else
// WWREF_MCP_TOKEN (never an argument: an argv is readable by every process of the host). So it works
// for an MCP client that passes its server no environment (the Python SDK's stdio client). Each message of the answer (a JSON body, or the
// `data` of each event of a text/event-stream) is written to stdout as one line, in the order the
// answers come (requests run concurrently). A notification's 202 writes nothing. At the end of stdin
// the requests in flight are awaited, then the bridge exits 0. A refused token (401, 403) or an
// endpoint that cannot be reached ends it with one line on stderr (a UserError).
import { createInterface } from 'node:readline';
import { readRegularFile } from '../../core/containment.ts';
import { UserError } from '../../core/errors.ts';

export interface BridgeOptions {
  url: string;
  token: string;
  input: NodeJS.ReadableStream;
  /** Writes one line (a JSON-RPC message) to the client. */
  write: (line: string) => void;
}

/** The messages of an answer body: a JSON value (an array: each of its messages) or the events of a stream. */
async function* messagesOf(response: Response): AsyncGenerator<string> {
  const type = response.headers.get('content-type') ?? '';
  if (!response.body) return;
  if (type.startsWith('text/event-stream')) {
    yield* eventData(response.body);
    return;
  }
  const text = (await response.text()).trim();
  if (text === '') return;
  const value = JSON.parse(text) as unknown;
  for (const message of Array.isArray(value) ? value : [value]) yield JSON.stringify(message);
}

/** The `data` of each event of a text/event-stream body (its lines joined), as it arrives. */
async function* eventData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let pending = '';
  let data: string[] = [];
  const flush = function* () {
    if (data.length) {
      const text = data.join('\n');
      data = [];
      if (text.trim() !== '') yield JSON.stringify(JSON.parse(text));
    }
  };
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    pending += decoder.decode(chunk, { stream: true });
    for (let end = pending.search(/\r\n|\r|\n/); end >= 0; end = pending.search(/\r\n|\r|\n/)) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + (pending.startsWith('\r\n', end) ? 2 : 1));
      if (line === '') yield* flush();
      else if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
      // `event:`, `id:`, `retry:` and comments carry nothing the client reads over stdio
    }
  }
  if (pending.startsWith('data:')) data.push(pending.slice(pending.startsWith('data: ') ? 6 : 5));
  yield* flush();
}

/** The id of a JSON-RPC request line (undefined: a notification, a response, or no JSON). */
function requestId(line: string): string | number | undefined {
  try {
    const message = JSON.parse(line) as { id?: unknown; method?: unknown };
    const id = message.id;
    return typeof message.method === 'string' && (typeof id === 'string' || typeof id === 'number') ? id : undefined;
  } catch {
    return undefined;
  }
}

/** An error the endpoint answered with `id: null` (a body it could not read) given the request's id, so that its client is not left waiting. */
function ownId(message: string, id: string | number): string {
  const parsed = JSON.parse(message) as { id?: unknown; error?: unknown };
  return parsed.id === null && parsed.error !== undefined ? JSON.stringify({ ...parsed, id }) : message;
}

/** What says that nothing listens at the endpoint (the episode's server is gone): the bridge ends. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/** Sends one message and writes what comes back; a UserError for a refused token or an unreachable endpoint. */
async function forward(options: BridgeOptions, line: string): Promise<void> {
  let response: Response;
  try {
    response = await fetch(options.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${options.token}`,
      },
      body: line,
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (error as Error).message;
    if (UNREACHABLE.has(cause?.code ?? '')) throw new UserError(`connect: the endpoint ${options.url} cannot be reached (${why})`);
    // reached, but this request broke off (the server closed it: a body over its bound): it fails, the bridge goes on
    const id = requestId(line);
    if (id !== undefined)
      options.write(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32603, message: `the request could not be sent (${why})` } }));
    return;
  }
  if (response.status === 401 || response.status === 403)
    throw new UserError(
      `connect: the endpoint ${options.url} refused the token (HTTP ${response.status}): the episode is over, or the token is not its own`,
    );
  const id = requestId(line);
  try {
    let answered = false;
    for await (const message of messagesOf(response)) {
      options.write(id === undefined ? message : ownId(message, id));
      answered = true;
    }
    // a request that got no message back (an HTTP error without one): answered as an error, so its client does not wait
    if (!answered && id !== undefined)
      options.write(
        JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32603, message: `the endpoint answered HTTP ${response.status}` } }),
      );
  } catch (error) {
    if (id !== undefined)
      options.write(
        JSON.stringify({
          jsonrpc: '2.0',
          id,
          error: { code: -32603, message: `the endpoint's answer could not be read: ${(error as Error).message}` },
        }),
      );
  }
}

/** Runs the bridge until stdin ends and every answer is written (resolves), or until a refusal (rejects with a UserError). */
export function runBridge(options: BridgeOptions): Promise<void> {
  return new Promise((done, fail) => {
    const inFlight = new Set<Promise<void>>();
    let failed = false;
    const lines = createInterface({ input: options.input, crlfDelay: Number.POSITIVE_INFINITY });
    lines.on('line', (line) => {
      if (failed || line.trim() === '') return;
      const sent = forward(options, line).catch((error: unknown) => {
        if (failed) return;
        failed = true;
        lines.close();
        fail(error);
      });
      inFlight.add(sent);
      void sent.then(() => inFlight.delete(sent));
    });
    lines.once('close', () => {
      void (async () => {
        while (inFlight.size) await Promise.all([...inFlight]);
        if (!failed) done();
      })();
    });
  });
}

/** The bytes a token file may hold. */
const TOKEN_FILE_MAX_BYTES = 4096;

/**
 * The endpoint: `url` (--url) else WWREF_MCP_URL; the token from `tokenFile` (--token-file) else
 * WWREF_MCP_TOKEN. A UserError naming what is missing.
 */
export function endpointOf(
  given: { url?: string; tokenFile?: string },
  env: Readonly<Record<string, string | undefined>>,
): { url: string; token: string } {
  const url = (given.url ?? env.WWREF_MCP_URL)?.trim();
  let token = env.WWREF_MCP_TOKEN?.trim();
  if (given.tokenFile !== undefined) {
    try {
      token = readRegularFile(given.tokenFile, 'token file', TOKEN_FILE_MAX_BYTES).toString('utf8').trim();
    } catch (error) {
      throw new UserError(`connect: --token-file ${given.tokenFile} cannot be read (${(error as Error).message.split('\n')[0]})`);
    }
    if (!token) throw new UserError(`connect: --token-file ${given.tokenFile} is empty`);
  }
  if (!url || !token)
    throw new UserError(
      `connect needs WWREF_MCP_URL and WWREF_MCP_TOKEN in its environment, or --url and --token-file (${!url ? 'WWREF_MCP_URL' : 'WWREF_MCP_TOKEN'} is not set; an MCP client that filters its server's environment must pass them on)`,
    );
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UserError(`connect: ${given.url === undefined ? 'WWREF_MCP_URL' : '--url'} ${JSON.stringify(url.slice(0, 100))} is no URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new UserError(`connect: the endpoint must be an http or https URL, not ${parsed.protocol}`);
  return { url, token };
}

/** The endpoint from the environment alone (WWREF_MCP_URL, WWREF_MCP_TOKEN). */
export const endpointFromEnvironment = (env: Readonly<Record<string, string | undefined>>) => endpointOf({}, env);
