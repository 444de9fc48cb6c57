import { z } from 'zod';
import type { ActionRow } from '../store/actions.js';
import type { ApprovalMode } from '../store/grants.js';
import type { WebhookRow } from '../store/webhooks.js';
import type { WorkspaceEventRow } from '../store/event-journal.js';
import { action, toActionRecord } from './action-records.js';
import type { EventIds } from './event-ids.js';
import { grantConditions, type GrantConditions } from './grant-conditions.js';
import { approvalMode, timestamp, uuid } from './schemas.js';

/**
 * The owner's event catalogue (docs/reference/events.md "Owner events"): what `GET /v1/events` streams and
 * webhooks deliver. Each event is about one action, grant, device or webhook, and carries its
 * record as it was when the event happened.
 */
export const EVENT_TYPES = {
  'action.created': 'an agent requested an action (`data.action`)',
  'action.updated': 'an action changed status, was recalled or got a late report (`data.action`)',
  'approval.requested': 'an action waits for the owner to approve or reject it (`data.action`)',
  'grant.created': 'a grant was given, or replaced (`data.grant`)',
  'grant.revoked': 'a grant was revoked, or replaced (`data.grant`)',
  'grant.updated': "a grant's approval mode, expiry or conditions were changed in place (`data.grant`, with `data.grant.previous`)",
  'device.online': 'a device called in after being offline (`data.device`)',
  'device.offline': 'a device has not called in for 60 seconds (`data.device`)',
  'device.revoked': 'a device was revoked (`data.device`)',
  'device.renamed': 'the owner renamed a device (`data.device`, with its new name)',
  'device.state_changed':
    "a read function's last-known value changed (`data.deviceId`, `data.capability`, `data.value`, `data.reportedAt`); at most one per device and function per second, carrying the latest value",
  'controls.paused': 'the owner paused device control for the workspace, naming who (`data.controls`)',
  'controls.resumed': 'the owner resumed device control for the workspace, naming who (`data.controls`)',
  'webhook.disabled': 'a webhook was disabled by its owner, or after its endpoint failed for too long, with the reason (`data.webhook`)',
  'webhook.skipped':
    "a webhook was owed an event while the workspace's `webhook_deliveries` storage budget was used up: no delivery is written for it until the budget has room again (`data.webhook`, with `skippedDeliveries` and `skippingSince`); once per such run",
} as const;

export type EventType = keyof typeof EVENT_TYPES;

export const eventType = z.enum(Object.keys(EVENT_TYPES) as [EventType, ...EventType[]]).describe(
  Object.entries(EVENT_TYPES)
    .map(([type, meaning]) => `\`${type}\`: ${meaning}`)
    .join('; ') + '.',
);

export const eventGrant = z.object({
  id: uuid,
  principal: z.string(),
  deviceId: uuid,
  capability: z.string(),
  approval: approvalMode,
  gatewayId: uuid.nullable(),
  expiresAt: timestamp.nullable(),
  revokedAt: timestamp.nullable(),
  createdAt: timestamp,
  conditions: grantConditions,
  previous: z
    .object({ approval: approvalMode, expiresAt: timestamp.nullable(), conditions: grantConditions.optional() })
    .optional()
    .describe('`grant.updated` only: the approval mode, expiry and conditions before the change.'),
});

export const eventDevice = z.object({
  id: uuid,
  name: z.string(),
  kind: z.enum(['device', 'gateway', 'service']),
  parentId: uuid.nullable(),
  revokedAt: timestamp.nullable().optional(),
  lastSeenAt: timestamp.nullable().optional(),
});

/** A webhook as the journal saw it; never its secret. */
export const eventWebhook = z.object({
  id: uuid,
  origin: z
    .string()
    .describe(
      "The endpoint's origin only: its path may carry a credential (a Slack or Discord hook URL), and the event reaches the workspace's other receivers.",
    ),
  description: z.string().nullable(),
  events: z.array(z.string()),
  disabledAt: timestamp.nullable(),
  disabledReason: z.string().nullable(),
  // Optional: events written before these were recorded do not carry them.
  skippedDeliveries: z
    .number()
    .int()
    .optional()
    .describe("Events it was owed but not written a delivery for, the workspace's `webhook_deliveries` budget being used up."),
  skippingSince: timestamp.nullable().optional().describe('Since when its events are being skipped; null when they are not.'),
});

