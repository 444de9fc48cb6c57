import type { z } from 'zod';
import { account } from '../domain/account.js';
import { action } from '../domain/action-records.js';
import { deviceNext } from '../domain/device-commands.js';
import { eventsTicket } from '../domain/device-wake-socket.js';
import { callableFunction } from '../domain/functions.js';
import { grantConditions } from '../domain/grant-conditions.js';
import { grant } from '../domain/grants.js';
import { healthObject } from '../domain/health.js';
import { attachedDevice, capability, connection, device, newConnection, oauthInfo } from '../domain/schemas.js';
import { newWebhook, webhook, webhookDelivery } from '../domain/webhooks.js';

/**
 * The named models of the OpenAPI document: each shared shape of the contract once, under
 * `components.schemas`, with an example, so the reference lists them and a generated client
 * names its types. Named here rather than with zod `.meta({ id })` on the domain schemas:
 * an id in zod's global registry would also pull `$defs` into the MCP tool schemas built
 * from the same shapes. Order matters: a model comes after the models it contains, so its
 * own schema already refers to them (src/rest/openapi.ts `namedSchemas`).
 */
export interface NamedSchema {
  name: string;
  schema: z.ZodType;
  example: unknown;
}

const DEVICE_ID = '7d3f6a52-3c1e-4c0f-9a57-2b8d0f4e6a11';
const AGENT = 'agent:support-bot';
const T = 1_767_225_600_000; // 2026-01-01T00:00:00Z in Unix milliseconds

const capabilityExample = {
  name: 'thermostat.set_target',
  kind: 'control',
  description: 'Set the target temperature in °C.',
  arguments: { type: 'object', required: ['celsius'], properties: { celsius: { type: 'number', minimum: 5, maximum: 30 } }, additionalProperties: false },
};
const conditionsExample = {
  arguments: { celsius: { minimum: 18, maximum: 23 } },
  schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['mon', 'tue', 'wed', 'thu', 'fri'], from: '07:00', to: '22:00' }] },
  budget: { max: 10, perSeconds: 3600 },
};
const deviceExample = {
  id: DEVICE_ID,
  name: 'Hall thermostat',
  kind: 'device',
  parentId: null,
  key: null,
  online: true,
  lastSeenAt: T + 60_000,
  revoked: false,
  createdAt: T,
  capabilities: [capabilityExample],
};
const connectionExample = {
  id: '0b9c2f0e-5d4a-4e8b-8f3c-6a1d2e3f4a5b',
  principal: AGENT,
  name: 'Support bot',
  expiresAt: null,
  revoked: false,
  access: 'act',
  purpose: 'agent',
  canAttach: false,
  deviceLimit: 0,
  tokenPrefix: 'dfc_agent_3kQ9',
  createdAt: T,
};

const webhookExample = {
  id: '2b4d6f80-1a3c-4e5f-8a9b-0c1d2e3f4a5b',
  url: 'https://hooks.example.com/dfc',
  format: 'generic',
  chatId: null,
  description: 'my phone',
  events: ['approval.requested'],
  revoked: false,
  revokedAt: null,
  previousSecretValidUntil: null,
  disabled: false,
  disabledAt: null,
  disabledReason: null,
  consecutiveFailures: 0,
  failingSince: null,
  backedOffUntil: null,
  skippedDeliveries: 0,
  skippingSince: null,
  createdAt: T,
};

