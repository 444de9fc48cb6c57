import type { Logger } from './domain/context.js';

/**
 * Structured JSON lines on stdout (docs/rules.md "Running"). Callers pass records that never hold a
 * token, a secret or an Authorization header; the request log records route patterns,
 * not URLs, so a ticket in a query string cannot reach it either.
 */
export function createLogger(level: 'info' | 'silent', write: (line: string) => void = (line) => process.stdout.write(`${line}\n`)): Logger {
  const emit = (severity: string, record: Record<string, unknown>) => {
    if (level === 'silent') return;
    write(JSON.stringify({ time: new Date().toISOString(), level: severity, ...record }));
  };
  return {
    info: (record) => emit('info', record),
    error: (record) => emit('error', record),
  };
}
