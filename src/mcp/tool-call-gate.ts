import type { Context } from 'hono';
import type { OperationContext, CredentialOf } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { pausedRefusal, workspacePaused } from '../domain/device-controls.js';
import { callableFunctionsValidUntil, listCallableFunctions, listCallableFunctionsOnDevices } from '../domain/functions.js';
import { admit, assertControlsEnabled } from '../domain/invoke.js';
import type { AnyOperation } from '../domain/operation.js';
import { operations } from '../domain/registry.js';
import { whenClientGone, type HttpEnv } from '../http/request.js';
import { callGateKey, type CallGateCache } from './call-gate-cache.js';
import type { InflightCalls } from './cancellation.js';
import { DEVICE_TOOL_PATTERN, deviceIdPrefixOf, deviceToolNames, type DeviceTool } from './device-tool-names.js';
import { fixedToolOperation } from './fixed-tools.js';
import { envelope } from './refusals.js';
import type { RpcMessage } from './request-messages.js';
import { callerKey, type McpSession } from './session.js';

export interface ToolCallGateDeps {
  inflight: InflightCalls;
  callGate: CallGateCache;
  /** The protected-resource metadata an `insufficient_scope` 403 points at, as this request names the service. */
  metadataUrl(c: Context<HttpEnv>): string;
}

export type ToolCallGate = (c: Context<HttpEnv>, ctx: OperationContext, credential: CredentialOf<'agent'>, messages: RpcMessage[]) => Promise<Gate>;

type Gate = { response: Response } | { session: McpSession };

/**
 * tools/call re-checks what tools/list showed (docs/reference/rules.md "MCP"): a device tool the caller
 * may not call now is HTTP 403 with the error envelope, decided here because the SDK would
 * answer an unknown tool in-band with HTTP 200. What it resolves (the caller's device tools)
 * is the request's session, handed to whichever answer path answers it.
 */
export function createToolCallGate(deps: ToolCallGateDeps): ToolCallGate {
  const { inflight, callGate, metadataUrl } = deps;

  return async function gateToolCalls(c, ctx, credential, messages) {
    const methods = messages.map((m) => m.method);
    const calls = messages.filter((m) => m.method === 'tools/call' && typeof m.params?.name === 'string').map((m) => m.params!.name as string);
    // The watch on the client and the caller's key are made only for a call that waits (a device tool).
    const session: McpSession = { ctx, credential, tools: undefined, cancellation: (id) => inflight.track(callerKey(credential), id, whenClientGone(c)) };

    for (const name of calls) {
      const operation = fixedToolOperation(name);
      const refusal = operation && (await admissionRefusal(c, operation, ctx, true));
      if (refusal) return { response: refusal };
    }

    const deviceCalls = calls.filter((name) => DEVICE_TOOL_PATTERN.test(name));
    if (!methods.includes('tools/list') && deviceCalls.length === 0) return { session };

    const now = ctx.clock.now();
    const listing = methods.includes('tools/list');
    // A call alone looks only at the functions on the devices its tool name can point at,
    // kept while nothing they depend on has changed (call-gate-cache.ts).
    const callable = async (agent: CredentialOf<'agent'>, name: string): Promise<readonly DeviceTool[]> => {
      const prefix = deviceIdPrefixOf(name);
      const key = callGateKey(agent.workspaceId, agent.principal, agent.access, prefix);
      const version = agent.functionsVersion;
      const kept = callGate.tools(agent.workspaceId, key, { version, now });
      if (kept) return kept;
      const validUntil = await callableFunctionsValidUntil(ctx.db, agent, now);
      return callGate.keep(agent.workspaceId, key, {
        version,
        validUntil,
        tools: deviceToolNames(await listCallableFunctionsOnDevices(ctx.db, agent, now, prefix)),
      });
    };
    const tools = listing ? deviceToolNames(await listCallableFunctions(ctx.db, credential, now)) : [];
    for (const name of deviceCalls) {
      const found = (listing ? tools : await callable(credential, name)).find((t) => t.name === name);
      if (found) {
        if (!listing && !tools.includes(found) && !tools.some((t) => t.name === name)) tools.push(found);
        continue;
      }
      if (credential.access !== 'act') {
        const withAct = await callable({ ...credential, access: 'act' }, name);
        if (withAct.some((t) => t.name === name)) return { response: ceilingRefusal(c, name, metadataUrl(c)) };
      }
      return {
        response: envelope(c, new DomainError('grant_required', `Tool ${name} is not a device function you may call now: no live grant for it.`)),
      };
    }
    // A device tool runs actions.request: its descriptor's checks (the kill switch among them) apply.
    // A lone call's pause switch is read later (`pauseRefusal`): by the guarded insert itself
    // when the service answers the call directly, here otherwise. A batch reads it now.
    const lone = deviceCalls.length === 1 && messages.length === 1;
    const refusal = deviceCalls.length > 0 && (await admissionRefusal(c, operations.requestAction, ctx, !lone));
    if (refusal) return { response: refusal };
    session.pauseUnread = lone;

    // A tools/call alone needs only its own tool on the per-request server; tools/list needs all.
    session.tools = methods.includes('tools/list') ? tools : tools.filter((t) => deviceCalls.includes(t.name));
    session.deviceCallsOnly = deviceCalls.length === messages.length;
    if (listing) session.paused = await workspacePaused(ctx, credential.workspaceId);
    return { session };
  };
}

