import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { deviceToolName } from '../../src/mcp/device-tool-names.js';
import type { Client as Api } from './api.js';
import type { AttachedDevice } from './fixtures.js';

export const MODERN = '2026-07-28';

/**
 * The MCP tool name of a device's function, `<capability>__<12 hex digits of the device id>`
 * with the service's own rule (src/mcp/device-tool-names.ts). test/hostile/mcp-tool-names.test.ts
 * pins that rule with literal expectations; every other test names tools through this.
 */
export function toolName(capability: string, device: string | { id: string }): string {
  return deviceToolName(capability, typeof device === 'string' ? device : device.id);
}
export type Era = 'modern' | 'legacy';

/** The official v2 client, pinned to 2026-07-28 (modern) or speaking the 2025 handshake (legacy). */
export async function connect(url: string, token: string, era: Era): Promise<Client> {
  const client = new Client({ name: 'dfc-tests', version: '1.0.0' }, era === 'modern' ? { versionNegotiation: { mode: { pin: MODERN } } } : {});
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

/** The `_meta` envelope a 2026-07-28 request carries. */
export function envelope(extra: Record<string, unknown> = {}) {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
    ...extra,
  };
}

export interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
  /** The JSON body, or the last JSON-RPC message of an event stream. */
  json: any;
}

/** A hand-built modern POST /mcp: every header can be overridden or removed (value undefined). */
export async function rawMcp(
  url: string,
  options: {
    token?: string;
    method: string;
    params?: Record<string, unknown>;
    name?: string;
    headers?: Record<string, string | undefined>;
    body?: string;
    id?: number | string;
  },
): Promise<RawResponse> {
  const headers: Record<string, string | undefined> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN,
    'mcp-method': options.method,
    ...(options.name !== undefined ? { 'mcp-name': options.name } : {}),
    ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
    ...options.headers,
  };
  const body =
    options.body ??
    JSON.stringify({
      jsonrpc: '2.0',
      id: options.id ?? 1,
      method: options.method,
      params: { ...options.params, _meta: envelope((options.params?._meta as Record<string, unknown>) ?? {}) },
    });
  const clean = Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined)) as Record<string, string>;
  const res = await fetch(`${url}/mcp`, { method: 'POST', headers: clean, body });
  const text = await res.text();
  let json: unknown = null;
  if (res.headers.get('content-type')?.includes('text/event-stream')) {
    const frames = text
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => JSON.parse(l.slice(5)));
    json = frames.at(-1) ?? null;
  } else {
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = text;
    }
  }
  return { status: res.status, headers: res.headers, text, json };
}

export interface SimulatedDevice {
  /** Actions the device has handled, in order. */
  handled: { id: string; deviceId: string; capability: string; args: Record<string, unknown> }[];
  stop(): Promise<void>;
}

/**
 * A device that polls POST /v1/device/{id}/next with its own token and the workspace header,
 * and reports POST /v1/device/{id}/result with what `answer` returns. `delayMs` holds each
 * command before the result, so a test can observe `received`.
 */
export function simulateDevice(
  api: Api,
  device: AttachedDevice,
  answer: (command: { capability: string; args: Record<string, unknown> }) => {
    ok: boolean;
    result?: unknown;
    error?: { code: string; message: string };
  } = () => ({ ok: true, result: { done: true } }),
  options: { delayMs?: number; pollMs?: number } = {},
): SimulatedDevice {
  const handled: SimulatedDevice['handled'] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const res = await api.post(`/v1/device/${device.id}/next`, { token: device.token, headers: { 'x-service-workspace': device.workspace } });
      const command = res.status === 200 ? res.body.data : null;
      if (!command) {
        await new Promise((r) => setTimeout(r, options.pollMs ?? 25));
        continue;
      }
      handled.push({ id: command.id, deviceId: command.deviceId, capability: command.capability, args: command.args });
      if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
      const reply = answer({ capability: command.capability, args: command.args });
      await api.post(`/v1/device/${device.id}/result`, { token: device.token, body: { actionId: command.id, ...reply } });
    }
  })();
  return {
    handled,
    async stop() {
      running = false;
      await loop;
    },
  };
}

/**
 * The error envelope of a tool error result: the JSON in its last text (src/mcp/errors.ts).
 * A fixed tool's error has no `structuredContent` (it would not match its outputSchema).
 */
export function errorEnvelope(result: { content?: unknown }): { error: { code: string; message: string; requestId: string; issues?: unknown[] } } {
  const texts = (result.content as { type: string; text?: string }[]).filter((c) => c.type === 'text');
  return JSON.parse(texts.at(-1)!.text!);
}
