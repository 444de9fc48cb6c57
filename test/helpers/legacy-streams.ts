import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

/**
 * A 2025-era client (the official v2 SDK, its default handshake) whose session GET streams are
 * watched from the side: the SSE comments the server writes there (`: following N`, each time
 * the number of resources the session follows changes) and the stream's end. `route` picks the
 * instance each request goes to (POSTs to one, the GET stream to another).
 */
export interface LegacyStateClient {
  client: Client;
  /** The `following` counts the session's GET streams announced, in order. */
  following: number[];
  /** How many of its GET streams have ended. */
  streamsEnded: () => number;
  /** How many GET streams it opened. */
  streamsOpened: () => number;
  /** The session id the server issued. */
  sessionId: () => string | undefined;
}

async function watch(body: ReadableStream<Uint8Array>, following: number[], ended: () => void): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
      for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
        const frame = text.slice(0, end);
        text = text.slice(end + 2);
        const count = /^: following (\d+)$/m.exec(frame);
        if (count) following.push(Number(count[1]));
      }
    }
  } catch {
    // The client aborted its stream: it ended all the same.
  } finally {
    ended();
  }
}

export async function connectLegacyWatched(route: (method: string) => string, token: string): Promise<LegacyStateClient> {
  const following: number[] = [];
  let opened = 0;
  let ended = 0;
  let session: string | undefined;
  const watched: typeof fetch = async (input, init) => {
    const method = init?.method ?? 'GET';
    const url = new URL(typeof input === 'string' || input instanceof URL ? input.toString() : input.url);
    const target = new URL(url.pathname + url.search, route(method));
    const response = await fetch(target, init);
    session = response.headers.get('mcp-session-id') ?? session;
    if (method !== 'GET' || !response.ok || !response.body) return response;
    opened += 1;
    const [mine, theirs] = response.body.tee();
    void watch(mine, following, () => (ended += 1));
    return new Response(theirs, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  const client = new Client({ name: 'dfc-tests-2025', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${route('POST')}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    fetch: watched,
  });
  await client.connect(transport);
  return { client, following, streamsEnded: () => ended, streamsOpened: () => opened, sessionId: () => session };
}
