import { randomBytes } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { attachDevice, type DeviceCredentials, type RequestLimits, type UrlSource } from './http.js';

/** The credential stored at `file`, or undefined when there is no file yet. */
export async function loadCredentials(file: string): Promise<DeviceCredentials | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const data = JSON.parse(text) as Record<string, unknown>;
  return { deviceId: String(data.deviceId), token: String(data.token), workspace: String(data.workspace) };
}

/**
 * Writes the credential file readable by its owner only (0600), atomically: a new file under an
 * unpredictable name, created exclusively, then renamed over `file`, so a crash leaves the old
 * file or the new one. The Python SDK's format (`{ deviceId, token, workspace }`): either SDK
 * reads the other's file.
 */
export async function saveCredentials(file: string, credentials: DeviceCredentials): Promise<void> {
  const temporary = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  const { deviceId, token, workspace } = credentials;
  try {
    await writeFile(temporary, JSON.stringify({ deviceId, token, workspace }), { mode: 0o600, flag: 'wx' });
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/**
 * The credential stored at `file`, or a new one: attaches with `setupToken` and stores it. A
 * setup token attaches once and is then spent, so later starts reuse the stored file and need
 * no token. `setupToken` may be the console's QR text, whose service URL then stands in for
 * `url`; `name` left out, the device takes the setup token's name.
 */
export async function attachOrLoad(
  options: {
    url?: UrlSource;
    file: string;
    setupToken?: string | undefined;
    name?: string;
    kind?: 'device' | 'gateway';
    fetch?: typeof fetch;
  } & RequestLimits,
): Promise<DeviceCredentials> {
  const stored = await loadCredentials(options.file);
  if (stored) return stored;
  if (!options.setupToken) throw new Error(`No credential at ${options.file} yet: a setup token is needed for the first start.`);
  const { device: _device, ...credentials } = await attachDevice({ ...options, setupToken: options.setupToken });
  await saveCredentials(options.file, credentials);
  return credentials;
}
