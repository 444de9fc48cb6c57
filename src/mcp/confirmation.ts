import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { inputRequired, inputResponse, type ClientCapabilities, type InputRequiredResult } from '@modelcontextprotocol/server';
import type { OperationContext } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { humanText, MAX_ASK_CHARS } from '../domain/human-text.js';
import { confirmationKey } from '../domain/service-keys.js';
import type { PromptRefusal } from './legacy-elicitation.js';

// ---------------------------------------------------------------------------------------
// User confirmation (docs/agents/confirmation.md): a device tool whose grant is in `user` mode asks
// the agent's user, through the agent's own MCP client, before the action is queued. The ask
// is a form elicitation (`confirm: boolean`); on the 2026-07-28 revision it rides an
// `input_required` result, on a 2025-era connection the SDK's legacy shim sends it as a real
// `elicitation/create` request (legacy-elicitation.ts makes that work over stateless HTTP).
// The client performs the ask and reports the answer: the service cannot tell a person's yes
// from a client that answers by itself, so the action records the client as the confirmer.
//
// The `requestState` sent with the ask comes back from the client, so it is untrusted: it is
// `c1.<claims>.<HMAC-SHA256>` under the service's confirmation key (kept in the database,
// shared by every instance), and its claims bind it to the caller (workspace and principal),
// the agent connection it was asked on, the live grant it was asked under, the tool, the
// function it names and a digest of the canonical arguments, until an expiry. A retry whose
// state fails any of these is refused and creates nothing; the grant is compared again with
// the live one where the action is created (a revoke and re-grant meanwhile refuses it). The
// state's id is the queued action's idempotency key, so replaying an accepted answer returns
// the action it already created instead of queueing another.
// ---------------------------------------------------------------------------------------

/** How long the user has to answer, in seconds: a state older than this is refused. */
export const CONFIRMATION_TTL_SECONDS = 300;
/** The key of the one input request in the ask, and of its answer in `inputResponses`. */
export const CONFIRM_KEY = 'confirm';

const STATE_PREFIX = 'c1';
/** Domain separation: this key signs confirmation states and nothing else. */
const MAC_LABEL = 'dfc.mcp.confirmation.v1\n';

interface Claims {
  /** Unique per ask: the idempotency key of the action an accepted answer queues. */
  id: string;
  /** Digest of the caller: workspace and principal. */
  sub: string;
  /** Digest of the agent connection the ask was made on. */
  con: string;
  /** The id of the live grant the ask was made under. */
  grant: string;
  /** The device tool's name. */
  tool: string;
  /** Digest of the function (device, capability) and the canonical arguments. */
  call: string;
  /** Expiry, Unix seconds. */
  exp: number;
}

/** JSON with object keys sorted at every level, so equal arguments give one text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const digest = (text: string) => createHash('sha256').update(text).digest('base64url');
const mac = (key: Buffer, body: string) =>
  createHmac('sha256', key)
    .update(MAC_LABEL + body)
    .digest();

/** What a state is bound to; two calls with the same binding may share a confirmation. */
export interface Binding {
  workspaceId: string;
  principal: string;
  /** The agent connection (token or OAuth client) the call came on. */
  connectionId: string;
  tool: string;
  deviceId: string;
  capability: string;
  args: unknown;
}

function bound(binding: Binding): Pick<Claims, 'sub' | 'con' | 'tool' | 'call'> {
  return {
    sub: digest(JSON.stringify([binding.workspaceId, binding.principal])),
    con: digest(JSON.stringify([binding.workspaceId, binding.connectionId])),
    tool: binding.tool,
    call: digest(canonicalJson([binding.deviceId, binding.capability, binding.args ?? {}])),
  };
}

export function mintState(key: Buffer, binding: Binding, grantId: string, nowMs: number): { state: string; id: string } {
  const claims: Claims = { id: randomUUID(), ...bound(binding), grant: grantId, exp: Math.floor(nowMs / 1000) + CONFIRMATION_TTL_SECONDS };
  const body = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return { state: `${STATE_PREFIX}.${body}.${mac(key, body).toString('base64url')}`, id: claims.id };
}

