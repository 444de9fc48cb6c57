import type { Context } from 'hono';
import { agentStandingOf } from '../../domain/agent-tasks.js';
import type { CredentialOf, OperationContext } from '../../domain/context.js';
import { DomainError } from '../../domain/errors.js';
import { onJournal, onSessionResources } from '../../domain/event-hub.js';
import { dropSessionState, sessionStateDevices } from '../../domain/session-resources.js';
import { openEventSink, type EventSink } from '../../http/event-sink.js';
import type { HttpEnv } from '../../http/request.js';
import { envelope } from '../refusals.js';
import type { ListenLimits, ListenSlots } from './slots.js';
import { stateResourceUri, stateWatcher } from './state-watch.js';
import { streamTimers } from './subscription.js';

/**
 * The GET stream of a 2025-era session (Streamable HTTP, 2025-03-26 and 2025-06-18): where the
 * server tells the client `notifications/resources/updated` for the `device://{deviceId}/state`
 * resources the session subscribed to (`resources/subscribe`, resource-subscriptions.ts). What
 * the session follows is read from the database (migration 0041), so the subscribe may reach
 * another instance than the stream, and a stream that reopens (after its lifetime, or a
 * dropped connection) follows the same resources without the client subscribing again.
 *
 * It takes a place among the subscriptions/listen streams (slots.ts: per connection, per
 * workspace, per instance) and lasts as long at most. It ends when the caller's connection or
 * OAuth token goes (read every 2 s, and at the token's expiry), and forgets a resource whose
 * grant went. A newer stream of the same session on this instance replaces the older one,
 * so a message is told on one stream only.
 */

type Notify = (method: string, params: Record<string, unknown>) => Promise<void>;

export interface SessionStreamDeps {
  slots: ListenSlots;
  limits: ListenLimits;
}

export function createSessionStreams(deps: SessionStreamDeps) {
  // The open stream of each session on this instance, by connection and session nonce.
  const open = new Map<string, () => void>();
  return (c: Context<HttpEnv>, ctx: OperationContext, credential: CredentialOf<'agent'>, session: string): Response => {
    let release: () => void;
    try {
      release = deps.slots.take(credential);
    } catch (error) {
      if (error instanceof DomainError) return envelope(c, error);
      throw error;
    }
    const key = `${credential.connectionId}\n${session}`;
    open.get(key)?.();
    const { sink, response } = openEventSink(
      c,
      { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' },
      {
        maxBufferedBytes: deps.limits.maxBufferedBytes,
        onCut: (bufferedBytes) => ctx.log.info({ msg: 'mcp session stream cut: its client did not read it', requestId: ctx.requestId, bufferedBytes }),
      },
    );
    const end = followSession({ ctx, credential, session, sink, lifetimeMs: deps.limits.maxLifetimeMs, release });
    const ended = () => {
      if (open.get(key) === ended) open.delete(key);
      end();
    };
    open.set(key, ended);
    sink.onGone(ended);
    return response;
  };
}

interface FollowOptions {
  ctx: OperationContext;
  credential: CredentialOf<'agent'>;
  session: string;
  sink: EventSink;
  lifetimeMs: number;
  release: () => void;
}

/** Follows the session's subscriptions on its stream until the stream ends; answers its end. */
function followSession(o: FollowOptions): () => void {
  const { ctx, credential, session, sink } = o;
  let closed = false;
  let work: Promise<void> = Promise.resolve();
  const serially = (job: () => Promise<void>) => {
    work = work
      .then(() => (closed ? undefined : job()))
      .catch((error: unknown) => ctx.log.warn({ msg: 'mcp session stream check failed', error: String(error) }));
  };
  const notify: Notify = async (method, params) => {
    if (!sink.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method, params })}\n\n`)) await sink.drained();
  };
  const states = stateWatcher(ctx, credential, [], serially, notify);
  const timers: NodeJS.Timeout[] = [];
  const stops: (() => void)[] = [];
  const teardown = () => {
    if (closed) return;
    closed = true;
    for (const stop of stops) stop();
    states.close();
    for (const timer of timers) clearTimeout(timer);
    sink.end();
  };
  // What the session subscribed to now, as stored: a subscribe or unsubscribe anywhere announces it.
  // Each change of how many it follows is an SSE comment (clients ignore comments): a test, or
  // an operator with curl, sees when a subscription has reached the stream.
  let told = -1;
  const sync = async () => {
    await states.follow((await sessionStateDevices(ctx, credential, session)).map(stateResourceUri));
    if (states.size() !== told) sink.write(`: following ${(told = states.size())}\n\n`);
  };
  let queued = false;
  const recheck = () => {
    if (queued) return;
    queued = true;
    serially(async () => {
      queued = false;
      if (!(await agentStandingOf(ctx, credential)).live) {
        // The token or connection is gone: so is what it subscribed to.
        await dropSessionState(ctx, credential, session);
        return teardown();
      }
      // A revoked or expired grant ends the subscriptions it let the caller hold.
      const dropped = await states.recheck();
      if (dropped.length > 0) await dropSessionState(ctx, credential, session, dropped);
      await sync();
    });
  };
  sink.onClosed(o.release);
  stops.push(onSessionResources(ctx.events, credential.workspaceId, session, () => serially(sync)));
  // A grant revoked journals: the stream looks at once, not at its next recheck.
  stops.push(onJournal(ctx.events, credential.workspaceId, recheck));
  serially(sync);
  timers.push(...streamTimers(o, { keepalive: () => sink.write(': keepalive\n\n'), recheck, end: () => serially(async () => teardown()) }));
  return teardown;
}
