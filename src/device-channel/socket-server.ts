import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Clock, Logger } from '../domain/context.js';
import { markDeviceSeen, pendingRecalls, redeemEventsTicket } from '../domain/device-wake-socket.js';
import { DomainError } from '../domain/errors.js';
import { MAX_BODY_BYTES } from '../http/body.js';
import { toHttpError } from '../http/errors.js';
import { requestIdFrom, requestLine } from '../http/observe.js';
import { endWithEnvelope } from '../http/raw-answer.js';
import type { Db } from '../store/driver.js';
import type { CancelFrame, DeviceNotifier, WakeFrame } from './notifier.js';

/** Close codes of the wake socket (docs/devices/wire-protocol.md "Wake channel"). */
export const CLOSE_CODES = {
  /** The service is shutting down; reconnect with backoff. */
  goingAway: 1001,
  /** The device was revoked (docs/reference/rules.md "Credentials"): do not reconnect. */
  revoked: 4401,
  /** The device sent a frame other than a pong, or more pongs than a ping interval allows. */
  policyViolation: 1008,
  /** Something failed on the service's side while the socket was being set up. */
  internalError: 1011,
  /** The device opened more sockets than allowed; its oldest socket gives way. */
  replaced: 4409,
} as const;

function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Devices send nothing but pongs; anything bigger than this closes the socket (1009). */
export const MAX_PAYLOAD_BYTES = 1024;
/** Enough for a device and a restarting copy of it; a leaking client cannot pile up sockets. */
export const MAX_SOCKETS_PER_DEVICE = 4;
/**
 * A device answers each ping with one pong; a few unsolicited ones (a client's own heartbeat)
 * are tolerated. More than this many pongs within one ping interval is a flood and closes
 * the socket (1008).
 */
export const MAX_PONGS_PER_INTERVAL = 4;
const CLOSE_GRACE_MS = 1000;
const EVENTS_PATH = /^\/v1\/device\/([^/]+)\/events$/;

export interface DeviceChannelDeps {
  db: Db;
  clock: Clock;
  log: Logger;
  notifier: DeviceNotifier;
  /** Protocol ping interval; a peer that has not answered the previous ping by the next one is dropped. */
  pingMs: number;
  /** Told the queue → frame latency of every wake written (the metrics histogram). */
  onWakeSent?: (latencyMs: number) => void;
}

export interface DeviceChannel {
  /** Open sockets per device id (for tests and metrics). */
  openSockets(deviceId?: string): number;
  /** Closes every socket with 1001 and stops accepting upgrades. */
  close(): Promise<void>;
}

/**
 * What a socket must be told as it opens: signals raised while its upgrade was checked, and
 * the recalls of commands its device still holds (docs/devices/wire-protocol.md "Wake channel"). Cancels are never
 * dropped (a device holds few commands); wakes are capped, one drain serves them all.
 */
interface Early {
  revoked: boolean;
  wakes: WakeFrame[];
  cancels: CancelFrame[];
  recalls: CancelFrame[];
}

interface Peer {
  socket: WebSocket;
  deviceId: string;
  alive: boolean;
  /** Pongs since the last ping tick (the flood budget). */
  pongs: number;
  /** Whether this interval's last-seen write already ran: at most one per ping interval. */
  seenWritten: boolean;
  stopListening: () => void;
}

/** The path and ticket of an upgrade's request target, or undefined when it cannot be read as a URL. */
function readTarget(target: string): { pathname: string; ticket: string | null } | undefined {
  try {
    const url = new URL(target, 'http://localhost');
    return { pathname: url.pathname, ticket: url.searchParams.get('ticket') };
  } catch {
    return undefined;
  }
}

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

const describeError = (error: unknown) => (error instanceof Error ? (error.stack ?? error.message) : String(error));

/**
 * An upgrade is a GET: nothing reads a body sent with it, and bytes after its headers would be
 * taken for WebSocket frames. One declared over 16 KiB is refused as every other request's is
 * (413, docs/reference/rules.md "Errors and limits"); any other body, chunked or not, is 400. Refused
 * before the ticket is looked at, so it is not spent.
 */
function upgradeBodyRefusal(contentLength: string | undefined, transferEncoding: string | undefined): DomainError | undefined {
  if (contentLength !== undefined && Number(contentLength) > MAX_BODY_BYTES) {
    return new DomainError('payload_too_large', `The request body exceeds ${MAX_BODY_BYTES} bytes.`);
  }
  if (transferEncoding !== undefined || (contentLength !== undefined && contentLength !== '0')) {
    return new DomainError('invalid_request', 'A WebSocket upgrade carries no body.');
  }
  return undefined;
}

/** Answers an upgrade request with a plain HTTP error and the service's envelope, then hangs up. */
function refuse(socket: Duplex, error: unknown, requestId: string): { status: number; errorCode: string } {
  const { status, body, headers } = toHttpError(error, requestId);
  endWithEnvelope(socket, status, body, headers);
  return { status, errorCode: body.error.code };
}

