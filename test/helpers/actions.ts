import { expect } from 'vitest';
import type { ApiResponse, Client } from './api.js';
import type { AttachedDevice } from './fixtures.js';

/**
 * Helpers for grant and action tests: a gateway manifest with a child device and an
 * integration-wide service, and one-line wrappers for grant → request → next → result.
 */

const noArgs = { type: 'object', properties: {}, additionalProperties: false };

/** A hub: one read and one control function of its own, a bulb child and a cloud service. */
export const hubManifest = {
  capabilities: [
    { name: 'hub_status', kind: 'read', arguments: noArgs },
    { name: 'hub_reboot', kind: 'control', arguments: noArgs },
  ],
  children: [
    {
      key: 'bulb',
      name: 'Bulb',
      kind: 'device',
      capabilities: [
        { name: 'get_state', kind: 'read', arguments: noArgs },
        {
          name: 'set_power',
          kind: 'control',
          arguments: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'], additionalProperties: false },
        },
      ],
    },
    {
      key: 'cloud',
      name: 'Cloud',
      kind: 'service',
      capabilities: [
        { name: 'cloud_info', kind: 'read', arguments: noArgs },
        { name: 'cloud_sync', kind: 'control', arguments: noArgs },
      ],
    },
  ],
};

export async function grant(
  api: Client,
  owner: string,
  principal: string,
  deviceId: string,
  capabilities: string[],
  ttlSeconds?: number | null,
  approval?: 'none' | 'owner' | 'user',
) {
  const res = await api.post('/v1/grants', {
    token: owner,
    body: { principal, deviceId, capabilities, ...(ttlSeconds !== undefined ? { ttlSeconds } : {}), ...(approval ? { approval } : {}) },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as { id: string; capability: string; approval: string }[];
}

export function requestAction(api: Client, agentToken: string, deviceId: string, body: Record<string, unknown>): Promise<ApiResponse> {
  return api.post(`/v1/devices/${deviceId}/actions`, { token: agentToken, body });
}

/** Requests an action that must be accepted; returns the Action. */
export async function queue(api: Client, agentToken: string, deviceId: string, body: Record<string, unknown>) {
  const res = await requestAction(api, agentToken, deviceId, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as { id: string; status: string; deviceId: string; expiresAt: number; createdAt: number };
}

export function next(api: Client, device: AttachedDevice, workspace = device.workspace): Promise<ApiResponse> {
  return api.post(`/v1/device/${device.id}/next`, { token: device.token, headers: { 'x-service-workspace': workspace } });
}

export function report(api: Client, device: AttachedDevice, body: Record<string, unknown>): Promise<ApiResponse> {
  return api.post(`/v1/device/${device.id}/result`, { token: device.token, body });
}

/** The ids of the owner's devices that are children of `gatewayId`, by name. */
export async function childrenOf(api: Client, owner: string, gatewayId: string): Promise<Record<string, string>> {
  const res = await api.get('/v1/devices', { token: owner });
  expect(res.status).toBe(200);
  const out: Record<string, string> = {};
  for (const d of res.body.data as { id: string; name: string; parentId: string | null }[]) if (d.parentId === gatewayId) out[d.name] = d.id;
  return out;
}
