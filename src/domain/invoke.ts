import type { Context } from './context.js';
import { DomainError, issuesFromZod } from './errors.js';
import type { AnyOperation } from './operation.js';
import { inputIssues } from './input-limits.js';

/**
 * The one chokepoint both transports call. In order: the credential kind (401 when there
 * is none, 403 when it is of another kind), the agent's access ceiling, the input schema,
 * the operation itself, and its output schema — so no check can be forgotten on one surface.
 */
export async function invoke(operation: AnyOperation, ctx: Context, raw: unknown): Promise<unknown> {
  const credential = ctx.credential;
  if (!operation.credentials.includes('public')) {
    if (!credential) throw new DomainError('unauthorized', 'A valid credential is required.');
    if (!operation.credentials.includes(credential.kind)) {
      throw new DomainError('forbidden', `This endpoint does not accept ${/^[aeiou]/.test(credential.kind) ? 'an' : 'a'} ${credential.kind} credential.`);
    }
  }
  if (credential?.kind === 'agent' && operation.access === 'act' && credential.access !== 'act') {
    throw new DomainError('insufficient_access', 'This call needs the act access ceiling.', { requiredAccess: 'act' });
  }

  const unsafe = inputIssues(raw);
  if (unsafe.length > 0) throw new DomainError('validation_failed', 'The request holds text or nesting that cannot be stored as sent.', { issues: unsafe });

  const input = operation.input.safeParse(raw ?? {});
  if (!input.success) {
    throw new DomainError('validation_failed', 'The request is not valid.', { issues: issuesFromZod(input.error) });
  }

  const result = await operation.run({ ctx, credential, input: input.data });

  const output = operation.output.safeParse(result);
  if (!output.success) {
    // A bug in the operation, not the caller's fault: never send a shape the contract denies.
    throw new Error(`operation ${operation.name} produced an invalid result: ${output.error.message}`);
  }
  return output.data;
}
