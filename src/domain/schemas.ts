import { z } from 'zod';
import { APPROVAL_MODES } from '../store/grants.js';

/** Shared shapes of the contract, documented once here: OpenAPI and the MCP tool schemas are built from them. */

export const uuid = z.uuid({ version: 'v4' });
export const timestamp = z.number().int().describe('Unix milliseconds');
export const access = z.enum(['read', 'act']).describe('Access ceiling: `read` calls read functions only, `act` calls both.');
/**
 * Normalised to NFC as it comes in: the same name typed on two systems (é as one code point, or
 * as e and a combining accent) is one principal, whose grants both find.
 */
export const principal = z.string().normalize('NFC').min(1).max(128).describe('The agent identity that grants name, e.g. `agent:support-bot`.');

export const capabilityName = z
  .string()
  .regex(/^[a-z][a-z0-9_.-]{0,63}$/, 'must match ^[a-z][a-z0-9_.-]{0,63}$')
  .describe('Device function name.');

export const capability = z.object({
  name: capabilityName,
  kind: z.enum(['read', 'control']).describe('`read` functions observe, `control` functions change the device.'),
  description: z.string().max(1024).optional(),
  arguments: z.record(z.string(), z.unknown()).describe('JSON Schema of the arguments object.'),
  result: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      "JSON Schema of the `result` object the device reports (same rules as `arguments`); a result or state report that does not match it is refused. A read function's result is its last-known value.",
    ),
});

export const device = z.object({
  id: uuid,
  name: z.string(),
  kind: z.enum(['device', 'gateway', 'service']),
  parentId: uuid.nullable().describe('The gateway of a child or service device.'),
  key: z.string().nullable().describe("A gateway child's key in its gateway's manifest (stable across republishing); null otherwise."),
  online: z.boolean().describe('Called in within the last 60 seconds (children: their gateway).'),
  lastSeenAt: timestamp.nullable(),
  revoked: z.boolean(),
  createdAt: timestamp,
  capabilities: z.array(capability),
});

export const oauthInfo = z.object({
  applicationId: z.string(),
  clientId: z.string(),
  redirectUris: z.array(z.url()),
  public: z.boolean(),
});

/** An agent connection or setup token as listed: everything but the secret. */
export const connection = z.object({
  id: uuid,
  principal: z.string(),
  name: z.string(),
  expiresAt: timestamp.nullable(),
  revoked: z.boolean(),
  access,
  oauth: oauthInfo.optional(),
  purpose: z.enum(['agent', 'device-setup']),
  canAttach: z.boolean(),
  deviceLimit: z.number().int(),
  attachedDeviceCount: z.number().int().optional(),
  tokenPrefix: z.string().describe('The first characters of the token, to tell tokens apart.'),
  createdAt: timestamp,
});

/** NewConnection: the listed shape plus the token, shown once. */
export const newConnection = connection.extend({
  token: z.string().describe('Secret, returned once only: store it securely and never log it.'),
});

export const attachedDevice = z.object({
  device,
  token: z.string().describe('The device child credential, returned once only.'),
  workspace: z
    .string()
    .regex(/^[a-f0-9]{64}$/)
    .describe('Routing identifier for the `x-service-workspace` header.'),
});

/** Whose yes a call under a grant needs before the device is asked (docs/reference/rules.md "Approvals"). */
export const approvalMode = z
  .enum(APPROVAL_MODES)
  .describe(
    "`none`: a call queues the action; `owner`: the action waits for the owner to approve it; `user`: the agent's user confirms in the MCP client (through REST: as `owner`).",
  );