/**
 * The wake channel (docs/reference/rules.md "Actions") on the API's own port: `ws` in noServer mode behind the
 * node server's 'upgrade' event. The ticket is checked, and consumed, before the upgrade,
 * so a refused client gets an HTTP 401 with the error envelope, never a socket.
 */
// eslint-disable-next-line max-lines-per-function -- the upgrade path, the peers, the ping sweep and shutdown share mutable state (peers, closing, the request ids of 101s in flight), which one closure keeps private; lifting them out would hand a mutable channel-state object to every part
export function attachDeviceChannel(server: Server, deps: DeviceChannelDeps): DeviceChannel {
  const { db, clock, log, notifier } = deps;
  // autoPong off: a device's own ping is a protocol violation here, not something to answer.
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD_BYTES, clientTracking: false, perMessageDeflate: false, autoPong: false });
  // The 101 answer carries the request id too, like every other answer (docs/reference/rules.md "Envelopes").
  const requestIds = new WeakMap<IncomingMessage, string>();
  // Requests whose 101 is being written: past that point a failure can only cut the connection.
  const switching = new WeakSet<IncomingMessage>();
  wss.on('headers', (headers, request) => {
    switching.add(request);
    headers.push(`X-Request-Id: ${requestIds.get(request) ?? ''}`);
  });
  const peers = new Map<string, Set<Peer>>();
  let closing = false;

  const send = (peer: Peer, frame: WakeFrame | CancelFrame) => {
    if (peer.socket.readyState === peer.socket.OPEN) peer.socket.send(JSON.stringify(frame));
  };

  const violate = (peer: Peer, reason: string) => {
    if (peer.socket.readyState !== peer.socket.OPEN) return;
    log.info({ msg: 'device socket policy violation', deviceId: peer.deviceId, reason });
    peer.socket.close(CLOSE_CODES.policyViolation, reason);
  };

  function admit(socket: WebSocket, deviceId: string, early: Early, stopEarly: () => void) {
    const peer: Peer = { socket, deviceId, alive: true, pongs: 0, seenWritten: false, stopListening: () => undefined };
    peer.stopListening = notifier.listen(deviceId, (signal) => {
      if (signal.type === 'wake') {
        send(peer, signal.frame);
        deps.onWakeSent?.(clock.now() - signal.queuedAt);
      } else if (signal.type === 'cancel') send(peer, signal.frame);
      else socket.close(CLOSE_CODES.revoked, 'device revoked');
    });
    // Listened since before the ticket was checked, so a revocation or wake that landed
    // during the upgrade is not lost.
    stopEarly();
    let set = peers.get(deviceId);
    if (!set) peers.set(deviceId, (set = new Set()));
    set.add(peer);
    if (set.size > MAX_SOCKETS_PER_DEVICE) {
      const oldest = set.values().next().value!;
      oldest.socket.close(CLOSE_CODES.replaced, 'too many sockets for this device');
    }
    socket.on('pong', () => {
      peer.alive = true;
      if (++peer.pongs > MAX_PONGS_PER_INTERVAL) return violate(peer, 'too many pongs');
      // One write per interval however many pongs arrive: a pong costs no database work of its own.
      if (peer.seenWritten) return;
      peer.seenWritten = true;
      markDeviceSeen({ db, clock }, deviceId).catch((error: unknown) =>
        log.error({ msg: 'device last-seen write failed', deviceId, error: describeError(error) }),
      );
    });
    // Devices have nothing to say on this channel (docs/devices/wire-protocol.md "Wake channel"): a data frame or a
    // ping of their own is a client breaking the protocol, not something to serve.
    socket.on('message', () => violate(peer, 'devices send only pongs'));
    socket.on('ping', () => violate(peer, 'devices send only pongs'));
    // Frame errors (1009 too big, bad UTF-8, bad opcode) are answered by ws with a close frame.
    socket.on('error', () => undefined);
    socket.on('close', (code) => {
      peer.stopListening();
      set.delete(peer);
      if (set.size === 0 && peers.get(deviceId) === set) peers.delete(deviceId);
      log.info({ msg: 'device socket closed', deviceId, code });
    });
    if (early.revoked) socket.close(CLOSE_CODES.revoked, 'device revoked');
    else {
      for (const frame of early.wakes) send(peer, frame);
      // Recalls made while no socket was open, then those raised during the upgrade, each once.
      const told = new Set<string>();
      for (const frame of [...early.recalls, ...early.cancels]) {
        if (told.has(frame.actionId)) continue;
        told.add(frame.actionId);
        send(peer, frame);
      }
    }
  }

  async function onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer) {
    const started = performance.now();
    const requestId = requestIdFrom(firstHeader(request.headers['x-request-id']));
    requestIds.set(request, requestId);
    socket.on('error', () => undefined);
    // The ticket is the credential here: the actor is the device it was issued to, once redeemed.
    const finish = (answer: { status: number; errorCode?: string }, device?: string) =>
      log.info(
        requestLine({
          requestId,
          method: 'GET',
          route: '/v1/device/:deviceId/events',
          status: answer.status,
          seconds: (performance.now() - started) / 1000,
          actor: device ? { principalKind: 'device', principalId: device } : { principalKind: null },
          errorCode: answer.errorCode,
        }),
      );
    const body = upgradeBodyRefusal(request.headers['content-length'], request.headers['transfer-encoding']);
    if (body) {
      finish(refuse(socket, body, requestId));
      return;
    }
    const target = readTarget(request.url ?? '/');
    const match = target && EVENTS_PATH.exec(target.pathname);
    const deviceId = match ? decodeSegment(match[1]!) : undefined;
    if (!target || (match && deviceId === undefined)) {
      finish(refuse(socket, new DomainError('invalid_request', 'The request target is not a valid URL path.'), requestId));
      return;
    }
    if (deviceId === undefined || closing) {
      const error = closing
        ? new DomainError('not_configured', 'The service is shutting down.')
        : new DomainError('not_found', `No WebSocket endpoint at ${target.pathname}.`);
      finish(refuse(socket, error, requestId));
      return;
    }
    const early: Early = { revoked: false, wakes: [], cancels: [], recalls: [] };
    const stopEarly = notifier.listen(deviceId, (signal) => {
      if (signal.type === 'revoked') early.revoked = true;
      else if (signal.type === 'cancel') early.cancels.push(signal.frame);
      else if (early.wakes.length < 16) early.wakes.push(signal.frame);
    });
    try {
      await redeemEventsTicket({ db, clock }, deviceId, target.ticket);
      early.recalls = (await pendingRecalls({ db, clock }, deviceId)).map((recall) => ({ type: 'cancel', ...recall }));
      if (closing) throw new DomainError('not_configured', 'The service is shutting down.');
    } catch (error) {
      stopEarly();
      const answer = refuse(socket, error, requestId);
      if (answer.status >= 500) log.error({ msg: 'wake socket upgrade failed', requestId, error: describeError(error) });
      finish(answer);
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => {
      finish({ status: 101 }, deviceId);
      try {
        admit(ws, deviceId, early, stopEarly);
      } catch (error) {
        stopEarly();
        log.error({ msg: 'wake socket setup failed', requestId, deviceId, error: describeError(error) });
        ws.close(CLOSE_CODES.internalError, 'internal error');
      }
    });
  }

  /**
   * The last line of the upgrade path: whatever onUpgrade failed to foresee is logged with the
   * request id and answered with a 500 envelope (or the socket is cut, if bytes already went
   * out), never left to reject and end the process (docs/reference/rules.md "Errors and limits").
   */
  const onUpgradeEvent = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    onUpgrade(request, socket, head).catch((error: unknown) => {
      const requestId = requestIds.get(request) ?? requestIdFrom(undefined);
      log.error({ msg: 'wake socket upgrade failed', requestId, error: describeError(error) });
      if (socket.writable && !switching.has(request)) refuse(socket, error, requestId);
      else socket.destroy();
    });
  };
  server.on('upgrade', onUpgradeEvent);

  // One timer for every socket: a peer that did not answer the last ping is gone.
  const pinger = setInterval(() => {
    for (const set of peers.values()) {
      for (const peer of set) {
        // One peer's failure must not end the sweep for the others, nor the process.
        try {
          if (!peer.alive) {
            peer.socket.terminate();
            continue;
          }
          peer.alive = false;
          peer.pongs = 0;
          peer.seenWritten = false;
          peer.socket.ping();
        } catch (error) {
          log.error({ msg: 'wake socket ping failed', deviceId: peer.deviceId, error: describeError(error) });
        }
      }
    }
  }, deps.pingMs);
  pinger.unref();

  return {
    openSockets(deviceId) {
      if (deviceId !== undefined) return peers.get(deviceId)?.size ?? 0;
      let total = 0;
      for (const set of peers.values()) total += set.size;
      return total;
    },
    async close() {
      closing = true;
      clearInterval(pinger);
      server.off('upgrade', onUpgradeEvent);
      const all = [...peers.values()].flatMap((set) => [...set]);
      await Promise.all(
        all.map(
          (peer) =>
            new Promise<void>((resolve) => {
              if (peer.socket.readyState === peer.socket.CLOSED) return resolve();
              // A peer that does not answer the close handshake is cut off after a grace period.
              const timer = setTimeout(() => peer.socket.terminate(), CLOSE_GRACE_MS);
              peer.socket.once('close', () => {
                clearTimeout(timer);
                resolve();
              });
              peer.socket.close(CLOSE_CODES.goingAway, 'service shutting down');
            }),
        ),
      );
      wss.close();
    },
  };
}
