import { parseArgs } from 'node:util';
import { signDevelopmentSession } from '../auth/owner.js';
import { ConfigError, parseConfig } from '../config.js';

// `npm run owner-token -- --sub NAME [--workspace KEY] [--ttl SECONDS]`: prints a one-hour
// owner session signed by the embedded development identity provider (docs/reference/rules.md "Credentials").
const { values } = parseArgs({
  options: { sub: { type: 'string' }, workspace: { type: 'string' }, ttl: { type: 'string' } },
});
if (!values.sub) {
  console.error('usage: npm run owner-token -- --sub NAME [--workspace KEY] [--ttl SECONDS]');
  process.exit(2);
}
try {
  const config = parseConfig(process.env);
  const token = await signDevelopmentSession(config, values.sub, {
    ...(values.workspace ? { workspace: values.workspace } : {}),
    ...(values.ttl ? { ttlSeconds: Number(values.ttl) } : {}),
  });
  process.stdout.write(`${token}\n`);
} catch (error) {
  console.error(error instanceof ConfigError ? error.message : (error as Error).message);
  process.exit(1);
}
