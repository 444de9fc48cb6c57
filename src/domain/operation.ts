import type { z } from 'zod';
import type { OperationContext, CredentialKind, CredentialOf, Surface } from './context.js';
import type { KeyPart, Page, PageQuery } from './paging.js';

/**
 * What an agent credential's ceiling must allow for an operation:
 * - `none`: the operation is not open to agents;
 * - `read`: any agent credential may call it (every ceiling includes read);
 * - `per-function`: depends on the kind of the device function named in the input (a
 *   control function needs `act`), checked live inside the operation's own transaction
 *   (`authorizeFunction` in src/domain/functions.ts), where the grant is read too.
 */
export type AccessRequirement = 'none' | 'read' | 'per-function';

/**
 * How the operation touches the world, for callers deciding whether to ask a human first.
 * MCP tools advertise these as their annotations (readOnlyHint, destructiveHint, …).
 */
export interface OperationHints {
  /** Changes nothing: safe to call at any time. A GET route must be read-only. */
  readOnly: boolean;
  /** May undo or overwrite something, or move a physical device (only meaningful when not read-only). */
  destructive?: boolean;
  /** Repeating the same call has no further effect (an idempotency key replays, a cancel stays cancelled). */
  idempotent?: boolean;
  /** Reaches beyond this service's own records: a device acts in the physical world. */
  openWorld?: boolean;
}

/** One REST route of an operation; `{name}` path segments become input fields of the same name. */
export interface RestRoute {
  method: 'GET' | 'POST';
  path: string;
  /** Success status; 200 unless stated. */
  status?: 200 | 201;
  /** Health answers a raw object, not `{ data }` (docs/reference/rules.md "Envelopes"). */
  unwrapped?: boolean;
  /** Request headers copied into input fields: header name → field. */
  headers?: Readonly<Record<string, string>>;
  /** Input fields a POST takes from its query string, not its body (a GET takes every field there). */
  query?: readonly string[];
  /** A legacy alias kept for old clients; the OpenAPI document marks it deprecated. */
  deprecated?: boolean;
  /** The most bytes its body may hold, when not the 16 KiB every other request keeps to. */
  maxBodyBytes?: number;
}

/** The operation's fixed MCP tool (device functions are tools of their own, src/mcp/device-tools.ts). */
export interface McpTool {
  /** Lowercase letters, digits and `_` only, so every LLM API accepts it; never `__` (device tools' separator). */
  name: string;
  /** `structuredContent` must be an object: a list result is put under this key. */
  listKey?: string;
  /**
   * The `inputSchema` the tool advertises when the operation's input cannot be advertised as
   * it is: a schema an LLM API's strict mode can take (closed objects only, no free-form one).
   * Advertised only: a call is still validated by the operation's `input`, which must take
   * every value this schema admits (test/service/registry.test.ts checks a sample).
   */
  advertisedInput?: z.ZodType;
}

export interface OperationArgs<K extends CredentialKind | 'public', I> {
  ctx: OperationContext;
  credential: K extends CredentialKind ? CredentialOf<K> : null;
  input: I;
  /** Aborts when the caller went away: handed to an operation that `holds` (REST passes the request's). */
  caller?: AbortSignal;
}

/**
 * An operation: everything every surface needs to know about one thing the service does,
 * declared once. `invoke` (src/domain/invoke.ts) enforces the declarations — credential
 * kinds, where OAuth tokens are accepted, the caller's own device, the kill switch — so the
 * operation's `run` holds only its own logic; the REST route table, the OpenAPI document,
 * the MCP fixed tools and the authorization matrix are all built from these descriptors.
 */
interface OperationBase<K extends CredentialKind | 'public', I extends z.ZodType, O extends z.ZodType> {
  /** `resource.verb`, e.g. `setupTokens.create`. */
  name: string;
  /** A short human title: the MCP tool title and the OpenAPI summary. */
  title: string;
  description: string;
  /** Credential kinds that may call it; `['public']` for no credential at all. */
  credentials: readonly K[];
  /**
   * Where an OAuth access token (an agent credential issued by /oauth/token) is accepted.
   * Declared by every operation open to agents, and the same on both surfaces wherever the
   * operation has both: a REST route and its MCP tool are one operation with one credential rule.
   */
  oauth?: readonly Surface[];
  access: AccessRequirement;
  hints: OperationHints;
  /**
   * Queues device actions: refused with 503 `device_controls_disabled` while the kill switch
   * (DEVICE_CONTROLS_ENABLED=false) is thrown.
   */
  queuesDeviceActions?: boolean;
  /**
   * Its `run` refuses in a workspace whose owner paused device control itself (the statement
   * that queues checks the switch, and a refusal reads it to name the reason, before any other
   * reason): `invoke` then checks only the kill switch, and a plain request reads no switch.
   */
  checksPause?: true;
  /** The input field naming a device that must be the calling device's own (device credentials). */
  ownDevice?: string;
  /** Its REST routes: the route first, legacy aliases after it. None for MCP-only operations. */
  rest: readonly RestRoute[];
  /** Its fixed MCP tool, if agents should have one. */
  mcp?: McpTool;
  /**
   * The input field that, when given, lets it hold the request open until something happens
   * (the long-poll `next`): its `run` is then handed `caller`, so it stops waiting, and hands
   * out nothing, once the caller went away. Without the field the request is not watched.
   */
  holds?: string;
  input: I;
  output: O;
}

