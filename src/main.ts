import { ConfigError, parseConfig, StartupError } from './config.js';
import { oneLine } from './domain/errors.js';
import { SERVICE_URLS } from './http/front-door.js';
import { createLogger } from './logger.js';

/**
 * A start that fails for a reason the operator can fix ends with one line on stderr naming
 * the cause and the variable to change, and exit code 1 (docs/operators/deploy.md "Deploy"); the stack only
 * with LOG_LEVEL=debug, read raw here since a bad configuration may be the failure itself.
 */
function failStart(error: unknown): never {
  const known = error instanceof ConfigError || error instanceof StartupError;
  const line = known ? error.message : `unexpected failure: ${oneLine(error)}`;
  const variable = error instanceof StartupError ? ` [${error.variable}]` : '';
  process.stderr.write(`cannot start: ${line}${variable}\n`);
  if (process.env.LOG_LEVEL === 'debug' && error instanceof Error) process.stderr.write(`${error.stack ?? ''}\n`);
  process.exit(1);
}

// The only place that reads process.env (docs/reference/rules.md "Running").
let config;
try {
  config = parseConfig(process.env);
} catch (error) {
  failStart(error);
}

// The service is imported only once the configuration holds: a bad variable is reported
// without loading the whole service first.
const { displayDatabaseUrl, startService } = await import('./service.js');
// One logger for the service and the lines below, so that LOG_LEVEL=silent silences them too.
const log = createLogger(config.logLevel);
const service = await startService(config, { log }).catch(failStart);
log.info({
  msg: 'listening',
  url: service.url,
  console: `${service.url}${SERVICE_URLS.console}`,
  apiReference: `${service.url}${SERVICE_URLS.apiReference}`,
  mcp: `${service.url}${SERVICE_URLS.mcp}`,
  database: displayDatabaseUrl(config.databaseUrl),
});

// The last line of defence: every entry point contains its own failures, so a
// rejection that reaches here is a bug. A rejected promise nobody awaited has left no
// half-done synchronous work behind, while exiting would let one request that finds the bug
// take the service down for every workspace: log it loudly, count it, keep serving. An
// uncaught exception still ends the process (Node's default): a throw mid-update may have
// left in-memory state inconsistent, and the database, not memory, survives a restart.
process.on('unhandledRejection', (reason) => service.reportUnhandledRejection(reason));
// The monitor only observes: Node still prints the stack and exits 1 after it.
process.on('uncaughtExceptionMonitor', (error) => service.reportUncaughtException(error));

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    void service.close().then(() => {
      log.info({ msg: 'stopped', signal });
      process.exit(0);
    });
  });
}
