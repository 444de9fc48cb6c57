import { z } from 'zod';
import { findSession } from '../store/owner-sessions.js';
import { journalBounds, listWorkspaceEvents, newestWorkspaceEventId } from '../store/event-journal.js';
import type { OperationContext, CredentialOf, LiveStreams, StreamSlot } from './context.js';
import { DomainError } from './errors.js';
import { defineLiveOperation, type FeedEnd, type LiveItem } from './operation.js';
import { eventIds, resumePoint } from './event-ids.js';
import { timestamp } from './schemas.js';
import { toWorkspaceEvent, workspaceEvent } from './event-catalogue.js';

/**
 * The owner's live event stream (docs/reference/events.md "Owner events"): the workspace event journal, read
 * in order from where the owner left off, as events are written.
 *
 * The journal is the source of truth; the event hub only says "read it now". Each stream
 * reads the journal after its last sent id whenever a service event of its workspace is
 * published (on this instance, or on any with a shared bus), and at least every poll
 * interval, so a change the hub never announced (another instance without a shared bus)
 * still arrives. Journal ids are given in commit order (max(id) + 1, taken under the
 * database's single write lock), so reading `id > last sent` never skips one; the client sees
 * them encrypted (event-ids.ts).
 */

/** Rows read per journal query: a long replay goes out in bounded batches. */
const BATCH = 100;

export const resetEvent = z.object({
  id: z.string().describe('Resume after this id: the stream continues from here.'),
  type: z.literal('reset'),
  createdAt: timestamp,
  data: z.object({
    reason: z
      .enum(['events_lost', 'unknown_event_id'])
      .describe(
        '`events_lost`: the id is older than the replay window and events after it were pruned; `unknown_event_id`: the id was never given by this service.',
      ),
    message: z.string(),
  }),
});

export const ownerStreamEvent = z.union([workspaceEvent, resetEvent]);

/** How long a client refused for a full instance or workspace waits before trying again. */
const RETRY_AFTER_SECONDS = 5;

export function createLiveStreams(): LiveStreams {
  const open = new Map<string, Set<AbortController>>();
  let total = 0;
  let closed = false;
  const closing = new AbortController();
  return {
    closing: closing.signal,
    open(workspaceId, limits, caller) {
      if (closed) throw new DomainError('unavailable', 'The service is shutting down: connect again.', { retryAfterSeconds: RETRY_AFTER_SECONDS });
      const slots = open.get(workspaceId) ?? new Set<AbortController>();
      if (slots.size >= limits.maxStreamsPerWorkspace) {
        throw new DomainError(
          'capacity_exceeded',
          `This workspace already has ${limits.maxStreamsPerWorkspace} open event streams (EVENTS_MAX_STREAMS_PER_WORKSPACE).`,
          { retryAfterSeconds: RETRY_AFTER_SECONDS },
        );
      }
      // Every stream holds a socket, a subscription and a journal read per poll: the instance
      // bounds them all together, so many workspaces each under their own limit cannot exhaust it.
      if (total >= limits.maxStreams) {
        throw new DomainError(
          'unavailable',
          `This instance already serves ${limits.maxStreams} event streams (EVENTS_MAX_STREAMS): connect again in ${RETRY_AFTER_SECONDS} s, to another instance if there is one.`,
          { retryAfterSeconds: RETRY_AFTER_SECONDS },
        );
      }
      const controller = new AbortController();
      slots.add(controller);
      open.set(workspaceId, slots);
      total += 1;
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        total -= 1;
        caller.removeEventListener('abort', release);
        controller.abort();
        slots.delete(controller);
        if (slots.size === 0 && open.get(workspaceId) === slots) open.delete(workspaceId);
      };
      if (caller.aborted) release();
      else caller.addEventListener('abort', release, { once: true });
      return { signal: controller.signal, release };
    },
    closeAll() {
      closed = true;
      for (const slots of open.values()) for (const controller of slots) controller.abort(SHUTDOWN);
      closing.abort(SHUTDOWN);
    },
  };
}

/** The abort reason of a stream the service ended because it shuts down. */
const SHUTDOWN = 'shutdown';

