import { WebSocket } from 'ws';
import {
  ApiError,
  deviceApi,
  type DeviceApi,
  type DeviceCommand,
  type DeviceCredentials,
  type Manifest,
  type RequestLimits,
  type ResultReport,
  type UrlSource,
} from './http.js';

/** What a handler gets besides the arguments. */
export interface CommandContext {
  actionId: string;
  /** The device that runs the command: this device or, on a gateway, a child. */
  deviceId: string;
  /** The child's manifest key on a gateway; null for the device itself. */
  childKey: string | null;
  capability: string;
  /** The action's deadline (Unix ms): a result after it is still stored, but the action stays `expired`. */
  expiresAt: number;
  /**
   * Aborted at the deadline, when the device stops, or when the service recalls the command
   * (a cancel frame: the permission it was requested under was withdrawn; `signal.reason` is
   * then a `CommandRecalled`). Stop what can still be stopped; the report of what was done is
   * still sent and stored.
   */
  signal: AbortSignal;
}

/** The reason of a handler's aborted signal when the service recalled its command. */
export class CommandRecalled extends Error {
  constructor(readonly reason: string) {
    super(`The service recalled this command (${reason}).`);
    this.name = 'CommandRecalled';
  }
}

/** Returns the result (any JSON value) or throws; a CommandError sets the reported error code. */
export type Handler<A = Record<string, unknown>> = (args: A, ctx: CommandContext) => unknown;

/** A gateway child's handler registry; `handle` chains like `Device.handle`. */
export interface ChildHandlers {
  handle<A = Record<string, unknown>>(capability: string, handler: Handler<A>): ChildHandlers;
}

/** Throw from a handler to report `failed` with this code (default code: `handler_error`). */
export class CommandError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

/** What the device is doing, for logs and UIs. Never carries a credential or ticket. */
export type DeviceEvent =
  | { type: 'manifest'; children: { key: string; deviceId: string }[] }
  | { type: 'connected' }
  | { type: 'disconnected'; code: number; reason: string; retryInMs: number }
  | { type: 'wake'; deviceId: string; actionId: string }
  | { type: 'cancel'; deviceId: string; actionId: string; reason: string }
  | { type: 'command'; command: DeviceCommand; childKey: string | null }
  | { type: 'result'; actionId: string; report: ResultReport; attempts: number }
  | { type: 'report-retry'; actionId: string; error: string; retryInMs: number }
  | { type: 'report-dropped'; actionId: string; error: string }
  | { type: 'poll-error'; error: string }
  | { type: 'revoked' }
  | { type: 'stopped' };

/** `requestTimeoutMs` and `maxAnswerBytes` bound each HTTP call (defaults 10 000 ms, 1 MiB). */
export interface DeviceOptions extends RequestLimits {
  url: UrlSource;
  credentials: DeviceCredentials;
  /** Published on start (and retried until it is); omit when the manifest is published elsewhere. */
  manifest?: Manifest;
  /** Poll interval while the wake socket is down (default 2 000 ms). */
  fallbackPollMs?: number;
  /** A safety poll while the socket is up, in case a wake went missing (default 60 000 ms). */
  idlePollMs?: number;
  /** Reconnect backoff: exponential from `initialMs` to `maxMs`, each delay jittered (defaults 250 / 30 000 ms). */
  backoff?: { initialMs?: number; maxMs?: number };
  /** Drops a socket that heard nothing, not even a ping, for this long (default 45 000 ms: three missed 15 s pings). */
  silenceTimeoutMs?: number;
  onEvent?: (event: DeviceEvent) => void;
  fetch?: typeof fetch;
}

/** Keep this many finished action ids, so a command seen twice is reported again, never run twice. */
const REMEMBERED_RESULTS = 1000;
/** How long past its deadline a failed report is still retried; the service stores a late one as it comes. */
const REPORT_GRACE_MS = 5_000;
/** Recalls remembered for commands not yet running (a cancel frame can overtake the `next` answer). */
const REMEMBERED_RECALLS = 100;
/** The largest wake-socket message read; a larger one closes the socket with 1009. The service's frames are a few hundred bytes. */
const MAX_MESSAGE_BYTES = 64 * 1024;
/** How long a closing socket waits for the peer's close frame before it is cut. */
const CLOSE_TIMEOUT_MS = 2_000;

/**
 * Equal-jitter exponential backoff: half the step is fixed, half random, so a fleet that lost
 * the same server does not come back in one wave, and no device retries in a tight loop.
 */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  const step = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(step / 2 + random() * (step / 2));
}

