import { operations as op } from '../domain/registry.js';
import type { AnyOperation } from '../domain/operation.js';

export interface Route {
  method: 'GET' | 'POST';
  /** OpenAPI-style path; `{name}` segments become input fields of the same name. */
  path: string;
  operation: AnyOperation;
  /** Success status; 200 unless stated. */
  status?: 200 | 201;
  /** Health and metadata answer raw objects, not `{ data }` (service-api.md "Conventions"). */
  unwrapped?: boolean;
  /** Request headers copied into input fields: header name → field. */
  headers?: Record<string, string>;
  deprecated?: boolean;
}

/** The REST facade: one entry per route, each calling a registry operation. */
export const routes: Route[] = [
  { method: 'GET', path: '/healthz', operation: op.getHealth, unwrapped: true },
  { method: 'GET', path: '/v1/account', operation: op.getAccount },

  { method: 'POST', path: '/v1/device-setup-tokens', operation: op.createSetupToken, status: 201 },
  { method: 'GET', path: '/v1/device-setup-tokens', operation: op.listSetupTokens },
  { method: 'POST', path: '/v1/device-setup-tokens/{connectionId}/revoke', operation: op.revokeSetupToken },
  { method: 'POST', path: '/v1/sdk-tokens', operation: op.createSetupToken, status: 201, deprecated: true },
  { method: 'GET', path: '/v1/sdk-tokens', operation: op.listSetupTokens, deprecated: true },
  { method: 'POST', path: '/v1/sdk-tokens/{connectionId}/revoke', operation: op.revokeSetupToken, deprecated: true },

  { method: 'POST', path: '/v1/agent-connections', operation: op.createAgentConnection, status: 201 },
  { method: 'GET', path: '/v1/agent-connections', operation: op.listAgentConnections },
  { method: 'POST', path: '/v1/agent-connections/{connectionId}/revoke', operation: op.revokeAgentConnection },

  { method: 'POST', path: '/v1/oauth-clients', operation: op.createOAuthClient, status: 201 },
  { method: 'GET', path: '/v1/oauth-clients', operation: op.listOAuthClients },
  { method: 'POST', path: '/v1/oauth-clients/{clientId}/revoke', operation: op.revokeOAuthClient },

  { method: 'POST', path: '/v1/sdk/devices', operation: op.attachDevice, status: 201 },
  { method: 'POST', path: '/v1/enrollments', operation: op.createEnrollment, status: 201, deprecated: true },
  { method: 'POST', path: '/v1/device/enroll', operation: op.enrollBoard, status: 201, deprecated: true },

  { method: 'GET', path: '/v1/devices', operation: op.listDevices },
  { method: 'POST', path: '/v1/devices/{deviceId}/revoke', operation: op.revokeDevice },
  { method: 'POST', path: '/v1/device/{deviceId}/manifest', operation: op.publishManifest },

  { method: 'POST', path: '/v1/grants', operation: op.createGrants, status: 201 },
  { method: 'GET', path: '/v1/grants', operation: op.listGrants },
  { method: 'POST', path: '/v1/grants/revoke', operation: op.revokeGrants },
  { method: 'POST', path: '/v1/devices/{deviceId}/gateway-grants', operation: op.grantGateway },
  { method: 'GET', path: '/v1/functions', operation: op.listFunctions },

  { method: 'POST', path: '/v1/devices/{deviceId}/actions', operation: op.requestAction, status: 201 },
  { method: 'GET', path: '/v1/actions', operation: op.listActions },
  { method: 'GET', path: '/v1/actions/export', operation: op.exportActions },
  { method: 'GET', path: '/v1/actions/{actionId}', operation: op.getAction },
  { method: 'POST', path: '/v1/actions/{actionId}/cancel', operation: op.cancelAction },
  { method: 'POST', path: '/v1/broadcasts', operation: op.broadcast },

  { method: 'POST', path: '/v1/device/{deviceId}/next', operation: op.fetchNext, headers: { 'x-service-workspace': 'workspace' } },
  { method: 'POST', path: '/v1/device/{deviceId}/result', operation: op.reportResult },
  // GET /v1/device/{deviceId}/events, the wake WebSocket, is served by src/device-channel, not Hono.
  { method: 'POST', path: '/v1/device/{deviceId}/events-ticket', operation: op.issueEventsTicket, status: 201 },
];
