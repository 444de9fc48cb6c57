import { parseArgs } from 'node:util';
import { attachDevice, Device, type DeviceEvent } from '@dfc/device';
import { gatewayManifest, lampManifest, simulateGateway, simulateLamp } from './simulated.js';

// `npm run device -- --setup-token dfc_setup_… [--name NAME] [--gateway] [--url URL]`:
// attaches a simulated lamp (or a gateway with two child lamps and a scenes service) with
// the device SDK and prints every command it runs. Ctrl-C stops it.
const usage = 'usage: npm run device -- --setup-token TOKEN [--name NAME] [--gateway] [--url http://127.0.0.1:8787]';
let values;
try {
  ({ values } = parseArgs({
    options: {
      'setup-token': { type: 'string' },
      name: { type: 'string' },
      gateway: { type: 'boolean', default: false },
      url: { type: 'string', default: 'http://127.0.0.1:8787' },
    },
  }));
} catch (error) {
  console.error(`${(error as Error).message}\n${usage}`);
  process.exit(2);
}
const setupToken = values['setup-token'];
if (!setupToken) {
  console.error(usage);
  process.exit(2);
}

const url = values.url;
const kind = values.gateway ? 'gateway' : 'device';
const name = values.name ?? (values.gateway ? 'Simulated gateway' : 'Simulated lamp');
const say = (line: string) => console.log(`${new Date().toISOString().slice(11, 23)}  ${line}`);

function describe(event: DeviceEvent): string | undefined {
  switch (event.type) {
    case 'manifest':
      return `manifest published${event.children.length ? `; children: ${event.children.map((c) => `${c.key}=${c.deviceId}`).join(', ')}` : ''}`;
    case 'connected':
      return 'wake socket open';
    case 'disconnected':
      return `wake socket closed (${event.code}${event.reason ? ` ${event.reason}` : ''}); polling, reconnect in ${event.retryInMs} ms`;
    case 'wake':
      return `wake for action ${event.actionId}`;
    case 'command':
      return `run ${event.childKey ? `${event.childKey}.` : ''}${event.command.capability} ${JSON.stringify(event.command.args)}`;
    case 'result':
      return `  → ${event.report.ok ? `ok ${JSON.stringify(event.report.result ?? null)}` : `failed ${event.report.error.code}: ${event.report.error.message}`}`;
    case 'report-retry':
      return `  result not delivered (${event.error}); retry in ${event.retryInMs} ms`;
    case 'report-dropped':
      return `  result given up: ${event.error}`;
    case 'poll-error':
      return `poll failed: ${event.error}`;
    case 'revoked':
      return 'device revoked by its owner; stopping';
    case 'stopped':
      return 'stopped';
  }
}

try {
  const credentials = await attachDevice({ url, setupToken, name, kind });
  say(`attached ${kind} "${name}" as ${credentials.deviceId} at ${url}`);
  const device = new Device({
    url,
    credentials,
    manifest: values.gateway ? gatewayManifest : lampManifest,
    onEvent: (event) => {
      const line = describe(event);
      if (line) say(line);
      if (event.type === 'revoked') process.exitCode = 1;
    },
  });
  if (values.gateway) simulateGateway(device);
  else simulateLamp(device);
  await device.start();
  say(
    `running ${values.gateway ? 'get_status; lamp-1, lamp-2: get_state, set_power, set_brightness; scenes: all_off' : 'get_state, set_power, set_brightness'}. Ctrl-C to stop.`,
  );
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void device.stop());
} catch (error) {
  console.error(`could not start the device: ${(error as Error).message}`);
  process.exit(1);
}
