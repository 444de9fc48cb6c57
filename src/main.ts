import { ConfigError, parseConfig } from './config.js';
import { startService } from './service.js';

// The only place that reads process.env (docs/rules.md "Running").
let config;
try {
  config = parseConfig(process.env);
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(error.message);
    process.exit(1);
  }
  throw error;
}

const service = await startService(config);
// Credentials can ride in a database URL (user:pass@ or ?authToken=): neither is logged.
console.log(
  JSON.stringify({
    time: new Date().toISOString(),
    level: 'info',
    msg: 'listening',
    url: service.url,
    database: config.databaseUrl.replace(/\/\/[^@/]*@/, '//').replace(/\?.*$/, ''),
  }),
);

// The last line of defence (issue 13): every entry point contains its own failures, so a
// rejection that reaches here is a bug. A rejected promise nobody awaited has left no
// half-done synchronous work behind, while exiting would let one request that finds the bug
// take the service down for every workspace: log it loudly, count it, keep serving. An
// uncaught exception still ends the process (Node's default): a throw mid-update may have
// left in-memory state inconsistent, and the database, not memory, survives a restart.
process.on('unhandledRejection', (reason) => service.reportUnhandledRejection(reason));

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    void service.close().then(() => process.exit(0));
  });
}
