import { describe, expect, it } from 'vitest';
import type { ActionRecord } from '../../src/domain/action-records.js';
import { CHANGED_ELSEWHERE, createEventHub, onActionChange, onJournal, type ActionChange } from '../../src/domain/event-hub.js';

/**
 * Long-lived followers of the event hub (an MCP subscription stream) are found by action id
 * and by workspace: each is told the changes of the actions it follows, as this instance
 * committed them or as another instance's hint, and the journal announcements of its
 * workspace, and nothing else.
 */
function change(id: string, workspaceId = 'ws-1'): ActionChange {
  return { type: 'action', workspaceId, targetId: 'device-1', connectionId: 'conn-1', action: { id } as ActionRecord };
}

describe('a follower of one action', () => {
  it('is told that action’s own changes with their event, and other instances’ hints as changed elsewhere', () => {
    const hub = createEventHub();
    const told: unknown[] = [];
    const stop = onActionChange(hub, 'a-1', (c) => told.push(c));
    const own = change('a-1');
    hub.publish(own);
    hub.publish(change('a-2'));
    hub.publish({ type: 'action-hint', workspaceId: 'ws-1', targetId: 'device-1', actionId: 'a-1', signal: false });
    hub.publish({ type: 'action-hint', workspaceId: 'ws-1', targetId: 'device-1', actionId: 'a-2', signal: false });
    expect(told).toEqual([own, CHANGED_ELSEWHERE]);
    stop();
    hub.publish(change('a-1'));
    expect(told).toHaveLength(2);
  });
});

describe('a follower of a workspace’s journal', () => {
  it('is told that workspace’s announcements only, until it stops', () => {
    const hub = createEventHub();
    let told = 0;
    const stop = onJournal(hub, 'ws-1', () => told++);
    hub.publish({ type: 'journal', workspaceId: 'ws-1' });
    hub.publish({ type: 'journal', workspaceId: 'ws-2' });
    hub.publish(change('a-1'));
    expect(told).toBe(1);
    stop();
    hub.publish({ type: 'journal', workspaceId: 'ws-1' });
    expect(told).toBe(1);
  });
});
