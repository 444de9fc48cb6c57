import type { Answer } from '../domain/invoke.js';
import type { Logger } from '../domain/context.js';

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
          log.error({ msg: 'streamed answer failed', requestId, error: error instanceof Error ? error.message : String(error) });
          controller.error(error);
        }
      },
      async cancel() {
        await items.return?.();
      },
    },
    // Nothing is read ahead of the socket's demand.
    { highWaterMark: 0 },
  );
}
