import type { HttpBindings } from '@hono/node-server';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Context } from 'hono';
import { whenClientGone } from './request.js';

/** A `text/event-stream` answer written as it goes (an MCP subscriptions/listen stream). */
export interface EventSink {
  /**
   * Writes text (whole SSE frames); nothing once the answer has ended or the client has gone.
   * False when the client has not yet taken what was written before: wait for `drained`
   * before writing more. When what earlier writes left waiting passes the sink's bound (a
   * writer that did not wait: keepalives, the last frame), the stream is cut instead (its
   * connection closed, `onGone` called).
   */
  write(text: string): boolean;
  /** Resolves once the client has taken what was written (at once when nothing waits), or the stream is over. */
  drained(): Promise<void>;
  /** Ends the answer. */
  end(): void;
  /** Calls `listener` once when the client goes away (or the stream is cut) before the answer has ended (at once if it already has). */
  onGone(listener: () => void): void;
  /**
   * Calls `listener` once when the answer has let go of the connection: its last byte taken by
   * the kernel, or the connection closed. A stream's place among its limits is freed here, not
   * when its last frame is queued: until then its bytes are still this process's memory.
   */
  onClosed(listener: () => void): void;
}

export interface SinkLimits {
  /** The most bytes waiting for the client (MCP_LISTEN_MAX_BUFFERED_KIB); past it the stream is cut. */
  maxBufferedBytes: number;
  /** Told when the stream was cut for passing the bound. */
  onCut?: (bufferedBytes: number) => void;
}

/**
 * Opens a 200 event stream with `headers`. On Node the frames are written to the
 * ServerResponse itself, and those written in one turn of the event loop leave in one system
 * call (the head with the first of them): a short stream that tells three notifications and
 * its end costs three writes rather than one per frame, and neither a ReadableStream nor a
 * TextEncoder per stream. Elsewhere it is a ReadableStream. Either way the answer is `response`.
 */
export function openEventSink(c: Context, headers: Record<string, string>, limits: SinkLimits): { sink: EventSink; response: Response } {
  const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
  return outgoing ? nodeSink(c, outgoing, headers, limits) : streamSink(c, headers, limits);
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

function nodeSink(
  c: Context,
  outgoing: HttpBindings['outgoing'],
  headers: Record<string, string>,
  limits: SinkLimits,
): { sink: EventSink; response: Response } {
  outgoing.writeHead(200, headers);
  const gone = goneOnce(whenClientGone(c));
  let ended = false;
  let waiting: Promise<void> | undefined;
  const over = () => ended || gone.isGone() || outgoing.destroyed;
  // No cork of our own: Node's first write of a turn corks the socket until the next tick, so
  // the frames of one turn (the head with the first) already leave in one system call. On
  // Node 24 a cork of the response holds the turn's frames in the response itself, and `end`
  // sends the zero-length chunk that ends the body before them: the client read an ended
  // stream without its final notification and result.
  const sink: EventSink = {
    write(text) {
      if (over()) return false;
      // What earlier writes left waiting, not the frame at hand: a frame waits whole until the
      // socket has sent it, for a client that reads too.
      if (outgoing.writableLength <= limits.maxBufferedBytes) return outgoing.write(text);
      // The client is not reading: what waits for it is cut loose with its connection, whose
      // close ends the subscription (onGone) and frees its place (onClosed).
      limits.onCut?.(outgoing.writableLength);
      outgoing.destroy();
      return false;
    },
    drained() {
      if (over() || !outgoing.writableNeedDrain) return Promise.resolve();
      waiting ??= new Promise<void>((resolve) => {
        const done = () => {
          outgoing.off('drain', done);
          outgoing.off('close', done);
          waiting = undefined;
          resolve();
        };
        outgoing.once('drain', done);
        outgoing.once('close', done);
      });
      return waiting;
    },
    end() {
      if (ended) return;
      ended = true;
      gone.stop();
      if (!outgoing.destroyed) outgoing.end();
    },
    onGone: gone.onGone,
    onClosed(listener) {
      if (outgoing.closed) listener();
      else outgoing.once('close', listener);
    },
  };
  return { sink, response: RESPONSE_ALREADY_SENT };
}

/** What a ReadableStream sink holds before it tells its writer to wait, as a socket's default high-water mark does. */
const STREAM_HIGH_WATER_BYTES = 16 * 1024;

function streamSink(c: Context, headers: Record<string, string>, limits: SinkLimits): { sink: EventSink; response: Response } {
  const encoder = new TextEncoder();
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let ended = false;
  let cancel = () => {};
  let pulled: (() => void) | undefined;
  const closedListeners: (() => void)[] = [];
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    for (const listener of closedListeners.splice(0)) listener();
  };
  const stream = new ReadableStream<Uint8Array>(
    {
      start: (streamController) => void (controller = streamController),
      pull: () => {
        pulled?.();
        pulled = undefined;
      },
      cancel: () => {
        cancel();
        close();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: STREAM_HIGH_WATER_BYTES }),
  );
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
      if (ended || gone.isGone()) return false;
      const queued = STREAM_HIGH_WATER_BYTES - (controller.desiredSize ?? 0);
      if (queued <= limits.maxBufferedBytes) {
        quietly(() => controller.enqueue(encoder.encode(text)));
        return (controller.desiredSize ?? 0) > 0;
      }
      limits.onCut?.(queued);
      quietly(() => controller.error(new Error('the client did not read the stream')));
      cancel();
      close();
      return false;
    },
    drained() {
      if (ended || gone.isGone() || (controller.desiredSize ?? 0) > 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const previous = pulled;
        pulled = () => {
          previous?.();
          resolve();
        };
        gone.onGone(resolve);
      });
    },
    end() {
      if (ended) return;
      ended = true;
      gone.stop();
      quietly(() => controller.close());
      close();
    },
    onGone: gone.onGone,
    onClosed(listener) {
      if (closed) listener();
      else closedListeners.push(listener);
    },
  };
  return { sink, response: new Response(stream, { status: 200, headers }) };
}