/** Why a state is refused, in words the caller can act on. */
const REFUSALS = {
  malformed: 'it is not a confirmation state this service made',
  signature: 'its signature does not match (it was altered, or made by another service)',
  principal: 'it was made for another agent',
  connection: "it was made on another of this agent's connections (each connection's confirmations are its own)",
  tool: 'it was made for another tool',
  arguments: 'it was made for other arguments',
  expired: `it expired (a confirmation is valid for ${CONFIRMATION_TTL_SECONDS} seconds)`,
} as const;

export type StateCheck = { ok: true; id: string; grantId: string } | { ok: false; reason: keyof typeof REFUSALS };

/** Checks an echoed state: signature first, then every binding and the expiry. */
export function checkState(key: Buffer, state: string, binding: Binding, nowMs: number): StateCheck {
  const parts = state.split('.');
  if (parts.length !== 3 || parts[0] !== STATE_PREFIX) return { ok: false, reason: 'malformed' };
  const [, body, signature] = parts as [string, string, string];
  const expected = mac(key, body);
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, reason: 'signature' };
  let claims: Claims;
  try {
    claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Claims;
  } catch {
    return { ok: false, reason: 'malformed' };
  }
  if (typeof claims.id !== 'string' || typeof claims.grant !== 'string' || typeof claims.exp !== 'number') return { ok: false, reason: 'malformed' };
  const want = bound(binding);
  if (claims.sub !== want.sub) return { ok: false, reason: 'principal' };
  if (claims.con !== want.con) return { ok: false, reason: 'connection' };
  if (claims.tool !== want.tool) return { ok: false, reason: 'tool' };
  if (claims.call !== want.call) return { ok: false, reason: 'arguments' };
  if (claims.exp * 1000 <= nowMs) return { ok: false, reason: 'expired' };
  return { ok: true, id: claims.id, grantId: claims.grant };
}

/** Whether a client's declared capabilities cover a form elicitation (an empty `elicitation` means form). */
export function canElicitForm(capabilities: ClientCapabilities | undefined): boolean {
  const elicitation = capabilities?.elicitation;
  if (!elicitation) return false;
  return elicitation.form !== undefined || elicitation.url === undefined;
}

export type ConfirmationStep =
  /** Ask the user: return this from the tool. */
  | { kind: 'ask'; result: InputRequiredResult }
  /** The user said yes to this very call: queue it under this idempotency key. */
  | { kind: 'confirmed'; idempotencyKey: string; grantId: string }
  /** Nothing may be queued: answer this tool error. */
  | { kind: 'refused'; error: DomainError };

export interface ConfirmationRound {
  ctx: OperationContext;
  binding: Binding;
  /** What the user reads: the function, where it is, and the arguments. */
  message: string;
  /**
   * Whether the ask may be returned. False only for a 2025-era client that declared no form
   * elicitation at its initialize: it is told `confirmation_required`. A 2026-07-28 request that
   * declared none is asked too, and the SDK answers the ask with -32021
   * MissingRequiredClientCapability naming `elicitation`, as that revision requires.
   */
  mayAsk: boolean;
  /** The echoed `requestState`, as received (untrusted). */
  requestState: unknown;
  /**
   * Takes a place for the ask among those waiting in this process (a 2025-era ask waits here
   * for its answer: legacy-elicitation.ts), or says which bound is reached.
   */
  holdAsk: () => PromptRefusal | undefined;
  /** The id of the caller's live grant for the function, read when an ask is made. */
  liveGrantId: () => Promise<string>;
  /** The retry's `inputResponses`, as received (untrusted). */
  inputResponses: Record<string, unknown> | undefined;
}

/**
 * One round of a user-mode device tool call: the first call asks; the retry that carries a
 * valid state and an accepted `confirm: true` is confirmed; anything else is refused.
 */
