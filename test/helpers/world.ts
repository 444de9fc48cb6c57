import { grant } from './actions.js';
import type { Client } from './api.js';
import { attachDevice, createAgent, type Agent, type AgentOptions, type AttachedDevice, type AttachOptions } from './fixtures.js';
import { accessTokenFor, registerClient } from './oauth.js';
import type { TestServer } from './server.js';

/**
 * The worlds most tests start from, built through the public API as an owner would: an owner's
 * workspace, a device with its manifest, an agent (a token or an OAuth client), and grants.
 */

/** What a world needs of a test server: a client for it and its identity provider. */
export type WorldServer = Pick<TestServer, 'ownerToken'> & { api: Client };

/** One device of an owner's and one agent granted functions of it. */
export interface GrantedDevice {
  device: AttachedDevice;
  agent: Agent;
}

export interface GrantedDeviceOptions {
  /** The device: the lamp (`lampManifest` in test/helpers/fixtures.ts) unless said otherwise. */
  device?: AttachOptions;
  /** The agent connection: `act` access unless said otherwise. */
  agent?: AgentOptions;
  /** The device's functions granted to the agent. */
  capabilities: string[];
  /** The grants' lifetime; the service's default (no expiry) when left out. */
  ttlSeconds?: number | null;
  approval?: 'none' | 'owner' | 'user';
}

/** Attaches the device, creates the agent and grants it `capabilities`, in that order. */
export async function grantedDevice(api: Client, owner: string, options: GrantedDeviceOptions): Promise<GrantedDevice> {
  const device = await attachDevice(api, owner, options.device);
  const agent = await createAgent(api, owner, options.agent);
  await grant(api, owner, agent.principal, device.id, options.capabilities, options.ttlSeconds, options.approval);
  return { device, agent };
}

/** An owner (signed by the server's identity provider) with a granted device. */
export interface GrantedWorld extends GrantedDevice {
  /** The owner's session token; its subject names the workspace too. */
  owner: string;
}

/** Signs the owner in, then `grantedDevice`. */
export async function grantedWorld(server: WorldServer, subject: string, options: GrantedDeviceOptions): Promise<GrantedWorld> {
  const owner = await server.ownerToken(subject);
  return { owner, ...(await grantedDevice(server.api, owner, options)) };
}

/** An OAuth agent: a public client the owner registered and approved on the consent page. */
export interface OAuthAgent {
  token: string;
  principal: string;
  clientId: string;
}

/**
 * Registers a public OAuth client for the owner and runs the authorization code flow with the
 * owner approving `read act`: the principal an MCP client signs in as.
 */
export async function oauthAgent(
  server: { issuer: string; resource: string },
  owner: string,
  options: { name: string; redirectUri?: string; access?: 'read' | 'act' },
): Promise<OAuthAgent> {
  const redirectUri = options.redirectUri ?? 'http://127.0.0.1:9/callback';
  const registered = await registerClient(server.issuer, owner, {
    name: options.name,
    redirectUris: [redirectUri],
    public: true,
    access: options.access ?? 'act',
  });
  const token = await accessTokenFor(server, owner, registered.oauth.clientId, redirectUri);
  return { token, principal: registered.principal, clientId: registered.oauth.clientId };
}
