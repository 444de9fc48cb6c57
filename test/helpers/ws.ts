import { WebSocket } from 'ws';
import type { Client } from './api.js';
import type { AttachedDevice } from './fixtures.js';

export interface OpenSocket {
  ws: WebSocket;
  /** Every text frame received so far, parsed. */
  frames: unknown[];
  /** The next frame not yet taken by an earlier call (waits for it). */
  nextFrame(): Promise<unknown>;
  /** Resolves when the socket closes, with the code and reason the client saw. */
  closed: Promise<{ code: number; reason: string }>;
}

export type Upgrade = { ok: true; socket: OpenSocket } | { ok: false; status: number; body: any };

export function wsUrl(base: string, deviceId: string, ticket?: string): string {
  const url = new URL(`/v1/device/${deviceId}/events`, base.replace(/^http/, 'ws'));
  if (ticket !== undefined) url.searchParams.set('ticket', ticket);
  return url.toString();
}

/** Opens a wake socket with a real `ws` client; a refused upgrade resolves with the HTTP answer. */
export function openSocket(url: string, options: { autoPong?: boolean } = {}): Promise<Upgrade> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { autoPong: options.autoPong ?? true });
    const frames: unknown[] = [];
    const waiters: ((frame: unknown) => void)[] = [];
    let taken = 0;
    ws.on('message', (data) => {
      frames.push(JSON.parse(String(data)));
      const waiter = waiters.shift();
      if (waiter) waiter(frames[taken++]);
    });
    const closed = new Promise<{ code: number; reason: string }>((done) => ws.on('close', (code, reason) => done({ code, reason: String(reason) })));
    ws.on('open', () =>
      resolve({
        ok: true,
        socket: {
          ws,
          frames,
          closed,
          nextFrame: () => (taken < frames.length ? Promise.resolve(frames[taken++]) : new Promise((r) => waiters.push(r))),
        },
      }),
    );
    ws.on('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += String(chunk)));
      response.on('end', () => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // leave the text for the assertion to show
        }
        resolve({ ok: false, status: response.statusCode ?? 0, body });
      });
    });
    ws.on('error', (error) => {
      if (ws.readyState !== ws.OPEN) reject(error);
    });
  });
}

export async function issueTicket(api: Client, device: AttachedDevice): Promise<string> {
  const res = await api.post(`/v1/device/${device.id}/events-ticket`, { token: device.token });
  if (res.status !== 201) throw new Error(`events-ticket answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.data.ticket as string;
}

/** Issues a ticket and opens the device's wake socket with it. */
export async function connectDevice(api: Client, base: string, device: AttachedDevice, options: { autoPong?: boolean } = {}): Promise<OpenSocket> {
  const upgrade = await openSocket(wsUrl(base, device.id, await issueTicket(api, device)), options);
  if (!upgrade.ok) throw new Error(`upgrade refused ${upgrade.status}: ${JSON.stringify(upgrade.body)}`);
  return upgrade.socket;
}