const ENDS = {
  credential_expired: {
    reason: 'credential_expired',
    message: 'The owner token or console session that opened this stream expired: reconnect with a fresh one.',
  },
  session_ended: { reason: 'session_ended', message: 'The console session that opened this stream was signed out: sign in again.' },
  shutdown: { reason: 'shutdown', message: 'This instance is shutting down: reconnect with Last-Event-ID to resume.' },
} as const satisfies Record<string, FeedEnd>;

/**
 * Whether the credential that opened a stream still holds: its expiry passed, or the console
 * session it came from is gone from the database (signed out on any instance) or expired.
 * The database is the fact; nothing announced is believed.
 */
async function credentialEnd(ctx: OperationContext, credential: CredentialOf<'owner'>): Promise<FeedEnd | undefined> {
  const now = ctx.clock.now();
  if (credential.expiresAt !== undefined && credential.expiresAt <= now) return ENDS.credential_expired;
  if (credential.sessionHash === undefined) return undefined;
  const session = await findSession(ctx.db, credential.sessionHash);
  if (!session) return ENDS.session_ended;
  return session.expiresAt <= now ? ENDS.credential_expired : undefined;
}

/** A flag that a waiter can sleep on until it is raised or a timeout passes. */
function wakeFlag() {
  let raised = false;
  let wake: (() => void) | undefined;
  return {
    raise() {
      raised = true;
      wake?.();
    },
    lower() {
      raised = false;
    },
    /** Resolves true when raised (now or later), false when `ms` passed first. */
    wait(ms: number): Promise<boolean> {
      if (raised) return Promise.resolve(true);
      return new Promise((resolve) => {
        const timer = setTimeout(() => finish(false), ms);
        const finish = (woken: boolean) => {
          clearTimeout(timer);
          wake = undefined;
          resolve(woken);
        };
        wake = () => finish(true);
      });
    },
  };
}

type Start = { after: number; reset?: z.infer<typeof resetEvent> };

/**
 * Where a stream begins: after the event the client names, or at the journal's end ("now")
 * for a fresh connection. An id older than the kept journal, or one this workspace was never
 * shown, begins at the end with a `reset` event first: the client must read the current state
 * again. Ids are shown and read through event-ids.ts: the journal's own numbers, the `first`
 * and `last` of the whole service among them, never reach the client.
 */
async function startingPoint(ctx: OperationContext, workspaceId: string, resumeAfter: string | undefined): Promise<Start> {
  const { first, last } = await journalBounds(ctx.db);
  if (resumeAfter === undefined) return { after: last };
  const point = await resumePoint(ctx, workspaceId, resumeAfter);
  if (point !== 'unknown' && point >= first - 1 && point <= last) return { after: point };
  const lost = point !== 'unknown' && point < first - 1;
  // The reset's id is where the stream goes on from, but not the journal's end: resuming after
  // it reads the same events (the stream is the workspace's), while the end moves with every
  // workspace's writes, and its id, shown again, would tell whether anyone wrote anything. So it
  // is the workspace's own newest kept event, or with none kept the last pruned one, which
  // moves only when housekeeping prunes.
  const own = (await newestWorkspaceEventId(ctx.db, workspaceId, last)) ?? first - 1;
  return {
    after: last,
    reset: {
      id: (await eventIds(ctx)).show(workspaceId, own),
      type: 'reset',
      createdAt: ctx.clock.now(),
      data: lost
        ? { reason: 'events_lost', message: `Events after ${resumeAfter} are older than the replay window and were dropped: read the current state again.` }
        : { reason: 'unknown_event_id', message: `No event ${resumeAfter} was ever sent to this workspace: read the current state again.` },
    },
  };
}

