import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachDevice, CommandError, CommandRecalled, Device, type CommandContext, type DeviceEvent, type Manifest } from '@dfc/device';
import { createAgent, createSetupToken } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/**
 * One protocol, two SDKs: the scenarios of test/devices/device-protocol/scenarios.json, run here with
 * the Node SDK against a live service; the Python SDK's pytest suite
 * (packages/device-sdk-python/tests/test_scenarios.py) runs the same table.
 */

interface HandlerSpec {
  returns?: Record<string, unknown>;
  commandError?: { code: string; message: string };
  fails?: string;
  awaitsRecall?: boolean;
}

interface Scenario {
  name: string;
  device: 'lamp' | 'gateway';
  transport: 'socket' | 'poll';
  handler: HandlerSpec | null;
  request: { target: string; capability: string; arguments: Record<string, unknown> } | null;
  owner?: 'revoke-grant-while-running' | 'revoke-device';
  maker?: 'stop-right-after-start';
  expect: { action?: Record<string, unknown>; device?: 'revoked'; events: string[]; noEvents?: string[] };
}

const table = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, 'device-protocol/scenarios.json'), 'utf8')) as {
  manifests: Record<string, Manifest>;
  scenarios: Scenario[];
};

let owner: string;
let agent: { token: string; principal: string };
let proxy: http.Server;
let proxyUrl: string;

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('scenario-owner');
  agent = await createAgent(api, owner, { access: 'act' });
  // A real HTTP proxy that forwards requests but refuses WebSocket upgrades.
  const target = new URL(server.url);
  proxy = http.createServer((req, res) => {
    const upstream = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(upstream);
  });
  proxy.on('upgrade', (_req, socket) => {
    // The device may reset the connection as soon as it reads the refusal (ECONNRESET here):
    // the proxy has nothing more to say on it, and the error must not end the test run.
    socket.on('error', () => socket.destroy());
    socket.end('HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => proxy?.close(resolve));
});

async function until<T>(check: () => T | undefined | Promise<T | undefined>): Promise<T> {
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function fill(template: unknown, args: Record<string, unknown>, childKey: string | null, recallReason: string | null): unknown {
  if (template && typeof template === 'object') {
    return Object.fromEntries(Object.entries(template).map(([k, v]) => [k, fill(v, args, childKey, recallReason)]));
  }
  if (template === '$childKey') return childKey;
  if (template === '$recallReason') return recallReason;
  if (typeof template === 'string' && template.startsWith('$args.')) return args[template.slice('$args.'.length)];
  return template;
}

function handlerFor(spec: HandlerSpec, running: () => void) {
  return async (args: Record<string, unknown>, ctx: CommandContext) => {
    let recallReason: string | null = null;
    if (spec.awaitsRecall) {
      running();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      if (ctx.signal.reason instanceof CommandRecalled) recallReason = ctx.signal.reason.reason;
    }
    if (spec.commandError) throw new CommandError(spec.commandError.code, spec.commandError.message);
    if (spec.fails) throw new Error(spec.fails);
    return fill(spec.returns, args, ctx.childKey, recallReason);
  };
}

/** Whether `expected` appears in `seen` in this order (other events may come between). */
function inOrder(expected: string[], seen: string[]): boolean {
  let at = 0;
  for (const kind of seen) if (kind === expected[at]) at += 1;
  return at === expected.length;
}

describe('The shared device protocol scenarios, with the Node SDK', () => {
  it.each(table.scenarios)('$name', async (scenario) => {
    const url = scenario.transport === 'poll' ? proxyUrl : server.url;
    const setup = await createSetupToken(api, owner);
    const credentials = await attachDevice({
      url,
      setupToken: setup.token,
      name: 'Scenario device',
      kind: scenario.device === 'gateway' ? 'gateway' : 'device',
    });
    const events: DeviceEvent[] = [];
    const device = new Device({
      url,
      credentials,
      manifest: table.manifests[scenario.device]!,
      fallbackPollMs: 50,
      backoff: { initialMs: 20, maxMs: 200 },
      onEvent: (e) => events.push(e),
    });
    const request = scenario.request;
    let running: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (running = resolve));
    if (scenario.handler && request) {
      const handlers = request.target === 'device' ? device : device.child(request.target);
      handlers.handle(request.capability, handlerFor(scenario.handler, running));
    }
    try {
      await device.start();
      if (scenario.maker === 'stop-right-after-start') {
        const stopping = device.stop().then(() => 'stopped');
        expect(await Promise.race([stopping, new Promise((resolve) => setTimeout(() => resolve('still stopping after 5 s'), 5_000))])).toBe('stopped');
      } else if (scenario.transport === 'socket') await until(() => (device.connected ? true : undefined));
      else await until(() => (events.some((e) => e.type === 'disconnected') ? true : undefined));
      if (scenario.maker) {
        // Nothing more to do: the device's own program acted.
      } else if (scenario.owner === 'revoke-device') {
        expect((await api.post(`/v1/devices/${credentials.deviceId}/revoke`, { token: owner })).status).toBe(200);
        await until(() => (events.some((e) => e.type === 'stopped') ? true : undefined));
        expect(device.stopped).toBe(true);
      } else {
        const targetId = request!.target === 'device' ? credentials.deviceId : device.childId(request!.target)!;
        const granted = await api.post('/v1/grants', {
          token: owner,
          body: { principal: agent.principal, deviceId: targetId, capabilities: [request!.capability] },
        });
        expect(granted.status, JSON.stringify(granted.body)).toBe(201);
        const requested = await api.post(`/v1/devices/${targetId}/actions`, {
          token: agent.token,
          body: { capability: request!.capability, arguments: request!.arguments, ttlSeconds: 120 },
        });
        expect(requested.status, JSON.stringify(requested.body)).toBe(201);
        if (scenario.owner === 'revoke-grant-while-running') {
          await started;
          const revoked = await api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: targetId } });
          expect(revoked.status).toBe(200);
        }
        const action = await until(async () => {
          const now = (await api.get(`/v1/actions/${requested.body.data.id}`, { token: agent.token })).body.data;
          return ['queued', 'received'].includes(now.status) ? undefined : now;
        });
        expect(action).toMatchObject(scenario.expect.action!);
      }
      // The service stores a report before the device hears the answer and emits `result`.
      const last = scenario.expect.events.at(-1);
      await until(() => (events.some((e) => e.type === last) ? true : undefined));
      const seen = events.map((e) => e.type);
      expect(inOrder(scenario.expect.events, seen), seen.join(', ')).toBe(true);
      expect(seen.filter((kind) => scenario.expect.noEvents?.includes(kind))).toEqual([]);
    } finally {
      await device.stop();
    }
  });
});
