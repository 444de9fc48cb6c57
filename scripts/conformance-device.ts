/**
 * The conformance run's fixture device (scripts/conformance.ts): a real device, built with the
 * device SDK and connected to the service over its wake WebSocket, whose functions behave as
 * the MCP conformance suite's tasks scenarios (and its tool-list notification check) expect
 * of the reference server's fixture tools.
 * The service treats them as any device's functions; only their names differ from the
 * suite's (`greet__<12 hex>` for `greet`), which the run's proxy maps both ways.
 */
import { attachDevice, CommandError, CommandRecalled, Device, deviceApi, type Capability, type Manifest } from '@dfc/device';
import { deviceToolName } from '../src/mcp/device-tool-names.js';

const noArguments = { type: 'object', properties: {}, additionalProperties: false } as const;

/** The suite's fixture tools this service has a real counterpart of, by the suite's names. */
export const FIXTURE_FUNCTIONS = [
  {
    name: 'greet',
    kind: 'read',
    description: 'Says hello to someone at once.',
    arguments: { type: 'object', properties: { name: { type: 'string', maxLength: 100 } }, required: ['name'], additionalProperties: false },
  },
  {
    name: 'slow_compute',
    kind: 'control',
    description: 'Computes for `seconds` seconds, then answers; stops when recalled.',
    arguments: {
      type: 'object',
      properties: { seconds: { type: 'number', minimum: 0, maximum: 60 }, label: { type: 'string', maxLength: 100 } },
      required: ['seconds'],
      additionalProperties: false,
    },
  },
  { name: 'failing_job', kind: 'control', description: 'Works for 1.5 seconds, then reports a device error.', arguments: noArguments },
  {
    name: 'confirm_delete',
    kind: 'control',
    description: 'Deletes a file; each call needs the user’s confirmation.',
    arguments: { type: 'object', properties: { filename: { type: 'string', maxLength: 200 } }, required: ['filename'], additionalProperties: false },
  },
  {
    name: 'test_trigger_tool_change',
    kind: 'control',
    description: 'Republishes this device’s functions with tool_change_marker removed or restored, so the agent’s tool list changes.',
    arguments: noArguments,
  },
] as const satisfies readonly Capability[];

/** Published at the start, then removed and restored by turns by `test_trigger_tool_change`. */
const MARKER = {
  name: 'tool_change_marker',
  kind: 'read',
  description: 'There or not by turns: test_trigger_tool_change removes and restores it.',
  arguments: noArguments,
} as const satisfies Capability;

/** Every function the agent is granted: the fixtures and the marker. */
export const GRANTED = [...FIXTURE_FUNCTIONS, MARKER].map((fn) => fn.name as string);

const manifest = (withMarker: boolean): Manifest => ({ capabilities: withMarker ? [...FIXTURE_FUNCTIONS, MARKER] : [...FIXTURE_FUNCTIONS] });

/** The fixtures granted in `user` mode: the agent's client asks its user before each call. */
export const USER_CONFIRMED = ['confirm_delete'];

/**
 * Longer than the service's 1 s task wait (src/mcp/action-wait.ts TASK_WAIT_MS), so a call of
 * a client that declares MCP Tasks answers a task, as the suite expects of this fixture.
 */
const FAILING_JOB_MS = 1_500;

/** Resolves after `ms`, or rejects when `signal` aborts (a recall, the deadline, the device stopping). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** What a handler reports when its command stopped early: a recall (the agent cancelled its task) or the deadline. */
function stopped(reason: unknown): CommandError {
  return reason instanceof CommandRecalled
    ? new CommandError('recalled', `Stopped before finishing: ${reason.message}`)
    : new CommandError('stopped', 'Stopped before finishing: the deadline passed or the device is stopping.');
}

export interface FixtureDevice {
  device: Device;
  deviceId: string;
  /** Fixture name → the device tool's name as the service lists it, and back. */
  toolNames: Map<string, string>;
  fixtureNames: Map<string, string>;
}

/** Attaches the fixture device with a setup token and keeps it connected until `device.stop()`. */
export async function startFixtureDevice(url: string, setupToken: string): Promise<FixtureDevice> {
  const credentials = await attachDevice({ url, setupToken, name: 'Conformance fixtures', kind: 'device' });
  let connected!: () => void;
  const socketOpen = new Promise<void>((resolve) => (connected = resolve));
  const device = new Device({
    url,
    credentials,
    manifest: manifest(true),
    onEvent: (event) => event.type === 'connected' && connected(),
  });
  device.handle<{ name: string }>('greet', ({ name }) => ({ greeting: `Hello, ${name}!` }));
  device.handle<{ seconds: number; label?: string }>('slow_compute', async ({ seconds, label }, ctx) => {
    await sleep(seconds * 1000, ctx.signal).catch((reason: unknown) => {
      throw stopped(reason);
    });
    return { label: label ?? null, seconds };
  });
  device.handle('failing_job', async (_args, ctx) => {
    await sleep(FAILING_JOB_MS, ctx.signal).catch((reason: unknown) => {
      throw stopped(reason);
    });
    throw new CommandError('job_failed', 'The job failed, as this fixture always does.');
  });
  device.handle<{ filename: string }>('confirm_delete', ({ filename }) => ({ deleted: filename }));
  // The service tells listening agents of a tool list change when the names they may call change.
  let withMarker = true;
  const api = deviceApi(url, credentials);
  device.handle('test_trigger_tool_change', async () => {
    withMarker = !withMarker;
    await api.publishManifest(manifest(withMarker));
    return { toolChangeMarker: withMarker ? 'restored' : 'removed' };
  });
  await device.start();
  // Woken over its socket from the first call on, as a deployed device is: no poll delay in any check.
  await socketOpen;
  const toolNames = new Map(FIXTURE_FUNCTIONS.map((fn) => [fn.name as string, deviceToolName(fn.name, credentials.deviceId)]));
  const fixtureNames = new Map([...toolNames].map(([fixture, tool]) => [tool, fixture]));
  return { device, deviceId: credentials.deviceId, toolNames, fixtureNames };
}
