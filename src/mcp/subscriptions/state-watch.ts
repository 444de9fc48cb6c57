import type { CredentialOf, OperationContext } from '../../domain/context.js';
import { onDeviceState } from '../../domain/event-hub.js';
import { devicesReadByAgent, SESSION_RESOURCES_PER_SESSION } from '../../domain/session-resources.js';

/** The most `device://{deviceId}/state` resources one subscription follows; the rest are left out of the acknowledgement. */
export const MAX_STATE_RESOURCES = SESSION_RESOURCES_PER_SESSION;
/** The shortest time between two `notifications/resources/updated` of one device on one stream: a chatty device is told once a second at most. */
export const STATE_NOTIFY_INTERVAL_MS = 1000;

const STATE_URI = /^device:\/\/([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})\/state$/;

/** The device a state resource's URI names, or undefined for any other URI. */
export function stateResourceDevice(uri: string): string | undefined {
  return STATE_URI.exec(uri)?.[1];
}

/** The state resource of a device. */
export const stateResourceUri = (deviceId: string) => `device://${deviceId}/state`;

type Notify = (method: string, params: Record<string, unknown>) => Promise<void>;

/**
 * The state resources a subscription follows: each change of a device's values (this
 * instance's or another's, over the bus) is told as `notifications/resources/updated`, at
 * once, or, within a second of the last one for that device, once that second has passed
 * (one notification for any number of changes; the client reads the resource). A resource
 * whose device the caller no longer reads (its grant revoked or expired) is dropped. A listen
 * stream follows the URIs it was asked for; a 2025-era session's GET stream follows what the
 * session subscribed to, as that changes (`follow`).
 */
export function stateWatcher(
  ctx: OperationContext,
  credential: CredentialOf<'agent'>,
  uris: string[],
  serially: (job: () => Promise<void>) => void,
  notify: Notify,
) {
  const followed = new Map<string, { uri: string; last: number; timer: NodeJS.Timeout | undefined; stop: () => void }>();
  const tell = (deviceId: string) => {
    const entry = followed.get(deviceId);
    if (!entry) return;
    entry.timer = undefined;
    entry.last = Date.now();
    serially(() => (followed.has(deviceId) ? notify('notifications/resources/updated', { uri: entry.uri }) : Promise.resolve()));
  };
  const changed = (deviceId: string) => {
    const entry = followed.get(deviceId);
    if (!entry || entry.timer) return;
    const wait = entry.last + STATE_NOTIFY_INTERVAL_MS - Date.now();
    if (wait <= 0) return tell(deviceId);
    entry.timer = setTimeout(() => tell(deviceId), wait);
    entry.timer.unref();
  };
  const drop = (deviceId: string) => {
    const entry = followed.get(deviceId);
    if (!entry) return;
    clearTimeout(entry.timer);
    entry.stop();
    followed.delete(deviceId);
  };
  /** Follows the state resources asked for whose device the caller reads now; answers their URIs, for the acknowledgement. */
  const adopt = async (asked: readonly string[] = uris): Promise<string[]> => {
    const wanted = new Map<string, string>();
    for (const uri of asked) {
      const deviceId = stateResourceDevice(uri);
      if (deviceId !== undefined && !followed.has(deviceId) && !wanted.has(deviceId)) wanted.set(deviceId, uri);
    }
    // One read for every device asked for (a listen request names at most twice the bound), not one per device.
    const readable =
      wanted.size === 0 || followed.size >= MAX_STATE_RESOURCES ? new Set<string>() : await devicesReadByAgent(ctx, credential, [...wanted.keys()]);
    for (const [deviceId, uri] of wanted) {
      if (followed.size >= MAX_STATE_RESOURCES) break;
      if (!readable.has(deviceId)) continue;
      const stop = onDeviceState(ctx.events, credential.workspaceId, deviceId, () => changed(deviceId));
      followed.set(deviceId, { uri, last: 0, timer: undefined, stop });
    }
    return [...followed.values()].map((entry) => entry.uri);
  };
  return {
    adopt,
    /** Follows exactly these resources (those the caller reads now): new ones are adopted, the others dropped. */
    async follow(wanted: readonly string[]): Promise<void> {
      const keep = new Set(wanted.map(stateResourceDevice));
      for (const deviceId of [...followed.keys()]) if (!keep.has(deviceId)) drop(deviceId);
      await adopt(wanted);
    },
    /** Drops the resources whose device the caller no longer reads; answers their devices. */
    async recheck(): Promise<string[]> {
      if (followed.size === 0) return [];
      const readable = await devicesReadByAgent(ctx, credential, [...followed.keys()]);
      const dropped = [...followed.keys()].filter((deviceId) => !readable.has(deviceId));
      for (const deviceId of dropped) drop(deviceId);
      return dropped;
    },
    /** How many resources it still follows. */
    size: () => followed.size,
    close(): void {
      for (const deviceId of [...followed.keys()]) drop(deviceId);
    },
  };
}
