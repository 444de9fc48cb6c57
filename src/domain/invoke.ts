import type { Context } from './context.js';
import { DomainError, issuesFromZod } from './errors.js';
import type { AnyOperation } from './operation.js';
import { inputIssues } from './input-limits.js';

/**
 * Who may call the operation at all, from its declaration and the caller's credential
 * alone: the credential kind (401 when there is none, 403 when it is of another kind) and
 * whether an OAuth access token is accepted on this surface. It needs no input: the MCP gate
 * asks it before the SDK runs, to answer with an HTTP status; `invoke` asks it again.
 */
export function admit(operation: AnyOperation, ctx: Context): void {
  const credential = ctx.credential;
  if (operation.credentials.includes('public')) return;
  if (!credential) throw new DomainError('unauthorized', 'A valid credential is required.');
  if (!operation.credentials.includes(credential.kind)) {
    throw new DomainError('forbidden', `This endpoint does not accept ${/^[aeiou]/.test(credential.kind) ? 'an' : 'a'} ${credential.kind} credential.`);
  }
  assertOAuthSurface(operation, ctx);
}

/**
 * An OAuth access token is an agent credential accepted only on the surfaces the operation
 * declares (docs/rules.md "Credentials"). REST asks this before reading a body, as it always
 * did; the credential kind itself is judged by `invoke` after the body.
 */
export function assertOAuthSurface(operation: AnyOperation, ctx: Context): void {
  const credential = ctx.credential;
  if (credential?.kind === 'agent' && credential.oauth && !operation.oauth?.includes(ctx.surface)) {
    throw new DomainError(
      'forbidden',
      `OAuth access tokens are not accepted here on ${ctx.surface === 'rest' ? 'REST' : 'MCP'}: this endpoint wants an agent token.`,
    );
  }
}

/** The kill switch (DEVICE_CONTROLS_ENABLED=false) refuses every operation that queues device actions. */
export function assertControlsEnabled(operation: AnyOperation, ctx: Context): void {
  if (operation.queuesDeviceActions && !ctx.settings.deviceControlsEnabled) {
    throw new DomainError('device_controls_disabled', 'Device controls are switched off on this service (DEVICE_CONTROLS_ENABLED=false).');
  }
}

/**
 * The one chokepoint every surface calls. In order: who may call (`admit`), the input
 * schema, the caller's own device, the kill switch, the operation itself, and its output
 * schema — so no check can be forgotten on one surface. The live grant and ceiling of a
 * device function (`access: 'per-function'`) are checked by the operation inside the
 * transaction that queues the action, where they cannot change underneath it.
 */
export async function invoke(operation: AnyOperation, ctx: Context, raw: unknown): Promise<unknown> {
  admit(operation, ctx);
  const credential = ctx.credential;

  const unsafe = inputIssues(raw);
  if (unsafe.length > 0) throw new DomainError('validation_failed', 'The request holds text or nesting that cannot be stored as sent.', { issues: unsafe });

  const input = operation.input.safeParse(raw ?? {});
  if (!input.success) {
    throw new DomainError('validation_failed', 'The request is not valid.', { issues: issuesFromZod(input.error) });
  }

  if (
    operation.ownDevice !== undefined &&
    credential?.kind === 'device' &&
    (input.data as Record<string, unknown>)[operation.ownDevice] !== credential.deviceId
  ) {
    throw new DomainError('forbidden', 'A device credential acts only for its own device.');
  }
  assertControlsEnabled(operation, ctx);

  const result = await operation.run({ ctx, credential, input: input.data });

  const output = operation.output.safeParse(result);
  if (!output.success) {
    // A bug in the operation, not the caller's fault: never send a shape the contract denies.
    throw new Error(`operation ${operation.name} produced an invalid result: ${output.error.message}`);
  }
  return output.data;
}
