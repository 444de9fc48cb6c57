import { pino, type DestinationStream } from 'pino';
import type { Logger, LogLevel } from './domain/context.js';

/** Lines buffered while stdout is slower than the service; past this, lines are dropped rather than memory grown without bound. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/**
 * Structured JSON lines on stdout (docs/reference/rules.md "Running", docs/operators/logs-and-metrics.md "Logs"): `level` (a name,
 * not pino's number), `time` (ISO 8601), `msg`, then the record's own fields. Callers pass
 * records that never hold a token, a secret or an Authorization header; the request log
 * records route patterns, not URLs, so a ticket in a query string cannot reach it either.
 *
 * pino rather than a hand-written `JSON.stringify` + `process.stdout.write`: stdout on a pipe
 * (what a container's log driver reads) is written synchronously by Node, one system call per
 * line on the request path, while pino's asynchronous destination batches lines and flushes
 * what is left synchronously when the process exits. `npm run bench -- --only healthz
 * --log-level info` measured it (docs/operators/logs-and-metrics.md "Logs"). A level below LOG_LEVEL costs one comparison.
 * `write`, for tests, receives each line synchronously, without its newline.
 */
export function createLogger(level: LogLevel, write?: (line: string) => void): Logger {
  const destination: DestinationStream = write
    ? { write: (line: string) => write(line.endsWith('\n') ? line.slice(0, -1) : line) }
    : pino.destination({ dest: 1, sync: false, maxLength: MAX_BUFFERED_BYTES });
  const logger = pino({ level, base: undefined, timestamp: pino.stdTimeFunctions.isoTime, formatters: { level: (label) => ({ level: label }) } }, destination);
  return {
    enabled: (at) => logger.isLevelEnabled(at),
    debug: (record) => logger.debug(record),
    info: (record) => logger.info(record),
    warn: (record) => logger.warn(record),
    error: (record) => logger.error(record),
  };
}