/** The webhook as the journal records it (`webhook.disabled`, `webhook.skipped`): never its secret, and of its URL only the origin. */
export function webhookSnapshot(row: WebhookRow): z.infer<typeof eventWebhook> {
  return {
    id: row.id,
    origin: new URL(row.url).origin,
    description: row.description,
    events: JSON.parse(row.events) as string[],
    disabledAt: row.disabledAt,
    disabledReason: row.disabledReason,
    skippedDeliveries: row.skippedDeliveries,
    skippingSince: row.skippingSince,
  };
}

/** The pause switch as a `controls.*` event saw it. */
export const eventControls = z.object({
  paused: z.boolean(),
  by: z.string().describe('The owner (`sub`) who paused or resumed.'),
  pausedAt: timestamp.describe('When device control was paused (for `resumed`: the pause that ended).'),
});

export const workspaceEvent = z.object({
  id: z
    .string()
    .describe(
      'Opaque and unique per event of the workspace (22 characters); it reveals nothing about other workspaces. Send it back as `Last-Event-ID` to resume after it.',
    ),
  type: eventType,
  createdAt: timestamp,
  data: z.object({
    action: action.optional(),
    grant: eventGrant.optional(),
    device: eventDevice.optional(),
    webhook: eventWebhook.optional(),
    controls: eventControls.optional(),
    deviceId: uuid.optional().describe('`device.state_changed` only: the device.'),
    capability: z.string().optional().describe('`device.state_changed` only: the read function.'),
    value: z.unknown().optional().describe('`device.state_changed` only: its new last-known value.'),
    reportedAt: timestamp.optional().describe('`device.state_changed` only: when the device reported it.'),
  }),
});

export type WorkspaceEvent = z.infer<typeof workspaceEvent>;

interface GrantSnapshot {
  id: string;
  principal: string;
  deviceId: string;
  capability: string;
  approval: ApprovalMode;
  gatewayId: string | null;
  expiresAt: number | null;
  revokedAt: number | null;
  createdAt: number;
  conditions: GrantConditions | null;
  previous?: { approval: ApprovalMode; expiresAt: number | null; conditions?: GrantConditions | null };
}

/** A journal row as the API shows it: its id as the workspace sees it (event-ids.ts), the snapshot rendered to the record it is about. */
export function toWorkspaceEvent(row: WorkspaceEventRow, ids: EventIds): WorkspaceEvent {
  const snapshot = JSON.parse(row.data) as unknown;
  const type = row.type as EventType;
  const base = { id: ids.show(row.workspaceId, row.id), type, createdAt: row.createdAt };
  if (type.startsWith('action.') || type.startsWith('approval.')) return { ...base, data: { action: toActionRecord(snapshot as ActionRow) } };
  // Grants journalled before conditions existed (migration 0033) had none.
  if (type.startsWith('grant.')) return { ...base, data: { grant: { conditions: null, ...(snapshot as Omit<GrantSnapshot, 'conditions'>) } } };
  if (type.startsWith('controls.')) return { ...base, data: { controls: snapshot as z.infer<typeof eventControls> } };
  if (type.startsWith('webhook.')) return { ...base, data: { webhook: snapshot as z.infer<typeof eventWebhook> } };
  if (type === 'device.state_changed') {
    const state = snapshot as { deviceId: string; capability: string; value: unknown; reportedAt: number };
    return { ...base, data: { deviceId: state.deviceId, capability: state.capability, value: state.value, reportedAt: state.reportedAt } };
  }
  return { ...base, data: { device: snapshot as z.infer<typeof eventDevice> } };
}
