import { expect } from 'vitest';
import { eventIds } from '../../src/domain/event-ids.js';
import type { TestServer } from './server.js';

/**
 * The journal id behind an event id the owner of a device's workspace was shown (devices name
 * their workspace by routing id; src/domain/event-ids.ts): for tests of the journal's order and
 * of ids never given twice, which the shown ids keep to themselves.
 */
export async function journalIdOf(server: TestServer, routingId: string, shown: string): Promise<number> {
  const workspace = await server.service.db.get<{ id: string }>('SELECT id FROM workspaces WHERE routing_id = ?', [routingId]);
  const id = (await eventIds({ db: server.service.db, clock: { now: Date.now } })).read(workspace!.id, shown);
  expect(id, `${shown} is an event id of the workspace`).toBeTypeOf('number');
  return id!;
}
