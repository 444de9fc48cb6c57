import type { z } from 'zod';
import type { OperationContext, Credential, CredentialKind, Surface } from './context.js';
import { DomainError, issuesFromZod, type ErrorIssue } from './errors.js';
import type { AnyOperation, LiveItem } from './operation.js';
import { assertNotPaused } from './device-controls.js';
import { inputIssues } from './input-limits.js';
import { decodeCursor, encodeCursor, PAGE_DEFAULT, PAGE_MAX, pageFields, type PageKey } from './paging.js';

/** Each credential kind as its holder knows it, with its article, for refusals that say what to send instead. */
const CREDENTIAL_NAMES: Record<CredentialKind, string> = {
  owner: 'an owner session',
  agent: 'an agent token',
  setup: 'a device setup token',
  device: 'a device credential',
};

/** The credential a refusal names: an OAuth access token is an agent credential, but its holder knows it by its own name. */
export function credentialName(credential: Credential): string {
  return credential.kind === 'agent' && credential.oauth ? 'an OAuth access token' : CREDENTIAL_NAMES[credential.kind];
}

/** What the operation takes instead, e.g. "an owner session", "an agent token or an OAuth access token". */
function wanted(operation: AnyOperation, surface: Surface): string {
  const kinds: readonly (CredentialKind | 'public')[] = operation.credentials;
  const names = kinds.flatMap((kind) =>
    kind === 'public'
      ? []
      : kind === 'agent' && operation.oauth?.includes(surface)
        ? [CREDENTIAL_NAMES.agent, 'an OAuth access token']
        : [CREDENTIAL_NAMES[kind]],
  );
  return names.length <= 1 ? (names[0] ?? 'no credential') : `${names.slice(0, -1).join(', ')} or ${names.at(-1)!}`;
}

/**
 * Who may call the operation at all, from its declaration and the caller's credential
 * alone: the credential kind (401 when there is none, 403 when it is of another kind) and
 * whether an OAuth access token is accepted on this surface. It needs no input: the MCP gate
 * asks it before the SDK runs, to answer with an HTTP status; `invoke` asks it again.
 */
export function admit(operation: AnyOperation, ctx: OperationContext): void {
  const credential = ctx.credential;
  if (operation.credentials.includes('public')) return;
  if (!credential) throw new DomainError('unauthorized', 'A valid credential is required.');
  if (!operation.credentials.includes(credential.kind)) {
    throw new DomainError('forbidden', `This endpoint does not accept ${credentialName(credential)}: it wants ${wanted(operation, ctx.surface)}.`);
  }
  assertOAuthSurface(operation, ctx);
}

/**
 * An OAuth access token is an agent credential accepted only on the surfaces the operation
 * declares (docs/reference/rules.md "Credentials"). REST asks this before reading a body, as it always
 * did; the credential kind itself is judged by `invoke` after the body.
 */
export function assertOAuthSurface(operation: AnyOperation, ctx: OperationContext): void {
  const credential = ctx.credential;
  if (credential?.kind === 'agent' && credential.oauth && !operation.oauth?.includes(ctx.surface)) {
    throw new DomainError('forbidden', `This endpoint does not accept an OAuth access token: it wants ${wanted(operation, ctx.surface)}.`);
  }
}

/**
 * The kill switch (DEVICE_CONTROLS_ENABLED=false) refuses every operation that queues device
 * actions, and so does the caller's workspace while its owner has paused device control
 * (src/domain/device-controls.ts): one check for both, on every surface, the pause read here
 * unless the operation `checksPause` itself.
 */
export async function assertControlsEnabled(operation: AnyOperation, ctx: OperationContext, readPause = !operation.checksPause): Promise<void> {
  if (!operation.queuesDeviceActions) return;
  if (!ctx.settings.deviceControlsEnabled) {
    throw new DomainError('device_controls_disabled', 'Device controls are switched off on this service (DEVICE_CONTROLS_ENABLED=false).');
  }
  // An operation that `checksPause` refuses in its own statements; the MCP gate reads anyway,
  // to answer 503 before the SDK (`readPause`).
  const workspaceId = ctx.credential?.workspaceId;
  if (readPause && workspaceId !== undefined && !ctx.controlsRunning) await assertNotPaused(ctx.db, workspaceId);
}

/**
 * What an operation answers: its output schema's parsed type. For a list, `output` is the
 * array one page holds (src/domain/operation.ts), so this is a page's items.
 */
export type OutputOf<O extends AnyOperation> = z.output<O['output']>;

/** What an operation answered, in the form its declaration gives it (src/domain/operation.ts); `T` is its output. */
export type Answer<T = unknown> =
  | { kind: 'value'; data: T }
  /** A page of a list: its items and the cursor of the next page, null on the last. */
  | { kind: 'page'; data: T; nextCursor: string | null }
  /** A streamed document: its other fields, and its items checked one by one as they are read. */
  | { kind: 'stream'; head: Record<string, unknown>; listKey: string; countKey: string; items: AsyncIterable<unknown> }
  /** A live feed: its events, each checked as it is sent, until the signal `call` was given aborts. */
  | { kind: 'live'; items: AsyncIterable<LiveItem> };

/**
 * The one chokepoint every surface calls. In order: who may call (`admit`), the input
 * schema (and a list's `limit` and `cursor`), the caller's own device, the kill switch, the
 * operation itself, and its output schema — so no check can be forgotten on one surface. The
 * live grant and ceiling of a device function (`access: 'per-function'`) are checked by the
 * operation inside the transaction that queues the action, where they cannot change
 * underneath it. `defaultLimit` is a list's page size when the caller names none; `signal`
 * ends a live feed (the caller went away): a surface that serves one must pass it; an
 * operation that `holds` is handed it as `caller`.
 */