async function* follow(ctx: OperationContext, credential: CredentialOf<'owner'>, start: Start, slot: StreamSlot): AsyncGenerator<LiveItem> {
  const { heartbeatMs, pollMs } = ctx.settings.ownerEvents;
  const { workspaceId, expiresAt } = credential;
  const flag = wakeFlag();
  // Subscribed before the first read: a change committed during the read raises the flag
  // and is read on the next round, never missed.
  const unsubscribe = ctx.events.subscribe((event) => {
    if ('workspaceId' in event && event.workspaceId === workspaceId) flag.raise();
  });
  const onEnd = () => flag.raise();
  slot.signal.addEventListener('abort', onEnd, { once: true });
  try {
    const ids = await eventIds(ctx);
    let lastSent = performance.now();
    // The credential was checked at connect; it is checked again once per poll interval, so
    // a sign-out on any instance ends the stream within EVENTS_POLL_SECONDS.
    let checkAt = performance.now() + pollMs;
    if (start.reset) yield { id: start.reset.id, event: 'reset', data: start.reset };
    let after = start.after;
    // The stream wakes at its credential's expiry, however quiet it is.
    const remaining = () => (expiresAt === undefined ? Infinity : expiresAt - ctx.clock.now());
    while (!slot.signal.aborted) {
      if (performance.now() >= checkAt || remaining() <= 0) {
        const ended = await credentialEnd(ctx, credential);
        if (ended) {
          yield { ended };
          return;
        }
        checkAt = performance.now() + pollMs;
      }
      flag.lower();
      const rows = await listWorkspaceEvents(ctx.db, workspaceId, after, BATCH);
      for (const row of rows) {
        if (slot.signal.aborted || remaining() <= 0) break;
        after = row.id;
        const event = toWorkspaceEvent(row, ids);
        yield { id: event.id, event: row.type, data: event };
        lastSent = performance.now();
      }
      if (rows.length === BATCH) continue;
      const quietFor = performance.now() - lastSent;
      if (quietFor >= heartbeatMs) {
        yield { heartbeat: true };
        lastSent = performance.now();
        continue;
      }
      await flag.wait(Math.max(0, Math.min(pollMs, heartbeatMs - quietFor, remaining())));
    }
    if (slot.signal.reason === SHUTDOWN) yield { ended: ENDS.shutdown };
  } finally {
    // The place is not given back here: the last events may still wait for a client that
    // stopped reading. It is given back when the caller's signal aborts, which the surface
    // does once the answer has let go of its connection (`LiveStreams.open`).
    unsubscribe();
    slot.signal.removeEventListener('abort', onEnd);
  }
}

/** An id the stream sent (or, from before ids were encrypted, a plain number: event-ids.ts). */
const eventId = z
  .string()
  .regex(/^(\d{1,15}|[A-Za-z0-9_-]{22})$/, 'must be an event id the stream sent')
  .optional();

export const streamOwnerEvents = defineLiveOperation({
  name: 'events.stream',
  title: 'Stream workspace events',
  description:
    'Server-Sent Events of the owner\'s workspace: actions created and changed, approvals requested, grants given and revoked, devices online, offline and revoked (docs/reference/events.md "Owner events"). A fresh connection starts now; `Last-Event-ID` (or `lastEventId`) resumes after that event from the replay window (EVENTS_RETENTION_HOURS), and an id older than the window begins with a `reset` event. Heartbeat comments every EVENTS_HEARTBEAT_SECONDS; the stream ends when the owner token that opened it expires (reconnect with a fresh one), with a last `: end <reason>: <message>` comment (docs/reference/event-streams.md); 429 beyond EVENTS_MAX_STREAMS_PER_WORKSPACE open streams of the workspace, 503 beyond EVENTS_MAX_STREAMS on the instance.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/events', headers: { 'last-event-id': 'lastEventIdHeader' } }],
  input: z.strictObject({
    lastEventId: eventId.describe('Resume after this event id, for clients that cannot set the `Last-Event-ID` header; the header wins when both are sent.'),
    lastEventIdHeader: eventId.describe('Resume after this event id (what an EventSource sends when it reconnects).'),
  }),
  output: ownerStreamEvent,
  live: {
    format:
      'Server-Sent Events: per event `id: <id>`, `event: <type>`, `data: <the event as JSON>` and a blank line; `: heartbeat` comment lines while nothing happens; a stream that ends on its own (`credential_expired`, `session_ended`, `shutdown`) ends with a `: end <reason>: <message>` comment.',
  },
  async run({ ctx, credential, input, signal }) {
    const slot = ctx.streams.open(credential.workspaceId, ctx.settings.ownerEvents, signal);
    try {
      const resumeAfter = input.lastEventIdHeader ?? input.lastEventId;
      const start = await startingPoint(ctx, credential.workspaceId, resumeAfter);
      return follow(ctx, credential, start, slot);
    } catch (error) {
      slot.release();
      throw error;
    }
  },
});
