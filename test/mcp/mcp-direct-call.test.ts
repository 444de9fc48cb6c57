import { beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { rawMcp, simulateDevice, toolName, type RawResponse } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * A plain modern call of a device tool is answered without the SDK's per-request server
 * (src/mcp/direct-call.ts). Clients must not be able to tell: every answer here is
 * compared with the SDK's answer to the same call, which the SDK gives when the request
 * carries something the direct path leaves to it (here an extra `_meta` key).
 */
let owner: string;
let lamp: AttachedDevice;
let agent: { token: string; principal: string };
let setPower: string;

const SDK_ONLY = { 'example.com/trace': 'to-the-sdk' };
const METRICS_TOKEN = 'metrics-secret-for-direct-call-tests';

/** How many tools/call messages each path has answered, from GET /metrics. */
async function answeredBy(): Promise<{ direct: number; sdk: number }> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const count = (path: string) =>
    Number(text.match(new RegExp(`^dfc_mcp_messages_total\\{method="tools/call",answered_by="${path}"\\} (\\d+)$`, 'm'))?.[1] ?? 0);
  return { direct: count('direct'), sdk: count('sdk') };
}

const server = useTestServer({ env: { METRICS_TOKEN } });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-direct-call');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  agent = await createAgent(api, owner, { name: 'direct', access: 'act', principal: 'agent:direct' });
  await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power']);
  setPower = toolName('set_power', lamp.id);
});

function call(args: unknown, meta: Record<string, unknown> = {}, headers: Record<string, string | undefined> = {}): Promise<RawResponse> {
  return rawMcp(server.url, {
    token: agent.token,
    method: 'tools/call',
    name: setPower,
    params: { name: setPower, arguments: args, _meta: meta },
    headers,
    id: 41,
  });
}

async function queued(): Promise<{ id: string }[]> {
  const actions = (await api.get('/v1/actions', { token: owner })).body.data as { id: string; status: string }[];
  return actions.filter((a) => a.status === 'queued');
}

/** The answer with what differs between two actions (id, timestamps) replaced by placeholders. */
function normalised(res: RawResponse): unknown {
  let text = res.text;
  const action = res.json?.result?.structuredContent as Record<string, unknown> | undefined;
  if (action?.id) {
    for (const key of ['id', 'createdAt', 'expiresAt', 'dispatchedAt', 'completedAt'] as const) {
      // Numbers become 0, which stays valid both as a JSON number and inside the text content.
      if (action[key] !== null && action[key] !== undefined) text = text.replaceAll(String(action[key]), key === 'id' ? '<id>' : '0');
    }
  }
  const requestId = res.json?.result?.structuredContent?.error?.requestId as string | undefined;
  if (requestId) text = text.replaceAll(requestId, '<requestId>');
  return { status: res.status, contentType: res.headers.get('content-type'), body: JSON.parse(text) };
}

describe('POST /mcp tools/call of a device tool, answered directly', () => {
  it('answers a completed call exactly as the SDK answers it', async () => {
    const device = simulateDevice(api, lamp, ({ args }) => ({ ok: true, result: { on: args.on } }));
    try {
      const before = await answeredBy();
      const direct = await call({ on: true });
      expect(await answeredBy()).toEqual({ direct: before.direct + 1, sdk: before.sdk });
      const sdk = await call({ on: true }, SDK_ONLY);
      expect(await answeredBy()).toEqual({ direct: before.direct + 1, sdk: before.sdk + 1 });
      expect(direct.status).toBe(200);
      expect(direct.json.result.structuredContent).toMatchObject({ status: 'succeeded', result: { on: true } });
      expect(normalised(direct)).toEqual(normalised(sdk));
    } finally {
      await device.stop();
    }
  });

  it('answers a device failure as the same isError result', async () => {
    const device = simulateDevice(api, lamp, () => ({ ok: false, error: { code: 'jammed', message: 'relay stuck' } }));
    try {
      const direct = await call({ on: false });
      const sdk = await call({ on: false }, SDK_ONLY);
      expect(direct.json.result).toMatchObject({ isError: true, structuredContent: { status: 'failed' } });
      expect(normalised(direct)).toEqual(normalised(sdk));
    } finally {
      await device.stop();
    }
  });

  it('answers invalid arguments with the same tool error and queues nothing', async () => {
    const before = (await api.get('/v1/actions', { token: owner })).body.data.length;
    const direct = await call({ on: 'yes' });
    const sdk = await call({ on: 'yes' }, SDK_ONLY);
    expect(direct.json.result).toMatchObject({ isError: true, structuredContent: { error: { code: 'validation_failed' } } });
    expect(normalised(direct)).toEqual(normalised(sdk));
    expect((await api.get('/v1/actions', { token: owner })).body.data.length).toBe(before);
  });

  it('returns the still-queued Action when the wait bound (dfc/waitSeconds) passes first', async () => {
    const direct = await call({ on: true }, { 'dfc/waitSeconds': 0.1 });
    const sdk = await call({ on: true }, { 'dfc/waitSeconds': 0.1, ...SDK_ONLY });
    expect(direct.json.result.structuredContent.status).toBe('queued');
    expect(normalised(direct)).toEqual(normalised(sdk));
    for (const res of [direct, sdk]) {
      await api.post(`/v1/actions/${res.json.result.structuredContent.id}/cancel`, { token: agent.token });
    }
  });

  it('cancels its action when the client goes away (client_cancelled), so the device never receives it', async () => {
    const abort = new AbortController();
    const pending = fetch(`${server.url}/mcp`, {
      method: 'POST',
      signal: abort.signal,
      headers: {
        authorization: `Bearer ${agent.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': setPower,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: setPower,
          arguments: { on: true },
          _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} },
        },
      }),
    });
    await expect.poll(async () => (await queued()).length).toBe(1);
    const [action] = await queued();
    abort.abort();
    await expect(pending).rejects.toThrow();
    await expect
      .poll(async () => (await api.get(`/v1/actions/${action!.id}`, { token: owner })).body.data)
      .toMatchObject({ status: 'cancelled', cancelReason: 'client_cancelled' });
    const next = await api.post(`/v1/device/${lamp.id}/next`, { token: lamp.token, headers: { 'x-service-workspace': lamp.workspace } });
    expect(next.body.data).toBeNull();
  });
});

describe('POST /mcp tools/call left to the SDK', () => {
  it('streams progress for a call with a progress token', async () => {
    const device = simulateDevice(api, lamp, () => ({ ok: true, result: { on: true } }));
    try {
      const before = await answeredBy();
      const res = await call({ on: true }, { progressToken: 7 });
      expect(await answeredBy()).toEqual({ direct: before.direct, sdk: before.sdk + 1 });
      expect(res.headers.get('content-type')).toContain('text/event-stream');
      expect(res.text).toContain('notifications/progress');
      expect(res.json.result.structuredContent.status).toBe('succeeded');
    } finally {
      await device.stop();
    }
  });

  it('refuses an Mcp-Name that differs from the tool in the body with -32020', async () => {
    const res = await call({ on: true }, {}, { 'mcp-name': 'get_action' });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32020);
  });

  it('answers arguments that are not an object as the SDK does', async () => {
    const res = await call([true]);
    expect(res.json.error ?? res.json.result.isError).toBeTruthy();
    expect(await queued()).toHaveLength(0);
  });
});
