import { getAccount } from './account.js';
import {
  createAgentConnection,
  createSetupToken,
  listAgentConnections,
  listSetupTokens,
  revokeAgentConnection,
  revokeSetupToken,
} from './connections.js';
import { attachDevice, listWorkspaceDevices, publishManifest, revokeWorkspaceDevice } from './devices.js';
import { createEnrollment, enrollBoard } from './enrollments.js';
import { getHealth } from './health.js';
import type { AnyOperation } from './operation.js';

/** Every operation of the service. REST routes and MCP tools are built from these. */
export const operations = {
  getHealth,
  getAccount,
  createSetupToken,
  listSetupTokens,
  revokeSetupToken,
  createAgentConnection,
  listAgentConnections,
  revokeAgentConnection,
  attachDevice,
  listWorkspaceDevices,
  revokeWorkspaceDevice,
  publishManifest,
  createEnrollment,
  enrollBoard,
} satisfies Record<string, AnyOperation>;

export const allOperations: AnyOperation[] = Object.values(operations);
