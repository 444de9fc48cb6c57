/**
 * A Server-Sent Events client over `fetch` streaming, parsing the stream as the WHATWG
 * EventSource does (fields `id`, `event`, `data`, comment lines, a blank line dispatches),
 * but leaving reconnection to the test: a test drops and resumes the connection itself,
 * with the `Last-Event-ID` it chooses, and sees the status and headers of each attempt
 * (an EventSource hides a 401 or 429 behind a generic error event).
 */
export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}

export interface SseStream {
  status: number;
  headers: Headers;
  /** Comment lines received so far (without the leading colon and space). */
  comments: string[];
  /** The next event in order; rejects after `timeoutMs` or when the stream ends first. */
  next(timeoutMs?: number): Promise<SseEvent>;
  /** Waits for the next event whose parsed data matches, skipping the others (kept in `skipped`). */
  nextWhere(match: (event: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>;
  skipped: SseEvent[];
  /** Resolves when the server ends the stream: `clean` false when the connection broke instead. */
  ended: Promise<{ clean: boolean }>;
  /** Drops the connection, as a client going away does. */
  close(): void;
}

export async function openSse(url: string, options: { token?: string; lastEventId?: string; headers?: Record<string, string> } = {}): Promise<SseStream> {
  const controller = new AbortController();
  const headers: Record<string, string> = { accept: 'text/event-stream', ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
  const response = await fetch(url, { headers, signal: controller.signal });
  const queue: SseEvent[] = [];
  const comments: string[] = [];
  let waiter: (() => void) | undefined;
  let finished: { clean: boolean } | undefined;
  const notify = () => {
    const w = waiter;
    waiter = undefined;
    w?.();
  };

  const ended = (async () => {
    if (!response.body) return { clean: true };
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let current: { id?: string; event?: string; data: string[] } = { data: [] };
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return { clean: true };
        buffer += value;
        let newline: number;
        while ((newline = buffer.search(/\r\n|\n|\r/)) !== -1) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
          if (line === '') {
            if (current.data.length > 0) {
              queue.push({ id: current.id, event: current.event ?? 'message', data: current.data.join('\n') });
              notify();
            }
            current = { data: [] };
          } else if (line.startsWith(':')) {
            comments.push(line.slice(1).trimStart());
          } else {
            const colon = line.indexOf(':');
            const field = colon === -1 ? line : line.slice(0, colon);
            const fieldValue = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'id') current.id = fieldValue;
            else if (field === 'event') current.event = fieldValue;
            else if (field === 'data') current.data.push(fieldValue);
          }
        }
      }
    } catch {
      return { clean: false };
    }
  })().then((result) => {
    finished = result;
    notify();
    return result;
  });

  async function next(timeoutMs = 10_000): Promise<SseEvent> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const event = queue.shift();
      if (event) return event;
      if (finished) throw new Error(`the stream ended (${finished.clean ? 'cleanly' : 'broken'}) before the next event`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no event within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  const skipped: SseEvent[] = [];
  return {
    status: response.status,
    headers: response.headers,
    comments,
    next,
    skipped,
    async nextWhere(match, timeoutMs = 10_000) {
      for (;;) {
        const event = await next(timeoutMs);
        if (match(event)) return event;
        skipped.push(event);
      }
    },
    ended,
    close: () => controller.abort(),
  };
}
