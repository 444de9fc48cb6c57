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

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    void service.close().then(() => process.exit(0));
  });
}
