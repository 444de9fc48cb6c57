import type { ClientCapabilities, McpServer } from '@modelcontextprotocol/server';
import type { OperationContext, CredentialOf } from '../domain/context.js';
import type { CallCancellation } from './cancellation.js';
import type { ActionRecord } from '../domain/action-records.js';
import type { DeviceTool } from './device-tool-names.js';
import type { PromptRefusal } from './legacy-elicitation.js';

/** Which of a request's calls answer with a task (tasks/task-methods.ts `taskModeFor`). */
export type TaskMode = (callId: string | number | undefined) => ((action: ActionRecord) => Promise<TaskCreated>) | undefined;

/** What the tools/call gate (tool-call-gate.ts) resolved for this request, handed to the per-request server. */
export interface McpSession {
  ctx: OperationContext;
  credential: CredentialOf<'agent'>;
  /**
   * The caller's device tools, resolved by the gate: all of them for `tools/list`, only the
   * called one for a device `tools/call`, none for other methods (they never pay the query).
   */
  tools: DeviceTool[] | undefined;
  /** Tracks a device tool call by its JSON-RPC id while it runs (cancellation.ts). */
  cancellation: (id: string | number | undefined) => CallCancellation;
  /**
   * Every message of the request calls a device tool: its per-request server needs those
   * tools only. A 2025-era ask keeps that server while its user decides (legacy-elicitation.ts),
   * so what it does not register it does not hold.
   */
  deviceCallsOnly?: boolean;
  /**
   * The workspace's pause switch was on when the gate read it for a `tools/list`: the listing
   * hides what the kill switch hides (calls are refused with 503 by the gate either way).
   */
  paused?: boolean;
  /**
   * The gate found device control running (the pause switch read once, for the request's
   * device calls): the call that runs straight after takes that reading, and clears it so no later
   * call on the session reuses it (context.ts `controlsRunning`).
   */
  controlsRunning?: boolean;
  /** A lone device call whose pause switch the gate left for later (tool-call-gate.ts `pauseRefusal`). */
  pauseUnread?: boolean;
  /**
   * Set when a message of the request declared MCP Tasks (tasks/): for the JSON-RPC id of a
   * device call that declared them itself, how its action answers when it has not finished
   * within TASK_WAIT_MS, with its task; undefined for any other call.
   */
  taskFor?: TaskMode;
  /**
   * What a 2025-era client declared at `initialize`: read from its `Mcp-Session-Id`
   * (client-sessions.ts), or remembered for its connection when it sends none.
   */
  clientCapabilities?: ClientCapabilities;
  /** The nonce of a 2025-era request's verified `Mcp-Session-Id`: what its resources/subscribe is kept under. */
  clientSession?: string;
  /**
   * A 2026-07-28 call of this device tool returned an ask for its user's confirmation: if the
   * request cannot take it, the SDK's -32021 gets the service's explanation (missing-capability.ts).
   */
  askedToConfirm?: string;
  /** The protocol era of the per-request server, set when the SDK builds it. */
  era?: 'legacy' | 'modern';
  /**
   * On a 2025-era request: holds the per-request server as one waiting for its client's
   * answer to an elicitation, until the server closes (legacy-elicitation.ts); a refusal
   * when too many asks wait already.
   */
  awaitAnswer?: (server: McpServer) => PromptRefusal | undefined;
}

/** A tools/call answered with a task (MCP Tasks, `resultType: "task"`): the seed state of the action's task. */
export type TaskCreated = { resultType: 'task'; taskId: string } & Record<string, unknown>;

/** Whose calls a `notifications/cancelled` may reach: the same agent connection's only. */
export function callerKey(credential: CredentialOf<'agent'>): string {
  return JSON.stringify([credential.workspaceId, credential.principal, credential.connectionId]);
}
