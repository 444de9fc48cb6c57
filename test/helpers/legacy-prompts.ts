/**
 * 2025-era user confirmations over raw HTTP, for tests that hold many of them open at once
 * (the official client answers each ask as it comes and cannot leave one pending).
 */
const LEGACY = '2025-11-25';

/** The headers of a raw 2025-era request for `token`, in `session` when given. */
export function legacyHeaders(token: string, session?: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': LEGACY,
    authorization: `Bearer ${token}`,
    ...(session !== undefined ? { 'mcp-session-id': session } : {}),
  };
}

/** A 2025-era `initialize` for `token`'s connection, declaring `capabilities` (form elicitation unless told): the `Mcp-Session-Id` it was given. */
export async function initializeLegacy(url: string, token: string, capabilities: Record<string, unknown> = { elicitation: { form: {} } }): Promise<string> {
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: legacyHeaders(token),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities, clientInfo: { name: 'legacy-prompts', version: '1' } },
    }),
  });
  if (res.status !== 200) throw new Error(`initialize answered ${res.status}: ${await res.text()}`);
  await res.text();
  return res.headers.get('mcp-session-id')!;
}

/** What the first message on a tools/call's event stream was: an ask, or the call's own answer. */
export type LegacyCallStart =
  | { kind: 'ask'; elicitationId: number; message: string; answer(result: unknown): Promise<number>; result(): Promise<any>; close(): void }
  | { kind: 'result'; result: any };

/**
 * A 2025-era tools/call of `name` whose event stream is read up to its first message. An ask
 * stays pending (its stream open) until `answer` posts the client's response and `result`
 * reads the call's answer, or `close` drops the stream. With `session`, every POST carries that
 * `Mcp-Session-Id`; `answerUrl` sends the answer to another instance than the call.
 */
export async function startLegacyCall(
  url: string,
  token: string,
  name: string,
  args: Record<string, unknown>,
  id = 1,
  options: { session?: string; answerUrl?: string } = {},
): Promise<LegacyCallStart> {
  const abort = new AbortController();
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: legacyHeaders(token, options.session),
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }),
    signal: abort.signal,
  });
  if (!res.headers.get('content-type')?.includes('text/event-stream')) return { kind: 'result', result: ((await res.json()) as any).result };
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  const nextMessage = async (): Promise<any> => {
    for (;;) {
      const end = buffered.indexOf('\n\n');
      if (end >= 0) {
        const frame = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const data = frame
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5))
          .join('');
        if (data) return JSON.parse(data);
        continue;
      }
      const { value, done } = await reader.read();
      if (done) throw new Error('the event stream ended without a message');
      buffered += value;
    }
  };
  const first = await nextMessage();
  if (first.method !== 'elicitation/create') {
    abort.abort();
    return { kind: 'result', result: first.result };
  }
  return {
    kind: 'ask',
    elicitationId: first.id,
    message: first.params.message,
    async answer(result) {
      const posted = await fetch(`${options.answerUrl ?? url}/mcp`, {
        method: 'POST',
        headers: legacyHeaders(token, options.session),
        body: JSON.stringify({ jsonrpc: '2.0', id: first.id, result }),
      });
      await posted.text();
      return posted.status;
    },
    async result() {
      // Notifications may come first (the SDK cancels its own ask when it times out).
      let message = await nextMessage();
      while (message.id !== id) message = await nextMessage();
      abort.abort();
      return message.result;
    },
    close: () => abort.abort(),
  };
}