export const namedSchemas: NamedSchema[] = [
  { name: 'Capability', schema: capability, example: capabilityExample },
  { name: 'Device', schema: device, example: deviceExample },
  {
    name: 'AttachedDevice',
    schema: attachedDevice,
    example: { device: deviceExample, token: 'dfc_device_…', workspace: 'a'.repeat(64) },
  },
  {
    name: 'OAuthApplication',
    schema: oauthInfo,
    example: { applicationId: 'c1f0…', clientId: 'https://agent.example/client.json', redirectUris: ['https://agent.example/callback'], public: true },
  },
  { name: 'Connection', schema: connection, example: connectionExample },
  { name: 'NewConnection', schema: newConnection, example: { ...connectionExample, token: 'dfc_agent_…' } },
  { name: 'GrantConditions', schema: grantConditions.unwrap(), example: conditionsExample },
  {
    name: 'Grant',
    schema: grant,
    example: {
      id: '5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b',
      principal: AGENT,
      deviceId: DEVICE_ID,
      capability: 'thermostat.set_target',
      expiresAt: null,
      expired: false,
      gatewayId: null,
      createdAt: T,
      approval: 'owner',
      functionKind: 'control',
      schemaFingerprint: 'b7e23ec29af22b0b4e41da31e868d57226121c84bd6ebd3d0c7a8d6c1b1f0f5a',
      stale: null,
      conditions: conditionsExample,
    },
  },
  { name: 'Webhook', schema: webhook, example: webhookExample },
  { name: 'NewWebhook', schema: newWebhook, example: { ...webhookExample, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw5fJzc1pyxXE=' } },
  {
    name: 'WebhookDelivery',
    schema: webhookDelivery,
    example: {
      id: '3c1d2e4f-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
      eventId: 'q3Zr0mX1bJ8sKc2T9yVw4A',
      eventType: 'approval.requested',
      status: 'pending',
      attempts: 2,
      lastAttemptAt: T + 35_000,
      lastStatusCode: 503,
      lastError: 'HTTP 503',
      nextAttemptAt: T + 155_000,
      createdAt: T,
      finishedAt: null,
    },
  },
  {
    name: 'Function',
    schema: callableFunction,
    example: {
      deviceId: DEVICE_ID,
      deviceName: 'Hall thermostat',
      deviceKind: 'device',
      parentId: null,
      parentName: null,
      capability: capabilityExample.name,
      kind: capabilityExample.kind,
      description: capabilityExample.description,
      arguments: capabilityExample.arguments,
      approval: 'none',
      conditions: conditionsExample,
    },
  },
  {
    name: 'Action',
    schema: action,
    example: {
      id: '9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d',
      deviceId: DEVICE_ID,
      capability: 'thermostat.set_target',
      arguments: { celsius: 21 },
      status: 'succeeded',
      principal: AGENT,
      createdAt: T,
      // Approved 40 s after the request: the 30 s deadline started then.
      expiresAt: T + 70_000,
      notBefore: null,
      dispatchedAt: T + 40_120,
      completedAt: T + 40_480,
      result: { celsius: 21 },
      error: null,
      broadcastId: null,
      cancelReason: null,
      cancelRequestedAt: null,
      reportedLateAt: null,
      expiredReason: null,
      approval: {
        mode: 'owner',
        expiresAt: T + 300_000,
        decision: 'approved',
        decidedBy: 'owner@example.com',
        decidedAt: T + 40_000,
        reason: 'Expected: guests arriving.',
        confirmedBy: 'owner',
      },
    },
  },
  {
    name: 'DeviceNext',
    schema: deviceNext,
    example: {
      id: '9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d',
      deviceId: DEVICE_ID,
      capability: 'thermostat.set_target',
      args: { celsius: 21 },
      status: 'dispatched',
      createdAt: T,
      expiresAt: T + 30_000,
      dispatchedAt: T + 120,
    },
  },
  { name: 'EventsTicket', schema: eventsTicket, example: { ticket: 'dfc_ticket_…', expiresAt: T + 30_000 } },
  {
    name: 'Account',
    schema: account,
    example: {
      workspaceId: '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d',
      workspaceKey: 'owner@example.com',
      routingId: 'a'.repeat(64),
      subject: 'owner@example.com',
      createdAt: T,
      usage: { devices: 1, agentConnections: 1, setupTokens: 0 },
    },
  },
  { name: 'Health', schema: healthObject, example: { service: 'dfc', protocolVersion: 1, authConfigured: true, deviceControlsEnabled: true } },
];