function ceilingRefusal(c: Context<HttpEnv>, name: string, metadataUrl: string): Response {
  return envelope(
    c,
    new DomainError('insufficient_access', `Tool ${name} runs a control function; this credential's ceiling is read.`, { requiredAccess: 'act' }),
    {
      'WWW-Authenticate': `Bearer error="insufficient_scope", scope="act", resource_metadata="${metadataUrl}"`,
    },
  );
}

/**
 * What `invoke` would refuse whatever the arguments (credential kind, OAuth on this surface,
 * the kill switch), answered here as an HTTP status because the SDK would answer it in-band
 * with 200. `invoke` checks the same again when the tool runs (after parsing the arguments).
 */
async function admissionRefusal(c: Context<HttpEnv>, operation: AnyOperation, ctx: OperationContext, readPause: boolean): Promise<Response | undefined> {
  try {
    admit(operation, ctx);
    // Read here even for an operation that checks the switch itself: paused, the answer is 503, not a tool error.
    await assertControlsEnabled(operation, ctx, readPause);
    return undefined;
  } catch (error) {
    if (error instanceof DomainError) return envelope(c, error);
    throw error;
  }
}

/**
 * The pause switch of a lone device call the gate left unread, read before the SDK runs it:
 * paused, the 503 the gate answers; running, the call takes this reading (`controlsRunning`),
 * as it runs straight after. A call the service answers directly skips this: its guarded
 * insert checks the switch, and a paused refusal becomes the same 503 (`pausedAnswer`).
 */
export async function pauseRefusal(c: Context<HttpEnv>, session: McpSession): Promise<Response | undefined> {
  if (!session.pauseUnread) return undefined;
  session.pauseUnread = false;
  const refusal = await admissionRefusal(c, operations.requestAction, session.ctx, true);
  if (refusal) return refusal;
  session.controlsRunning = true;
  return undefined;
}

/** A directly answered device call refused because the owner paused device control: the gate's 503, not a tool error. */
export function pausedAnswer(c: Context<HttpEnv>, result: object): Response | undefined {
  if (!('isError' in result) || result.isError !== true) return undefined;
  const error = ((result as { structuredContent?: unknown }).structuredContent as { error?: { code?: unknown } } | undefined)?.error;
  return error?.code === 'device_controls_disabled' ? envelope(c, pausedRefusal()) : undefined;
}