/** An operation that answers one value, its `output`. */
export interface PlainOperation<
  K extends CredentialKind | 'public' = CredentialKind | 'public',
  I extends z.ZodType = z.ZodType,
  O extends z.ZodType = z.ZodType,
> extends OperationBase<K, I, O> {
  paged?: undefined;
  streamed?: undefined;
  live?: undefined;
  run(args: OperationArgs<K, z.output<I>>): Promise<z.input<O>>;
}

/**
 * A list: `output` is the array one page holds. `invoke` takes `limit` and `cursor` besides
 * the input and hands `run` a page request; `run` answers the page and the sort key of its
 * last item when more follow, which `invoke` turns into an opaque cursor (src/domain/paging.ts).
 * Surfaces render that cursor their own way: REST as a `Link: <…>; rel="next"` header.
 */
export interface PagedOperation<
  K extends CredentialKind | 'public' = CredentialKind | 'public',
  I extends z.ZodType = z.ZodType,
  O extends z.ZodType = z.ZodType,
> extends OperationBase<K, I, O> {
  /** The types of the sort key's parts, which a cursor must match to be read. */
  paged: { key: readonly KeyPart[] };
  streamed?: undefined;
  live?: undefined;
  run(args: OperationArgs<K, z.output<I>> & { page: PageQuery }): Promise<Page<z.input<O>>>;
}

/** The fields of a streamed document other than its list and count, and the list read lazily. */
export interface StreamedDocument<T> {
  head: Record<string, unknown>;
  items: AsyncIterable<T>;
}

/**
 * A document too large to hold: `output` describes it whole (for the OpenAPI document), but
 * `run` answers its other fields and its list as an async iterable the store fills in
 * bounded batches. Surfaces write it out as it is read, with the count of the items written
 * after them (src/http/document-stream.ts).
 */
export interface StreamedOperation<
  K extends CredentialKind | 'public' = CredentialKind | 'public',
  I extends z.ZodType = z.ZodType,
  O extends z.ZodType = z.ZodType,
> extends OperationBase<K, I, O> {
  paged?: undefined;
  /** The output's list field, its count field, and the schema each item is checked against. */
  streamed: { listKey: string; countKey: string; item: z.ZodType };
  live?: undefined;
  run(args: OperationArgs<K, z.output<I>>): Promise<StreamedDocument<unknown>>;
}

/** One item of a live feed: an event with its id and type, or a beat that says the feed is alive while nothing happens. */
/** Why a live feed ended on its own, told to the client last (the client going away needs no word). */
export interface FeedEnd {
  reason: 'credential_expired' | 'session_ended' | 'shutdown';
  message: string;
}

export type LiveItem = { id: string; event: string; data: unknown } | { heartbeat: true } | { ended: FeedEnd };

/**
 * A feed that does not end: `run` answers an async iterable that yields events as they
 * happen until `signal` aborts (the caller went away) or the service shuts down. `output`
 * is one event's schema: each event's `data` is checked against it as it is sent. REST
 * writes it as Server-Sent Events (src/http/document-stream.ts); it has no MCP tool.
 */
export interface LiveOperation<
  K extends CredentialKind | 'public' = CredentialKind | 'public',
  I extends z.ZodType = z.ZodType,
  O extends z.ZodType = z.ZodType,
> extends OperationBase<K, I, O> {
  paged?: undefined;
  streamed?: undefined;
  /** The wire format's documentation (OpenAPI): how events and heartbeats are written. */
  live: { format: string };
  run(args: OperationArgs<K, z.output<I>> & { signal: AbortSignal }): Promise<AsyncIterable<LiveItem>>;
}

export type Operation<K extends CredentialKind | 'public' = CredentialKind | 'public', I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> =
  PlainOperation<K, I, O> | PagedOperation<K, I, O> | StreamedOperation<K, I, O> | LiveOperation<K, I, O>;

export function defineOperation<K extends CredentialKind | 'public', I extends z.ZodType, O extends z.ZodType>(
  operation: PlainOperation<K, I, O>,
): PlainOperation<K, I, O> {
  return operation;
}

export function definePagedOperation<K extends CredentialKind | 'public', I extends z.ZodType, O extends z.ZodType>(
  operation: PagedOperation<K, I, O>,
): PagedOperation<K, I, O> {
  return operation;
}

export function defineStreamedOperation<K extends CredentialKind | 'public', I extends z.ZodType, O extends z.ZodType>(
  operation: StreamedOperation<K, I, O>,
): StreamedOperation<K, I, O> {
  return operation;
}

export function defineLiveOperation<K extends CredentialKind | 'public', I extends z.ZodType, O extends z.ZodType>(
  operation: LiveOperation<K, I, O>,
): LiveOperation<K, I, O> {
  return operation;
}

// The registry holds operations of every credential and schema type; `invoke` narrows them.
// `any` for the credential kind: the registry holds operations of every kind, and `run`
// is contravariant in it, so no narrower type admits them all. `invoke` checks the kind.
export type AnyOperation = Operation<any, z.ZodType, z.ZodType>;
