import type { HttpBindings } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Context } from 'hono';
import { whenClientGone } from './request.js';

/** A `text/event-stream` answer written as it goes (an MCP subscriptions/listen stream). */
export interface EventSink {
  /** Writes text (whole SSE frames); nothing once the answer has ended or the client has gone. */
  write(text: string): void;
  /** Ends the answer. */
  end(): void;
  /** Calls `listener` once when the client goes away before the answer has ended (at once if it already has). */
  onGone(listener: () => void): void;
}

/**
 * Opens a 200 event stream with `headers`. On Node the frames are written to the
 * ServerResponse itself, and those written in one turn of the event loop leave in one system
 * call (the head with the first of them): a short stream that tells three notifications and
 * its end costs three writes rather than one per frame, and neither a ReadableStream nor a
 * TextEncoder per stream. Elsewhere it is a ReadableStream. Either way the answer is `response`.
 */
export function openEventSink(c: Context, headers: Record<string, string>): { sink: EventSink; response: Response } {
  const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
  return outgoing ? nodeSink(c, outgoing, headers) : streamSink(c, headers);
}

function goneOnce(watch: (listener: () => void) => () => void) {
  let gone = false;
  const listeners: (() => void)[] = [];
  const stop = watch(() => {
    gone = true;
    for (const listener of listeners.splice(0)) listener();
  });
  return {
    isGone: () => gone,
    onGone(listener: () => void) {
      if (gone) listener();
      else listeners.push(listener);
    },
    stop,
  };
}

function nodeSink(c: Context, outgoing: HttpBindings['outgoing'], headers: Record<string, string>): { sink: EventSink; response: Response } {
  outgoing.writeHead(200, headers);
  const gone = goneOnce(whenClientGone(c));
  let ended = false;
  // No cork of our own: Node's first write of a turn corks the socket until the next tick, so
  // the frames of one turn (the head with the first) already leave in one system call. On
  // Node 24 a cork of the response holds the turn's frames in the response itself, and `end`
  // sends the zero-length chunk that ends the body before them: the client read an ended
  // stream without its final notification and result.
  const sink: EventSink = {
    write(text) {
      if (!ended && !gone.isGone() && !outgoing.destroyed) outgoing.write(text);
    },
    end() {
      if (ended) return;
      ended = true;
      gone.stop();
      if (!outgoing.destroyed) outgoing.end();
    },
    onGone: gone.onGone,
  };
  return { sink, response: RESPONSE_ALREADY_SENT };
}

function streamSink(c: Context, headers: Record<string, string>): { sink: EventSink; response: Response } {
  const encoder = new TextEncoder();
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let ended = false;
  let cancel = () => {};
  const stream = new ReadableStream<Uint8Array>({
    start: (streamController) => void (controller = streamController),
    cancel: () => cancel(),
  });
  const gone = goneOnce((listener) => {
    cancel = listener;
    return whenClientGone(c)(listener);
  });
  // A step on a stream the client may have closed already: its cancellation ends the subscription.
  const quietly = (step: () => void) => {
    try {
      step();
    } catch {
      // The client went away.
    }
  };
  const sink: EventSink = {
    write(text) {
      if (!ended && !gone.isGone()) quietly(() => controller.enqueue(encoder.encode(text)));
    },
    end() {
      if (ended) return;
      ended = true;
      gone.stop();
      quietly(() => controller.close());
    },
    onGone: gone.onGone,
  };
  return { sink, response: new Response(stream, { status: 200, headers }) };
}
