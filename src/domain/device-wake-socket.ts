import { z } from 'zod';
import { hashToken, issueToken, tokenKinds } from './tokens.js';
import { consumeEventTicket, issueEventTicket } from '../store/event-tickets.js';
import { recalledFor } from '../store/action-hand-out.js';
import { getAction } from '../store/actions.js';
import { getDevice, touchDevice } from '../store/devices.js';
import type { Db } from '../store/driver.js';
import { toActionRecord, type ActionRecord } from './action-records.js';
import type { Clock } from './context.js';
import { noteDeviceSeen } from './devices.js';
import { DomainError } from './errors.js';
import { defineOperation } from './operation.js';
import { timestamp, uuid } from './schemas.js';

/** A ticket opens one wake socket within 30 s of issue (docs/reference/rules.md "Actions"). */
export const EVENT_TICKET_TTL_MS = 30_000;

export const eventsTicket = z.object({
  ticket: z.string().describe('Opaque one-use ticket for `GET /v1/device/{deviceId}/events?ticket=…`. Secret until used: do not log it.'),
  expiresAt: timestamp.describe('The ticket must be presented before this time (30 s after issue).'),
});

export const issueEventsTicket = defineOperation({
  name: 'device.eventsTicket',
  title: 'Issue a wake-channel ticket',
  description:
    "Issue a one-use ticket for this device's wake WebSocket. Valid 30 s, for this device only; the WebSocket upgrade consumes it. A ticket rather than the device credential goes in the URL because URLs end up in logs.",
  credentials: ['device'],
  access: 'none',
  hints: { readOnly: false, destructive: false },
  ownDevice: 'deviceId',
  // GET /v1/device/{deviceId}/events, the wake WebSocket the ticket opens, is served by src/device-channel.
  rest: [{ method: 'POST', path: '/v1/device/{deviceId}/events-ticket', status: 201 }],
  input: z.strictObject({ deviceId: uuid }),
  output: eventsTicket,
  async run({ ctx, credential }) {
    const now = ctx.clock.now();
    const issued = issueToken('ticket');
    const expiresAt = now + EVENT_TICKET_TTL_MS;
    await issueEventTicket(ctx.db, { ticketHash: issued.hash, workspaceId: credential.workspaceId, deviceId: credential.deviceId, expiresAt, createdAt: now });
    await noteDeviceSeen(ctx, credential);
    return { ticket: issued.token, expiresAt };
  },
});

/** A recalled command a device still holds: the wake channel's cancel frame (docs/devices/wire-protocol.md "Wake channel"). */
export interface Recall {
  deviceId: string;
  actionId: string;
  reason: string;
}

/**
 * The recalls a device's new wake socket is told at once: a device that was offline, or
 * reconnected, when a recall was sent still learns it (docs/devices/wire-protocol.md "Wake channel").
 */
export async function pendingRecalls(deps: { db: Db; clock: Clock }, deviceId: string): Promise<Recall[]> {
  const rows = await recalledFor(deps.db, deviceId, deps.clock.now());
  return rows.map((row) => ({ deviceId: row.deviceId, actionId: row.id, reason: row.cancelReason ?? '' }));
}

/** The device a redeemed ticket opened the socket for. */
export interface SocketGrant {
  workspaceId: string;
  deviceId: string;
}

const refused = (message: string) => new DomainError('unauthorized', message);

/**
 * Trades a ticket for the right to open `deviceId`'s wake socket, exactly once. Missing,
 * unknown, used, expired, issued to another device, or for a revoked device: `unauthorized`,
 * with one message for all but the missing case, so a caller learns nothing about tickets
 * it does not hold.
 */
export async function redeemEventsTicket(deps: { db: Db; clock: Clock }, deviceId: string, ticket: string | null): Promise<SocketGrant> {
  if (ticket === null || ticket === '') throw refused('A ticket query parameter is required: POST /v1/device/{deviceId}/events-ticket issues one.');
  if (!uuid.safeParse(deviceId).success || !ticket.startsWith(tokenKinds.ticket) || ticket.length > 128) {
    throw refused('The ticket is unknown, used, expired or not for this device.');
  }
  const grant = await consumeEventTicket(deps.db, hashToken(ticket), deviceId, deps.clock.now());
  if (!grant) throw refused('The ticket is unknown, used, expired or not for this device.');
  return grant;
}

/** A pong on the wake socket counts as calling in, so a woken device stays `online` without polling. */
export function markDeviceSeen(deps: { db: Db; clock: Clock }, deviceId: string): Promise<void> {
  return touchDevice(deps.db, deviceId, deps.clock.now());
}

/**
 * An action another instance says changed, as stored, if `targetId` is the device that fetches
 * it; undefined otherwise. The shared bus only names what changed, and anyone able to publish
 * there could name anything (docs/operators/scale-out-security.md): the wake channel decides from this.
 */
export async function storedActionFor(db: Db, workspaceId: string, actionId: string, targetId: string): Promise<ActionRecord | undefined> {
  const row = await getAction(db, workspaceId, actionId);
  return row && row.targetId === targetId ? toActionRecord(row) : undefined;
}

/** Whether the device's credential is revoked in the database, whatever a message said (docs/operators/scale-out-security.md). */
export async function isDeviceRevoked(db: Db, workspaceId: string, deviceId: string): Promise<boolean> {
  const device = await getDevice(db, workspaceId, deviceId);
  return device !== undefined && device.revokedAt !== null;
}