/**
 * A device (or gateway) connected to the service: keeps the wake socket open, fetches
 * commands when woken, on every (re)connect and by polling while the socket is down, runs
 * the registered handlers one at a time and reports each result until the service has it.
 */
export class Device {
  readonly deviceId: string;
  readonly #api: DeviceApi;
  readonly #options: DeviceOptions;
  readonly #handlers = new Map<string, Handler<any>>(); // `any`: each handler declares its own argument type
  readonly #childHandlers = new Map<string, Map<string, Handler<any>>>(); // by child key or child device id
  readonly #childKeys = new Map<string, string>(); // child device id → key
  readonly #finished = new Map<string, ResultReport>();
  /** The running command's recall switch, by action id. */
  readonly #running = new Map<string, AbortController>();
  readonly #recalled = new Map<string, string>(); // action id → reason, for commands not running yet
  readonly #stop = new AbortController();
  #socket: WebSocket | undefined;
  #connected = false;
  #draining: Promise<void> | undefined;
  #drainAgain = false;
  #pollTimer: NodeJS.Timeout | undefined;
  #connectLoop: Promise<void> | undefined;

  constructor(options: DeviceOptions) {
    this.#options = options;
    this.deviceId = options.credentials.deviceId;
    this.#api = deviceApi(options.url, options.credentials, options.fetch, options);
  }

  /** Registers the handler for one of this device's capabilities. */
  handle<A = Record<string, unknown>>(capability: string, handler: Handler<A>): this {
    this.#handlers.set(capability, handler);
    return this;
  }

  /** Handlers for a gateway child, named by its manifest key or its device id. */
  child(keyOrDeviceId: string): ChildHandlers {
    let handlers = this.#childHandlers.get(keyOrDeviceId);
    if (!handlers) this.#childHandlers.set(keyOrDeviceId, (handlers = new Map()));
    const registry = handlers;
    const scope: ChildHandlers = {
      handle<A>(capability: string, handler: Handler<A>) {
        registry.set(capability, handler);
        return scope;
      },
    };
    return scope;
  }

  /**
   * Reports the last-known value of one of this device's read functions on its own, without an
   * action (docs/devices/state.md): agents read it without waking the device. The value is
   * checked against the function's `result` schema; `child` names a gateway child by its
   * manifest key or device id. A read handler's result becomes the value by itself.
   */
  async report(capability: string, value: unknown, child?: string): Promise<void> {
    const deviceId = child === undefined ? undefined : (this.childId(child) ?? child);
    await this.#api.reportState({ [capability]: value }, deviceId);
  }

  /** The device id of a gateway child, once the manifest is published. */
  childId(key: string): string | undefined {
    for (const [id, k] of this.#childKeys) if (k === key) return id;
    return undefined;
  }

  get connected(): boolean {
    return this.#connected;
  }

  get stopped(): boolean {
    return this.#stop.signal.aborted;
  }

  /** Publishes the manifest (retrying while the service is unreachable), then connects. */
  async start(): Promise<void> {
    if (this.#options.manifest) await this.#publishManifest(this.#options.manifest);
    if (this.stopped) return;
    this.#connectLoop = this.#keepConnected();
    this.#drain();
  }

  /**
   * Closes the socket and stops polling. A command already running finishes and its report
   * gets one more chance; a report the service cannot take right now is then given up.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.#stop.abort();
    clearTimeout(this.#pollTimer);
    const socket = this.#socket;
    socket?.close(1000, 'device stopping');
    // ws waits 30 s for the peer's close frame; a peer that never sends one must not hold stop() that long.
    if (socket) setTimeout(() => socket.terminate(), CLOSE_TIMEOUT_MS).unref();
    await Promise.allSettled([this.#connectLoop, this.#draining]);
    this.#emit({ type: 'stopped' });
  }

  #emit(event: DeviceEvent): void {
    try {
      this.#options.onEvent?.(event);
    } catch {
      // A broken listener must not break the device loop.
    }
  }

  #backoff(attempt: number): number {
    return backoffDelay(attempt, this.#options.backoff?.initialMs ?? 250, this.#options.backoff?.maxMs ?? 30_000);
  }

  /** Resolves after `ms`, or at once when the device stops. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.stopped) return resolve();
      const done = () => {
        clearTimeout(timer);
        this.#stop.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#stop.signal.addEventListener('abort', done, { once: true });
    });
  }

  #revoked(): void {
    if (this.stopped) return;
    this.#emit({ type: 'revoked' });
    void this.stop();
  }

  async #publishManifest(manifest: Manifest): Promise<void> {
    for (let attempt = 0; !this.stopped; attempt += 1) {
      try {
        const published = await this.#api.publishManifest(manifest);
        this.#childKeys.clear();
        for (const child of published.children) if (child.key !== null) this.#childKeys.set(child.id, child.key);
        this.#emit({ type: 'manifest', children: [...this.#childKeys].map(([deviceId, key]) => ({ key, deviceId })) });
        return;
      } catch (error) {
        if (error instanceof ApiError && !error.retryable) {
          if (error.unauthorized) this.#revoked();
          throw error;
        }
        await this.#sleep(this.#backoff(attempt));
      }
    }
  }

  /** Ticket, socket, and on every close a jittered, growing wait before the next try. */
  async #keepConnected(): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      let close = { code: 1006, reason: 'unreachable' };
      try {
        const { ticket } = await this.#api.eventsTicket();
        const url = await this.#api.eventsUrl(ticket);
        // stop() during those awaits found no socket to close: opening one now would outlive it.
        if (this.stopped) return;
        close = await this.#openSocket(url, () => (attempt = 0));
      } catch (error) {
        if (error instanceof ApiError && error.unauthorized) return this.#revoked();
        close = { code: 1006, reason: (error as Error).message };
      }
      if (this.stopped) return;
      if (close.code === 4401) return this.#revoked();
      const retryInMs = this.#backoff(attempt++);
      this.#emit({ type: 'disconnected', code: close.code, reason: close.reason, retryInMs });
      await this.#sleep(retryInMs);
    }
  }

