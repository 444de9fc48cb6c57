/**
 * The device SDK (the package `@dfc/device`): attach with a setup token, publish a
 * manifest, stay reachable over the wake WebSocket, run handlers, report results.
 *
 *   const creds = await attachDevice({ url, setupToken, name: 'Desk lamp' });
 *   const lamp = new Device({ url, credentials: creds, manifest });
 *   lamp.handle('set_power', async ({ on }) => ({ on }));
 *   await lamp.start();
 *
 * docs/devices/wire-protocol.md "Wake channel" describes the protocol underneath.
 */
export { backoffDelay, CommandError, CommandRecalled, Device } from './device.js';
export type { ChildHandlers, CommandContext, DeviceEvent, DeviceOptions, Handler } from './device.js';
export { ApiError, attachDevice, deviceApi, InvalidAnswerError, splitSetupToken } from './http.js';
export { attachOrLoad, loadCredentials, saveCredentials } from './credentials.js';
export type {
  Capability,
  ChildManifest,
  DeviceApi,
  DeviceCommand,
  DeviceCredentials,
  DeviceRecord,
  Manifest,
  RequestLimits,
  ResultReport,
  UrlSource,
} from './http.js';
