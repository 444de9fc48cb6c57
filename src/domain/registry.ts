import { getAccount } from './account.js';
import { approveAction, rejectAction } from './action-decisions.js';
import { exportHistory, getActionState, listRecentActions, listRequestedActions } from './action-reads.js';
import { requestAction } from './action-requests.js';
import { cancelAction } from './action-withdrawals.js';
import { broadcast } from './broadcasts.js';
import { listApprovals, rejectActions } from './approvals.js';
import { createAgentConnection, createSetupToken, listAgentConnections, listSetupTokens, revokeAgentConnection, revokeSetupToken } from './connections.js';
import { fetchNextCommand, reportResult } from './device-commands.js';
import { getDeviceControls, setDeviceControls } from './device-controls.js';
import { issueEventsTicket } from './device-events.js';
import { attachDevice, listWorkspaceDevices, publishManifest, revokeWorkspaceDevice } from './devices.js';
import { createEnrollment, enrollBoard } from './enrollments.js';
import { listFunctions } from './functions.js';
import { createGrants, grantGateway, listWorkspaceGrants, revokeWorkspaceGrants, updateWorkspaceGrant } from './grants.js';
import { getHealth, getReadiness } from './health.js';
import { createOAuthClient, listOAuthClients, revokeOAuthClient } from './oauth/client-operations.js';
import type { AnyOperation } from './operation.js';
import { getUsage } from './usage.js';
import { streamOwnerEvents } from './owner-events.js';
import {
  createWebhook,
  enableWorkspaceWebhook,
  getWorkspaceWebhook,
  listWebhookDeliveries,
  listWorkspaceWebhooks,
  revokeWorkspaceWebhook,
  rotateWebhookSecretOperation,
  testWorkspaceWebhook,
  disableWorkspaceWebhook,
} from './webhooks.js';

/** Every operation of the service. REST routes and MCP tools are built from these. */
export const operations = {
  getHealth,
  getReadiness,
  getAccount,
  getUsage,
  getDeviceControls,
  setDeviceControls,
  createSetupToken,
  listSetupTokens,
  revokeSetupToken,
  createAgentConnection,
  listAgentConnections,
  revokeAgentConnection,
  createOAuthClient,
  listOAuthClients,
  revokeOAuthClient,
  attachDevice,
  listDevices: listWorkspaceDevices,
  revokeDevice: revokeWorkspaceDevice,
  publishManifest,
  createEnrollment,
  enrollBoard,
  createGrants,
  listGrants: listWorkspaceGrants,
  revokeGrants: revokeWorkspaceGrants,
  updateGrant: updateWorkspaceGrant,
  grantGateway,
  listFunctions,
  requestAction,
  getAction: getActionState,
  cancelAction,
  approveAction,
  rejectAction,
  listActions: listRecentActions,
  listApprovals,
  rejectActions,
  listRequestedActions,
  exportActions: exportHistory,
  broadcast,
  fetchNext: fetchNextCommand,
  reportResult,
  issueEventsTicket,
  streamOwnerEvents,
  createWebhook,
  listWebhooks: listWorkspaceWebhooks,
  getWebhook: getWorkspaceWebhook,
  rotateWebhookSecret: rotateWebhookSecretOperation,
  revokeWebhook: revokeWorkspaceWebhook,
  enableWebhook: enableWorkspaceWebhook,
  listWebhookDeliveries,
  testWebhook: testWorkspaceWebhook,
  disableWebhook: disableWorkspaceWebhook,
} satisfies Record<string, AnyOperation>;

export const allOperations: AnyOperation[] = Object.values(operations);
