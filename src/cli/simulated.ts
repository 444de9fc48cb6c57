import { CommandError, type Capability, type Device, type Manifest } from '@dfc/device';

/** The simulated lamp's functions: one read, two control (the same lamp the tests use). */
export const lampCapabilities: Capability[] = [
  { name: 'get_state', kind: 'read', description: 'Power and brightness.', arguments: { type: 'object', properties: {}, additionalProperties: false } },
  {
    name: 'set_power',
    kind: 'control',
    description: 'Switch the lamp on or off.',
    arguments: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'], additionalProperties: false },
  },
  {
    name: 'set_brightness',
    kind: 'control',
    description: 'Brightness in percent.',
    arguments: { type: 'object', properties: { level: { type: 'integer', minimum: 0, maximum: 100 } }, required: ['level'], additionalProperties: false },
  },
];

export interface LampState {
  on: boolean;
  brightness: number;
}

interface HandlerScope {
  handle<A = Record<string, unknown>>(capability: string, handler: (args: A) => unknown): unknown;
}

/** Registers a lamp's handlers on a device or a gateway child; the state lives in memory. */
export function simulateLamp(scope: HandlerScope, state: LampState = { on: false, brightness: 100 }): LampState {
  scope.handle('get_state', () => ({ ...state }));
  scope.handle<{ on: boolean }>('set_power', ({ on }) => {
    state.on = on;
    return { ...state };
  });
  scope.handle<{ level: number }>('set_brightness', ({ level }) => {
    if (!state.on && level > 0) throw new CommandError('lamp_off', 'Switch the lamp on first.');
    state.brightness = level;
    return { ...state };
  });
  return state;
}

export const lampManifest: Manifest = { capabilities: lampCapabilities };

/** A gateway with two child lamps and an integration-wide service (docs/reference/rules.md "Devices"). */
export const gatewayManifest: Manifest = {
  capabilities: [
    {
      name: 'get_status',
      kind: 'read',
      description: 'Gateway uptime and children.',
      arguments: { type: 'object', properties: {}, additionalProperties: false },
    },
  ],
  children: [
    { key: 'lamp-1', name: 'Living room lamp', kind: 'device', capabilities: lampCapabilities },
    { key: 'lamp-2', name: 'Bedroom lamp', kind: 'device', capabilities: lampCapabilities },
    {
      key: 'scenes',
      name: 'Scenes',
      kind: 'service',
      capabilities: [
        { name: 'all_off', kind: 'control', description: 'Switch every lamp off.', arguments: { type: 'object', properties: {}, additionalProperties: false } },
      ],
    },
  ],
};

export function simulateGateway(device: Device): Record<string, LampState> {
  const started = Date.now();
  const lamps = { 'lamp-1': simulateLamp(device.child('lamp-1')), 'lamp-2': simulateLamp(device.child('lamp-2')) };
  device.handle('get_status', () => ({ uptimeMs: Date.now() - started, children: Object.keys(lamps) }));
  device.child('scenes').handle('all_off', () => {
    for (const lamp of Object.values(lamps)) lamp.on = false;
    return { off: Object.keys(lamps) };
  });
  return lamps;
}
