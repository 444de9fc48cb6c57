import type { Client } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient, type RawClientDispatch, type TaskEnabledSession } from '@modelcontextprotocol/ext-tasks/client';
import { connect, MODERN } from './mcp-client.js';

/** The routing header value a 2026-07-28 request carries (SEP-2243, SEP-2663): the tool's name or the task id. */
function mcpName(method: string, params: Record<string, unknown>): string | undefined {
  if (method === 'tools/call') return params.name as string;
  if (method.startsWith('tasks/')) return params.taskId as string;
  return undefined;
}

let nextId = 1;

/** One JSON-RPC request over POST /mcp as a 2026-07-28 client sends it; the last message of the answer. */
export async function postMcp(url: string, token: string, request: Record<string, unknown>, signal?: AbortSignal): Promise<Record<string, any>> {
  const method = request.method as string;
  const params = (request.params ?? {}) as Record<string, unknown>;
  const name = mcpName(method, params);
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': method,
      ...(name !== undefined ? { 'mcp-name': name } : {}),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: request.id ?? nextId++, method, params }),
    ...(signal ? { signal } : {}),
  });
  const text = await res.text();
  if (res.headers.get('content-type')?.includes('text/event-stream')) {
    const frames = text
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => JSON.parse(l.slice(5)));
    return frames.at(-1);
  }
  return JSON.parse(text);
}

/**
 * The official MCP Tasks requester (`@modelcontextprotocol/ext-tasks`) over the official
 * client, pinned to 2026-07-28: task wire shapes go through `rawDispatch`, which posts them as
 * the SDK's transport would (routing headers included).
 */
export async function taskSession(url: string, token: string): Promise<{ client: Client; session: TaskEnabledSession }> {
  const client = await connect(url, token, 'modern');
  const rawDispatch: RawClientDispatch = async (request, options) => {
    const answer = await postMcp(url, token, request as Record<string, unknown>, options?.signal);
    return answer.error ? { kind: 'error', error: answer.error } : { kind: 'result', result: answer.result };
  };
  const session = createTaskSessionFromClient(client, {
    endpointId: `${url}#${token.slice(-8)}`,
    rawDispatch,
    v2RequestFraming: { protocolVersion: MODERN, clientInfo: { name: 'dfc-tests', version: '1.0.0' }, clientCapabilities: {} },
  });
  return { client, session };
}

/** The `_meta` of a raw 2026-07-28 request that declares MCP Tasks (and whatever else `capabilities` says). */
export function declaringTasks(capabilities: Record<string, unknown> = {}, meta: Record<string, unknown> = {}) {
  return {
    ...meta,
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': { ...capabilities, extensions: { 'io.modelcontextprotocol/tasks': {} } },
  };
}

export interface Listening {
  status: number;
  /** The next JSON-RPC message on the stream that `match` accepts (others are kept in `seen`). */
  next(match: (message: Record<string, any>) => boolean, timeoutMs?: number): Promise<Record<string, any>>;
  seen: Record<string, any>[];
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

/** A raw 2026-07-28 `subscriptions/listen` request (id `listen-1`), answered as the server answers it. */
export function listenRequest(
  url: string,
  token: string,
  notifications: Record<string, unknown>,
  options: { capabilities?: Record<string, unknown>; signal?: AbortSignal; headers?: Record<string, string> } = {},
): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': 'subscriptions/listen',
      ...options.headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 'listen-1',
      method: 'subscriptions/listen',
      params: {
        notifications,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN,
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': options.capabilities ?? {},
        },
      },
    }),
    ...(options.signal ? { signal: options.signal } : {}),
  });
}

/** Opens a 2026-07-28 `subscriptions/listen` stream and reads its messages as they come. */
export async function listen(
  url: string,
  token: string,
  notifications: Record<string, unknown>,
  capabilities: Record<string, unknown> = {},
): Promise<Listening> {
  const abort = new AbortController();
  const res = await listenRequest(url, token, notifications, { capabilities, signal: abort.signal });
  const messages: Record<string, any>[] = [];
  const seen: Record<string, any>[] = [];
  let wake: (() => void) | undefined;
  let done = false;
  const ended = (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const data = frame
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trim())
            .join('\n');
          if (data) messages.push(JSON.parse(data));
          wake?.();
        }
      }
    } catch {
      // Closed by the test.
    }
    done = true;
    wake?.();
  })();
  return {
    status: res.status,
    seen,
    ended,
    close: () => abort.abort(),
    async next(match, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const index = messages.findIndex(match);
        if (index >= 0) {
          seen.push(...messages.splice(0, index));
          return messages.shift()!;
        }
        if (done) throw new Error(`stream ended first; seen ${JSON.stringify([...seen, ...messages])}`);
        if (Date.now() > deadline) throw new Error(`no matching message; seen ${JSON.stringify([...seen, ...messages])}`);
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 100);
        });
      }
    },
  };
}
