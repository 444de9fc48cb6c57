import { createCipheriv, createDecipheriv, createHmac, timingSafeEqual } from 'node:crypto';
import type { Db } from '../store/driver.js';
import { legacyEventIdLimit } from '../store/event-journal.js';
import { serviceKey } from '../store/service-keys.js';
import type { OperationContext } from './context.js';

/**
 * The event ids an owner sees (docs/reference/event-ids.md): on the event stream, in each event's `id`,
 * in webhook payloads, and sent back as `Last-Event-ID`. The journal numbers its rows with one
 * counter for the whole service; shown as they are, two ids a workspace saw would tell how many
 * events every other workspace had in between. So each id is shown encrypted: one AES-256
 * block of the journal id and a tag of the workspace, under a key of the service (kept in the
 * database, shared by every instance, so an id resumes across restarts and instances). A block
 * cipher is a permutation: distinct journal ids give distinct, stable ids that look random and
 * carry no order. An id shown to one workspace does not decrypt to a valid tag in another.
 */

const KEY_NAME = 'event-ids';
/** 16 bytes in base64url. */
export const EVENT_ID_PATTERN = /^[A-Za-z0-9_-]{22}$/;

export interface EventIds {
  /** The id a workspace sees for a journal row. */
  show(workspaceId: string, journalId: number): string;
  /** The journal id behind an id this workspace was shown, or undefined for any other text. */
  read(workspaceId: string, shown: string): number | undefined;
}

const derive = (key: Buffer, label: string) => createHmac('sha256', key).update(`dfc.events.${label}.v1`).digest();

function codec(key: Buffer): EventIds {
  const cipherKey = derive(key, 'id-cipher');
  const tagKey = derive(key, 'id-workspace-tag');
  const tag = (workspaceId: string) => createHmac('sha256', tagKey).update(workspaceId).digest().subarray(0, 8);
  return {
    show(workspaceId, journalId) {
      const block = Buffer.alloc(16);
      block.writeBigUInt64BE(BigInt(journalId), 0);
      tag(workspaceId).copy(block, 8);
      const cipher = createCipheriv('aes-256-ecb', cipherKey, null).setAutoPadding(false);
      return Buffer.concat([cipher.update(block), cipher.final()]).toString('base64url');
    },
    read(workspaceId, shown) {
      if (!EVENT_ID_PATTERN.test(shown)) return undefined;
      const sealed = Buffer.from(shown, 'base64url');
      if (sealed.length !== 16) return undefined;
      const decipher = createDecipheriv('aes-256-ecb', cipherKey, null).setAutoPadding(false);
      const block = Buffer.concat([decipher.update(sealed), decipher.final()]);
      if (!timingSafeEqual(block.subarray(8), tag(workspaceId))) return undefined;
      const id = block.readBigUInt64BE(0);
      return id <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(id) : undefined;
    },
  };
}

/** Per database, the codec once its key is read: the key never changes. */
const codecs = new WeakMap<Db, Promise<EventIds>>();

/** The service's event id codec, its key created on first use. A failed read is not remembered. */
export function eventIds(ctx: Pick<OperationContext, 'db' | 'clock'>): Promise<EventIds> {
  let ids = codecs.get(ctx.db);
  if (!ids) {
    ids = serviceKey(ctx.db, KEY_NAME, ctx.clock.now()).then((hex) => codec(Buffer.from(hex, 'hex')));
    codecs.set(ctx.db, ids);
    ids.catch(() => codecs.delete(ctx.db));
  }
  return ids;
}

/**
 * Where a `Last-Event-ID` points: a journal id, or `unknown`. Plain numbers are the ids shown
 * before ids were encrypted: they are honoured up to the journal's last id at that upgrade
 * (migration 0025), so a client that was following the stream then resumes where it was, and
 * a number past it, which could only probe the journal, is unknown.
 */
export async function resumePoint(ctx: Pick<OperationContext, 'db' | 'clock'>, workspaceId: string, given: string): Promise<number | 'unknown'> {
  if (/^\d{1,15}$/.test(given)) {
    const id = Number(given);
    return id <= (await legacyEventIdLimit(ctx.db)) ? id : 'unknown';
  }
  return (await eventIds(ctx)).read(workspaceId, given) ?? 'unknown';
}