  /** Opens one socket; resolves when it closes (or fails to open) with the close code. */
  #openSocket(url: string, onOpen: () => void): Promise<{ code: number; reason: string }> {
    return new Promise((resolve) => {
      const socket = new WebSocket(url, { maxPayload: MAX_MESSAGE_BYTES, handshakeTimeout: 10_000 });
      this.#socket = socket;
      const silenceMs = this.#options.silenceTimeoutMs ?? 45_000;
      let silence: NodeJS.Timeout | undefined;
      const heard = () => {
        clearTimeout(silence);
        silence = setTimeout(() => socket.terminate(), silenceMs);
      };
      let refused = '';
      let failed: { code: number; reason: string } | undefined;
      let opened = false;
      socket.on('unexpected-response', (_request, response) => {
        refused = `upgrade refused with HTTP ${response.statusCode}`;
        if (response.statusCode === 401) refused += ' (ticket or device refused)';
        response.resume();
        socket.terminate();
      });
      socket.on('open', () => {
        opened = true;
        onOpen();
        heard();
        this.#connected = true;
        this.#emit({ type: 'connected' });
        this.#drain(); // anything queued while the socket was down
      });
      socket.on('ping', heard);
      socket.on('message', (data) => {
        heard();
        let frame: { type?: unknown; deviceId?: unknown; actionId?: unknown; reason?: unknown };
        try {
          frame = JSON.parse(String(data)) as typeof frame;
        } catch {
          return;
        }
        if (frame.type === 'wake' && typeof frame.actionId === 'string') {
          this.#emit({ type: 'wake', deviceId: String(frame.deviceId), actionId: frame.actionId });
          this.#drain();
        } else if (frame.type === 'cancel' && typeof frame.actionId === 'string') {
          this.#recall(String(frame.deviceId), frame.actionId, String(frame.reason));
        }
      });
      // A broken frame or a message over MAX_MESSAGE_BYTES: ws sends its close frame and would
      // wait 30 s for the peer's. Cut it now, and tell the close code the device sent.
      socket.on('error', (error: Error & { code?: string }) => {
        // A failed upgrade or a lost connection: the close that follows carries what matters.
        if (!opened || !error.code?.startsWith('WS_ERR_')) return;
        failed = {
          code: error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 1009 : error.code === 'WS_ERR_INVALID_UTF8' ? 1007 : 1002,
          reason: error.message,
        };
        socket.terminate();
      });
      socket.on('close', (code, reason) => {
        clearTimeout(silence);
        this.#connected = false;
        if (this.#socket === socket) this.#socket = undefined;
        this.#schedulePoll(); // falls back to polling while the socket is down
        resolve(failed ?? { code, reason: refused || String(reason) });
      });
    });
  }

