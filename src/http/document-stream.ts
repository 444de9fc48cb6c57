import type { Answer } from '../domain/invoke.js';
import type { Logger } from '../domain/context.js';
import type { LiveItem } from '../domain/operation.js';

type Streamed = Extract<Answer, { kind: 'stream' }>;

export const NDJSON = 'application/x-ndjson';

/** Text gathered before it is handed to the socket: large enough to keep per-write overhead low, small enough to stay bounded. */
const CHUNK_CHARS = 16 * 1024;

/**
 * Writes a streamed document as it is read, pulled by the socket: the next batch is read only
 * when the client has taken the previous one, so a slow client holds the export, not the
 * server's memory.
 *
 * - JSON: `{ "data": { …head, "<list>": [ …items ], "<count>": n } }`, the count after the
 *   list because it is the number of items actually written.
 * - NDJSON: the head object on the first line, one item per line, `{ "<count>": n }` last; a
 *   stream without that last line was cut short.
 *
 * A failure after the first byte cannot become an error envelope: the stream is aborted (the
 * client sees a truncated body, invalid JSON or no count line) and the error is logged with
 * the request id.
 */
export function documentStream(answer: Streamed, format: 'json' | 'ndjson', log: Logger, requestId: string): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const items = answer.items[Symbol.asyncIterator]();
  let count = 0;
  // Set when the client goes away: a read already under way then finishes into nothing.
  let cancelled = false;
  let text =
    format === 'ndjson'
      ? `${JSON.stringify(answer.head)}\n`
      : `{"data":{${JSON.stringify(answer.head).slice(1, -1)}${Object.keys(answer.head).length > 0 ? ',' : ''}${JSON.stringify(answer.listKey)}:[`;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          while (text.length < CHUNK_CHARS) {
            const next = await items.next();
            if (cancelled) return;
            if (next.done) {
              const counted = JSON.stringify({ [answer.countKey]: count });
              text += format === 'ndjson' ? `${counted}\n` : `],${counted.slice(1, -1)}}}`;
              controller.enqueue(encoder.encode(text));
              controller.close();
              return;
            }
            text += format === 'ndjson' ? `${JSON.stringify(next.value)}\n` : `${count > 0 ? ',' : ''}${JSON.stringify(next.value)}`;
            count += 1;
          }
          controller.enqueue(encoder.encode(text));
          text = '';
        } catch (error) {
          if (cancelled) return;
          log.error({ msg: 'streamed answer failed', requestId, error: error instanceof Error ? error.message : String(error) });
          controller.error(error);
        }
      },
      async cancel() {
        cancelled = true;
        await items.return?.();
      },
    },
    // Nothing is read ahead of the socket's demand.
    { highWaterMark: 0 },
  );
}

type Live = Extract<Answer, { kind: 'live' }>;

export const EVENT_STREAM = 'text/event-stream';

/**
 * Writes a live feed as Server-Sent Events (docs/reference/event-streams.md), pulled by the socket
 * like `documentStream`: each event as `id:`, `event:` and one `data:` line of JSON (JSON
 * text holds no line break), a heartbeat as a comment line, and a feed that ends on its own
 * (its credential expired or its session ended) says why in a last `: end <reason>` comment.
 * It opens with a comment, so the client has the status and headers at once rather than
 * with the first event. `end` is called once the stream is over for whatever reason (the
 * client went away, the feed ended or failed): it aborts the signal the feed was started with.
 *
 * A client going away is how every stream ends sooner or later, not a failure: the read under
 * way then finishes into nothing, and nothing is logged.
 */
export function eventStream(answer: Live, end: () => void, log: Logger, requestId: string): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const items = answer.items[Symbol.asyncIterator]();
  let cancelled = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        controller.enqueue(encoder.encode(': stream open\n\n'));
      },
      async pull(controller) {
        try {
          const next = await items.next();
          if (cancelled) return;
          if (next.done) {
            end();
            controller.close();
            return;
          }
          controller.enqueue(encoder.encode(sseText(next.value)));
        } catch (error) {
          end();
          if (cancelled) return;
          log.error({ msg: 'event stream failed', requestId, error: error instanceof Error ? error.message : String(error) });
          controller.error(error);
        }
      },
      async cancel() {
        cancelled = true;
        end();
        await items.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}

function sseText(item: LiveItem): string {
  if ('heartbeat' in item) return ': heartbeat\n\n';
  if ('ended' in item) return `: end ${item.ended.reason}: ${item.ended.message}\n\n`;
  return `id: ${item.id}\nevent: ${item.event}\ndata: ${JSON.stringify(item.data)}\n\n`;
}