export async function confirmationStep(round: ConfirmationRound): Promise<ConfirmationStep> {
  const { ctx, binding } = round;
  const key = await confirmationKey(ctx);
  const ask = async (): Promise<ConfirmationStep> => {
    if (!round.mayAsk) {
      return {
        kind: 'refused',
        error: new DomainError(
          'confirmation_required',
          cannotAskMessage(binding.tool, 'this MCP client cannot ask (it declared no form elicitation capability)'),
        ),
      };
    }
    // The user must see all that would run: an ask too long to show whole is not made, rather
    // than shown cut with the part past the cut confirmed unseen.
    const length = Array.from(round.message).length;
    if (length > MAX_ASK_CHARS) {
      return {
        kind: 'refused',
        error: new DomainError(
          'confirmation_required',
          `The call of ${binding.tool} was not put to the user: its question would be ${length} characters long, and a confirmation shows at most ${MAX_ASK_CHARS}, so the user could not see all of its arguments. Nothing was queued. Call again with shorter arguments, or ask the workspace owner to switch the grant to owner approval.`,
        ),
      };
    }
    const refusal = round.holdAsk();
    if (refusal) return { kind: 'refused', error: promptLimitError(binding.tool, refusal) };
    const { state } = mintState(key, binding, await round.liveGrantId(), ctx.clock.now());
    const result = inputRequired({
      inputRequests: {
        [CONFIRM_KEY]: inputRequired.elicit({
          mode: 'form',
          // Hidden characters the agent wrote are shown as markers (src/domain/human-text.ts).
          message: humanText(round.message, MAX_ASK_CHARS),
          requestedSchema: {
            type: 'object',
            properties: {
              confirm: { type: 'boolean', title: 'Confirm', description: 'Yes: the device is asked to do this now.', default: false },
            },
            required: ['confirm'],
          },
        }),
      },
      requestState: state,
    });
    return { kind: 'ask', result };
  };

  if (round.requestState === undefined) return ask();
  const check =
    typeof round.requestState === 'string' ? checkState(key, round.requestState, binding, ctx.clock.now()) : ({ ok: false, reason: 'malformed' } as const);
  if (!check.ok) {
    ctx.log.info({ msg: 'mcp confirmation refused', requestId: ctx.requestId, tool: binding.tool, reason: check.reason });
    return {
      kind: 'refused',
      error: new DomainError(
        'confirmation_invalid',
        `The confirmation for ${binding.tool} was refused: ${REFUSALS[check.reason]}. Nothing was queued; call the tool again to be asked afresh.`,
      ),
    };
  }
  const answer = inputResponse(round.inputResponses, CONFIRM_KEY);
  // A retry that lost its answer (or sent one of another kind) is asked again.
  if (answer.kind !== 'elicit') return ask();
  if (answer.action === 'accept' && answer.content?.confirm === true)
    return { kind: 'confirmed', idempotencyKey: `mcp-confirmation:${check.id}`, grantId: check.grantId };
  return {
    kind: 'refused',
    error: new DomainError(
      'confirmation_declined',
      `The user ${answer.action === 'cancel' ? 'cancelled' : 'declined'} the call of ${binding.tool}. Nothing was queued; do not retry unless the user asks for it.`,
    ),
  };
}

/**
 * What an agent is told when its client cannot ask its user: what was needed, that nothing
 * was queued, and what to do. The 2025 era's `confirmation_required` and the message of a
 * 2026-07-28 request's -32021 say the same.
 */
export function cannotAskMessage(tool: string, why: string): string {
  return `Each call of ${tool} needs its user's confirmation, and ${why}. Nothing was queued; calling again the same way fails the same way. Use a client that supports elicitation, or ask the workspace owner to change the grant's approval mode.`;
}

/** The tool error for an ask past a bound on waiting 2025-era asks: what the agent can do about it. */
export function promptLimitError(tool: string, refusal: PromptRefusal): DomainError {
  const where = {
    connection: `this connection already has ${refusal.limit} confirmations waiting for its user (the most one connection may have)`,
    workspace: `this workspace's agents already have ${refusal.limit} confirmations waiting (the most one workspace may have)`,
    instance: `this service instance already has ${refusal.limit} confirmations waiting (the most it holds at once)`,
  }[refusal.scope];
  return new DomainError(
    'capacity_exceeded',
    `The call of ${tool} was not put to the user: ${where}. Nothing was queued. Wait until the user has answered or dismissed the open confirmations, then call again.`,
  );
}
