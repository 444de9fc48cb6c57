import { expect } from 'vitest';
import type { Client } from './api.js';

/** The lamp used across tests: one read function, two control functions. */
export const lampManifest = {
  capabilities: [
    { name: 'get_state', kind: 'read', description: 'Power and brightness.', arguments: { type: 'object', properties: {}, additionalProperties: false } },
    {
      name: 'set_power',
      kind: 'control',
      arguments: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'], additionalProperties: false },
    },
    {
      name: 'set_brightness',
      kind: 'control',
      arguments: {
        type: 'object',
        properties: { level: { type: 'integer', minimum: 0, maximum: 100 } },
        required: ['level'],
        additionalProperties: false,
      },
    },
  ],
};

export async function createSetupToken(api: Client, owner: string, body: Record<string, unknown> = { name: 'setup' }) {
  const res = await api.post('/v1/device-setup-tokens', { token: owner, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as { id: string; token: string };
}

export interface AttachedDevice {
  id: string;
  token: string;
  workspace: string;
}

export interface AttachOptions {
  name?: string;
  kind?: 'device' | 'gateway';
  /** The manifest to publish (the lamp by default); `null` publishes none. */
  manifest?: Record<string, unknown> | null;
}

/** Attaches a device through a fresh setup token and publishes a manifest for it. */
export async function attachDevice(api: Client, owner: string, options: AttachOptions = {}): Promise<AttachedDevice> {
  const setup = await createSetupToken(api, owner);
  const res = await api.post('/v1/sdk/devices', { token: setup.token, body: { name: options.name ?? 'Lamp', kind: options.kind ?? 'device' } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const attached = { id: res.body.data.device.id, token: res.body.data.token, workspace: res.body.data.workspace };
  if (options.manifest !== null) {
    const published = await api.post(`/v1/device/${attached.id}/manifest`, { token: attached.token, body: options.manifest ?? lampManifest });
    expect(published.status, JSON.stringify(published.body)).toBe(200);
  }
  return attached;
}

export interface AgentOptions {
  name?: string;
  access?: 'read' | 'act';
  principal?: string;
  ttlSeconds?: number | null;
}

/** An agent connection: its token is shown once, at creation. */
export interface Agent {
  id: string;
  token: string;
  principal: string;
  access: 'read' | 'act';
}

export async function createAgent(api: Client, owner: string, body: AgentOptions = {}): Promise<Agent> {
  const res = await api.post('/v1/agent-connections', { token: owner, body: { name: 'agent', access: 'act', ...body } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as Agent;
}
