import type { Db } from '../store/driver.js';
import { serviceKey } from '../store/service-keys.js';
import type { OperationContext } from './context.js';

const CONFIRMATION_KEY = 'mcp-confirmation';

/** Per database, the key once read: it never changes, so one read per process suffices. */
const keys = new WeakMap<Db, Promise<Buffer>>();

/**
 * The HMAC key of the MCP confirmation's requestState (docs/agents/confirmation.md "User confirmation"): random,
 * kept in the database and shared by every instance, created on first use. A failed read is
 * not remembered, so the next call tries again.
 */
export function confirmationKey(ctx: Pick<OperationContext, 'db' | 'clock'>): Promise<Buffer> {
  let key = keys.get(ctx.db);
  if (!key) {
    key = serviceKey(ctx.db, CONFIRMATION_KEY, ctx.clock.now()).then((hex) => Buffer.from(hex, 'hex'));
    keys.set(ctx.db, key);
    key.catch(() => keys.delete(ctx.db));
  }
  return key;
}