  /** A cancel frame: aborts the command's signal if it runs, or when it starts (docs/devices/wire-protocol.md "Wake channel"). */
  #recall(deviceId: string, actionId: string, reason: string): void {
    this.#emit({ type: 'cancel', deviceId, actionId, reason });
    const running = this.#running.get(actionId);
    if (running) return running.abort(new CommandRecalled(reason));
    if (this.#finished.has(actionId)) return;
    this.#recalled.set(actionId, reason);
    if (this.#recalled.size > REMEMBERED_RECALLS) this.#recalled.delete(this.#recalled.keys().next().value!);
  }

  /** The next poll: soon while the socket is down or the last poll failed, rarely otherwise. */
  #schedulePoll(failed = false): void {
    clearTimeout(this.#pollTimer);
    if (this.stopped) return;
    const ms = this.#connected && !failed ? (this.#options.idlePollMs ?? 60_000) : (this.#options.fallbackPollMs ?? 2_000);
    this.#pollTimer = setTimeout(() => this.#drain(), ms);
  }

  /** Fetches and runs commands until the queue is empty; one drain at a time. */
  #drain(): void {
    if (this.stopped) return;
    if (this.#draining) {
      this.#drainAgain = true;
      return;
    }
    this.#draining = this.#drainLoop();
  }

  async #drainLoop(): Promise<void> {
    let failed = false;
    try {
      do {
        this.#drainAgain = false;
        while (!this.stopped) {
          const command = await this.#api.next();
          if (!command) break;
          await this.#run(command);
        }
      } while (this.#drainAgain && !this.stopped);
    } catch (error) {
      if (error instanceof ApiError && error.unauthorized) this.#revoked();
      else this.#emit({ type: 'poll-error', error: (error as Error).message });
      failed = true;
    } finally {
      // Synchronously after the last check of #drainAgain: a wake arriving now starts a new drain.
      this.#draining = undefined;
      this.#schedulePoll(failed);
    }
  }

  #handlerFor(command: DeviceCommand): { handler: Handler<any> | undefined; childKey: string | null } {
    if (command.deviceId === this.deviceId) return { handler: this.#handlers.get(command.capability), childKey: null };
    const childKey = this.#childKeys.get(command.deviceId) ?? null;
    const handlers = (childKey !== null ? this.#childHandlers.get(childKey) : undefined) ?? this.#childHandlers.get(command.deviceId);
    return { handler: handlers?.get(command.capability), childKey };
  }

  async #run(command: DeviceCommand): Promise<void> {
    const earlier = this.#finished.get(command.id);
    if (earlier) return this.#report(command, earlier); // seen before: report again, never run twice
    const { handler, childKey } = this.#handlerFor(command);
    this.#emit({ type: 'command', command, childKey });
    let report: ResultReport;
    if (!handler) {
      report = { ok: false, error: { code: 'unknown_capability', message: `No handler for ${command.capability} on this device.` } };
    } else {
      const recall = new AbortController();
      const recalledEarlier = this.#recalled.get(command.id);
      if (recalledEarlier !== undefined) recall.abort(new CommandRecalled(recalledEarlier));
      this.#running.set(command.id, recall);
      const deadline = AbortSignal.any([this.#stop.signal, recall.signal, AbortSignal.timeout(Math.max(0, command.expiresAt - Date.now()))]);
      try {
        const result: unknown = await handler(command.args, {
          actionId: command.id,
          deviceId: command.deviceId,
          childKey,
          capability: command.capability,
          expiresAt: command.expiresAt,
          signal: deadline,
        });
        report = result === undefined ? { ok: true } : { ok: true, result };
      } catch (error) {
        const code = error instanceof CommandError ? error.code : 'handler_error';
        report = { ok: false, error: { code: code.slice(0, 64), message: String((error as Error)?.message ?? error).slice(0, 1024) } };
      } finally {
        this.#running.delete(command.id);
        this.#recalled.delete(command.id);
      }
    }
    this.#finished.set(command.id, report);
    if (this.#finished.size > REMEMBERED_RESULTS) this.#finished.delete(this.#finished.keys().next().value!);
    await this.#report(command, report);
  }

  /**
   * Reports until the service has the result: the service answers a repeat of the same report
   * with the stored action, so retrying after a lost answer is safe; a late report is stored
   * too. Gives up only when the service refuses the report (e.g. 409: another report was
   * stored) or the deadline has long passed.
   */
  async #report(command: DeviceCommand, report: ResultReport): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.#api.report(command.id, report);
        this.#emit({ type: 'result', actionId: command.id, report, attempts: attempt });
        return;
      } catch (error) {
        const message = (error as Error).message;
        const retryable = error instanceof ApiError && error.retryable;
        if (error instanceof ApiError && error.unauthorized) return this.#revoked();
        if (!retryable || Date.now() > command.expiresAt + REPORT_GRACE_MS || this.stopped) {
          this.#emit({ type: 'report-dropped', actionId: command.id, error: message });
          return;
        }
        const retryInMs = this.#backoff(attempt - 1);
        this.#emit({ type: 'report-retry', actionId: command.id, error: message, retryInMs });
        await this.#sleep(retryInMs);
      }
    }
  }
}