export async function call<O extends AnyOperation>(
  operation: O,
  ctx: OperationContext,
  raw: unknown,
  defaultLimit = PAGE_DEFAULT,
  signal?: AbortSignal,
): Promise<Answer<OutputOf<O>>> {
  admit(operation, ctx);
  const credential = ctx.credential;

  const unsafe = inputIssues(raw);
  if (unsafe.length > 0) throw new DomainError('validation_failed', 'The request holds text or nesting that cannot be stored as sent.', { issues: unsafe });

  // A list takes `limit` and `cursor` besides its own input; they are split off before the
  // operation's strict input schema sees the rest.
  const { limit, cursor, ...own } = operation.paged && isRecord(raw) ? raw : { limit: undefined, cursor: undefined, ...(raw ?? {}) };
  const issues: ErrorIssue[] = [];
  const paging = pageFields.safeParse({ limit, cursor });
  if (!paging.success) issues.push(...issuesFromZod(paging.error));
  const input = operation.input.safeParse(operation.paged ? own : (raw ?? {}));
  if (!input.success) issues.push(...issuesFromZod(input.error));
  let after: PageKey | null = null;
  if (operation.paged && paging.success && paging.data.cursor !== undefined && credential) {
    const key = decodeCursor(paging.data.cursor, operation.name, credential.workspaceId, operation.paged.key);
    if ('path' in key) issues.push(key);
    else after = key;
  }
  if (issues.length > 0 || !input.success || !paging.success) throw new DomainError('validation_failed', 'The request is not valid.', { issues });

  if (
    operation.ownDevice !== undefined &&
    credential?.kind === 'device' &&
    (input.data as Record<string, unknown>)[operation.ownDevice] !== credential.deviceId
  ) {
    throw new DomainError('forbidden', 'A device credential acts only for its own device.');
  }
  await assertControlsEnabled(operation, ctx);

  if (operation.paged) {
    const page = await operation.run({ ctx, credential, input: input.data, page: { limit: paging.data.limit ?? defaultLimit, after } });
    return {
      kind: 'page',
      data: checked(operation, page.items),
      nextCursor: page.next && credential ? encodeCursor(operation.name, credential.workspaceId, page.next) : null,
    };
  }
  if (operation.streamed) {
    const { listKey, countKey, item } = operation.streamed;
    const document = await operation.run({ ctx, credential, input: input.data });
    // The head is checked against the whole document's schema with an empty list, each item
    // against the item schema as it is read: the document is never whole in memory.
    checked(operation, { ...document.head, [listKey]: [], [countKey]: 0 });
    return { kind: 'stream', head: document.head, listKey, countKey, items: checkedItems(operation, item, document.items) };
  }
  if (operation.live) {
    if (!signal) throw new Error(`operation ${operation.name} is a live feed: call it with a signal that ends it`);
    return { kind: 'live', items: checkedEvents(operation, await operation.run({ ctx, credential, input: input.data, signal })) };
  }
  return { kind: 'value', data: checked(operation, await operation.run({ ctx, credential, input: input.data, caller: signal })) };
}

/**
 * `call` for a caller that wants one value: a list answers its first page at the largest
 * size, without its cursor (the MCP fixed tools `list_devices` and `list_functions` page
 * through `call` instead, src/mcp/fixed-tools.ts). A streamed document has no single value; its
 * surface streams it through `call`. The value has the operation's output type, so a caller
 * names the operation and needs no cast.
 */
export async function invoke<O extends AnyOperation>(operation: O, ctx: OperationContext, raw: unknown): Promise<OutputOf<O>> {
  const answer = await call(operation, ctx, raw, PAGE_MAX);
  if (answer.kind === 'stream' || answer.kind === 'live') throw new Error(`operation ${operation.name} streams its answer: call it through call()`);
  return answer.data;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checked<O extends AnyOperation>(operation: O, result: unknown): OutputOf<O> {
  const schema: O['output'] = operation.output;
  return parsedOutput(operation.name, schema, result);
}

/** Generic over the schema itself, so the parsed value keeps the schema's output type. */
function parsedOutput<S extends z.ZodType>(name: string, schema: S, result: unknown): z.output<S> {
  const output = schema.safeParse(result);
  if (!output.success) {
    // A bug in the operation, not the caller's fault: never send a shape the contract denies.
    throw new Error(`operation ${name} produced an invalid result: ${output.error.message}`);
  }
  return output.data;
}

async function* checkedItems(operation: AnyOperation, schema: z.ZodType, items: AsyncIterable<unknown>): AsyncIterable<unknown> {
  for await (const item of items) {
    const output = schema.safeParse(item);
    if (!output.success) throw new Error(`operation ${operation.name} produced an invalid item: ${output.error.message}`);
    yield output.data;
  }
}

/** A live feed's events checked against the operation's output as they are sent; heartbeats and the end pass as they are. */
async function* checkedEvents(operation: AnyOperation, items: AsyncIterable<LiveItem>): AsyncIterable<LiveItem> {
  for await (const item of items) {
    if ('heartbeat' in item || 'ended' in item) {
      yield item;
      continue;
    }
    yield { ...item, data: checked(operation, item.data) };
  }
}
