import type { Hono } from 'hono';
import { operations } from '../domain/registry.js';
import { EVENT_STREAM, eventStream } from '../http/document-stream.js';
import { onAnswerClosed, type HttpEnv } from '../http/request.js';
import type { Guards } from './guards.js';

/**
 * The console's live updates (docs/owners/console.md "Owner console"): the owner's event stream (the
 * `events.stream` operation, as `GET /v1/events` serves it) behind the console session, so the
 * page's EventSource, which sends the cookie and no bearer, can read it. The browser's
 * `Last-Event-ID` on reconnecting resumes after the last event it saw.
 */
export function mountConsoleEvents(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/events',
    guards.live(async (c, signed, feed) => {
      const lastEventIdHeader = c.req.header('last-event-id');
      const answer = await guards.call(
        signed,
        operations.streamOwnerEvents,
        lastEventIdHeader !== undefined ? { lastEventIdHeader } : {},
        undefined,
        feed.signal,
      );
      if (answer.kind !== 'live') throw new Error('events.stream answers a live feed');
      return c.body(
        // The feed's place is given back once the answer has let go of its connection.
        eventStream(
          answer,
          onAnswerClosed(c, () => feed.abort()),
          signed.ctx.log,
          signed.ctx.requestId,
        ),
        200,
        {
          'Content-Type': `${EVENT_STREAM}; charset=utf-8`,
          'Cache-Control': 'no-store',
          // Proxies that buffer responses (nginx) would hold the events back.
          'X-Accel-Buffering': 'no',
        },
      );
    }),
  );
}
