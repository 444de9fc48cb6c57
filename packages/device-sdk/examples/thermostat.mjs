// A hall thermostat built with @dfc/device: a gateway with its own two functions and one
// child, a radio sensor in the bedroom. Run it beside the service:
//
//   DFC_URL=http://127.0.0.1:8787 DFC_SETUP_TOKEN=dfc_setup_… node thermostat.mjs
//
// The first start attaches with the setup token and stores the device's credential in
// thermostat-credentials.json (or DFC_CREDENTIALS); later starts reuse it. Ctrl-C stops it.
import { readFile, writeFile } from 'node:fs/promises';
import { attachDevice, CommandError, Device } from '@dfc/device';

const url = process.env.DFC_URL ?? 'http://127.0.0.1:8787';
const credentialsFile = process.env.DFC_CREDENTIALS ?? 'thermostat-credentials.json';

/** The stored credential, or a new one: a setup token attaches once and is then spent. */
async function loadCredentials() {
  try {
    return JSON.parse(await readFile(credentialsFile, 'utf8'));
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
  const setupToken = process.env.DFC_SETUP_TOKEN;
  if (!setupToken) throw new Error(`No ${credentialsFile} yet: set DFC_SETUP_TOKEN for the first start.`);
  const { deviceId, token, workspace } = await attachDevice({ url, setupToken, name: 'Hall thermostat', kind: 'gateway' });
  // The token is shown once and is this device's only credential: keep it, readable by its owner only.
  await writeFile(credentialsFile, JSON.stringify({ deviceId, token, workspace }), { mode: 0o600 });
  return { deviceId, token, workspace };
}

// What the service shows agents and checks every request against: names, kinds and a JSON
// Schema per function. Arguments outside the schema are refused before the device hears of them.
const readTemperature = {
  name: 'read_temperature',
  kind: 'read',
  description: 'The measured temperature in °C.',
  arguments: { type: 'object', properties: {}, additionalProperties: false },
};
const manifest = {
  capabilities: [
    readTemperature,
    {
      name: 'set_target',
      kind: 'control',
      description: 'Heat to a target temperature in °C, in half degrees.',
      arguments: {
        type: 'object',
        properties: { celsius: { type: 'number', minimum: 5, maximum: 30, multipleOf: 0.5 } },
        required: ['celsius'],
        additionalProperties: false,
      },
    },
  ],
  // A gateway child: its own device id and grants; the key keeps that id across restarts.
  children: [{ key: 'bedroom', name: 'Bedroom sensor', kind: 'device', capabilities: [readTemperature] }],
};

// The hardware, simulated. This model's heater reaches 26 °C, below what the schema allows.
const HEATER_LIMIT = 26;
const hall = { celsius: 20.5, target: 20 };
const bedroom = { celsius: 18.5 };

const thermostat = new Device({
  url,
  credentials: await loadCredentials(),
  manifest,
  onEvent: (event) => {
    console.log(JSON.stringify(event)); // events never carry the token
    if (event.type === 'revoked') process.exitCode = 1; // the owner detached it: the credential is dead
  },
});

// A handler's return value is reported as `succeeded` with that result; a CommandError as
// `failed` with its code and message (any other throw: code `handler_error`).
thermostat.handle('read_temperature', () => ({ celsius: hall.celsius, target: hall.target }));
thermostat.handle('set_target', ({ celsius }) => {
  if (celsius > HEATER_LIMIT) throw new CommandError('above_heater_limit', `This heater reaches ${HEATER_LIMIT} °C at most.`);
  hall.target = celsius;
  return { target: hall.target, celsius: hall.celsius };
});
thermostat.child('bedroom').handle('read_temperature', () => ({ celsius: bedroom.celsius }));

for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => void thermostat.stop());
await thermostat.start(); // publishes the manifest, then keeps the wake socket open until stop()
