import type { z } from 'zod';
import type { Context, CredentialKind, CredentialOf } from './context.js';

/**
 * The access ceiling an agent credential needs for an operation:
 * - `none`: the operation is not open to agents, or needs no ceiling;
 * - `read` / `act`: checked by `invoke` before the operation runs;
 * - `per-function`: depends on the device function named in the input, so the operation
 *   checks it itself (decisions §3) through src/domain/access.ts.
 */
export type AccessRequirement = 'none' | 'read' | 'act' | 'per-function';

export interface OperationArgs<K extends CredentialKind | 'public', I> {
  ctx: Context;
  credential: K extends CredentialKind ? CredentialOf<K> : null;
  input: I;
}

export interface Operation<
  K extends CredentialKind | 'public' = CredentialKind | 'public',
  I extends z.ZodType = z.ZodType,
  O extends z.ZodType = z.ZodType,
> {
  /** `resource.verb`, e.g. `setupTokens.create`. */
  name: string;
  description: string;
  /** Credential kinds that may call it; `['public']` for no credential at all. */
  credentials: readonly K[];
  access: AccessRequirement;
  input: I;
  output: O;
  run(args: OperationArgs<K, z.output<I>>): Promise<z.input<O>>;
}

export function defineOperation<K extends CredentialKind | 'public', I extends z.ZodType, O extends z.ZodType>(
  operation: Operation<K, I, O>,
): Operation<K, I, O> {
  return operation;
}

// The registry holds operations of every credential and schema type; `invoke` narrows them.
// `any` for the credential kind: the registry holds operations of every kind, and `run`
// is contravariant in it, so no narrower type admits them all. `invoke` checks the kind.
export type AnyOperation = Operation<any, z.ZodType, z.ZodType>;
