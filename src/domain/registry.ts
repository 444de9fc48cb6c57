import { getAccount } from './account.js';
import { approveAction, rejectAction } from './action-decisions.js';
import { exportHistory, getActionState, listOwnActions, listRecentActions, listRequestedActions } from './action-reads.js';
import { requestAction, scheduleAction } from './action-requests.js';
import { cancelAction } from './action-withdrawals.js';
import { broadcast } from './broadcasts.js';
import { listApprovals, rejectActions } from './approvals.js';
import { createAgentConnection, createSetupToken, listAgentConnections, listSetupTokens, revokeAgentConnection, revokeSetupToken } from './connections.js';
import { fetchNextCommand, reportResult } from './device-commands.js';
import { getDeviceControls, setDeviceControls } from './device-controls.js';
import { getDeviceState, reportDeviceState } from './device-state.js';
import { listDeviceStates } from './device-states.js';
import { issueEventsTicket } from './device-wake-socket.js';
import { renameWorkspaceDevice } from './device-names.js';
import { attachDevice, listWorkspaceDevices, revokeWorkspaceDevice } from './devices.js';
import { publishManifest } from './manifest.js';
import { createEnrollment, enrollBoard } from './enrollments.js';
import { listFunctions } from './functions.js';
import { createGrants, listWorkspaceGrants, revokeWorkspaceGrants, updateWorkspaceGrant } from './grants.js';
import { grantGateway } from './gateway-grants.js';
import { getHealth, getReadiness } from './health.js';
import { createOAuthClient, listOAuthClients, revokeOAuthClient } from './oauth/client-operations.js';
import type { AnyOperation } from './operation.js';
import { getUsage } from './usage.js';
import { streamOwnerEvents } from './owner-event-stream.js';
import {
  createWebhook,
  enableWorkspaceWebhook,
  getWorkspaceWebhook,
  listWebhookDeliveries,
  listWorkspaceWebhooks,
  revokeWorkspaceWebhook,
  rotateWorkspaceWebhookSecret,
  disableWorkspaceWebhook,
} from './webhooks.js';
import { testWorkspaceWebhook } from './webhook-test.js';

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
  listWorkspaceDevices,
  revokeWorkspaceDevice,
  renameWorkspaceDevice,
  getDeviceState,
  listDeviceStates,
  publishManifest,
  createEnrollment,
  enrollBoard,
  createGrants,
  listWorkspaceGrants,
  revokeWorkspaceGrants,
  updateWorkspaceGrant,
  grantGateway,
  listFunctions,
  requestAction,
  scheduleAction,
  getActionState,
  listOwnActions,
  cancelAction,
  approveAction,
  rejectAction,
  listRecentActions,
  listApprovals,
  rejectActions,
  listRequestedActions,
  exportHistory,
  broadcast,
  fetchNextCommand,
  reportResult,
  reportDeviceState,
  issueEventsTicket,
  streamOwnerEvents,
  createWebhook,
  listWorkspaceWebhooks,
  getWorkspaceWebhook,
  rotateWorkspaceWebhookSecret,
  revokeWorkspaceWebhook,
  enableWorkspaceWebhook,
  listWebhookDeliveries,
  testWorkspaceWebhook,
  disableWorkspaceWebhook,
} satisfies Record<string, AnyOperation>;

export const allOperations: AnyOperation[] = Object.values(operations);
