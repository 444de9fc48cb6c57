import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ACTION_STATES,
  ACTION_STATUSES,
  INITIAL_STATUSES,
  MARKS,
  TRANSITIONS,
  type ActionStatus,
  type MarkName,
  type TransitionName,
} from '../../src/domain/action-states.js';
import { approveAction, cancelForConditions, cancelIfRefused, rejectAction } from '../../src/store/action-decisions.js';
import { expireDue } from '../../src/store/action-expiry.js';
import { promoteScheduled } from '../../src/store/action-schedule.js';
import { cancelRefused, reportLate, claimNext, completeAction } from '../../src/store/action-hand-out.js';
import { insertAction } from '../../src/store/action-requests.js';
import {
  cancelQueued,
  cancelQueuedForFunction,
  cancelQueuedForTarget,
  cancelWithdrawn,
  recallWithdrawn,
  cancelQueuedOnDetachedChildren,
  cancelQueuedOnServices,
  recallForFunction,
  requestRecall,
} from '../../src/store/action-withdrawals.js';
import { getAction, statusIn, type ActionRow } from '../../src/store/actions.js';
import type { Db, Queryable, SqlValue } from '../../src/store/driver.js';
import { openDb } from '../../src/store/open.js';

// The state table in src/domain/action-states.ts is the one list of action statuses and
// moves: the database, the store's guarded UPDATEs and the docs must all agree with it.

const statuses = (list: readonly ActionStatus[]) => list.join(' | ');
const transitionNames = Object.keys(TRANSITIONS) as TransitionName[];
const markNames = Object.keys(MARKS) as MarkName[];

describe('the state table', () => {
  it('has a status final exactly when no move leaves it', () => {
    const left = new Set<ActionStatus>(Object.values(TRANSITIONS).flatMap((move) => move.from));
    for (const status of ACTION_STATUSES) expect(ACTION_STATES[status].terminal, status).toBe(!left.has(status));
  });

  it('moves every action forward: each destination is at a later stage than each status it leaves', () => {
    for (const [name, move] of Object.entries(TRANSITIONS)) {
      for (const from of move.from)
        for (const to of move.to) expect(ACTION_STATES[to].stage, `${name}: ${from} → ${to}`).toBeGreaterThan(ACTION_STATES[from].stage);
    }
  });

  it('puts every final status at the last stage, so a waiter treats them alike', () => {
    const last = Math.max(...ACTION_STATUSES.map((status) => ACTION_STATES[status].stage));
    for (const status of ACTION_STATUSES.filter((s) => ACTION_STATES[s].terminal)) expect(ACTION_STATES[status].stage, status).toBe(last);
  });

  it('reaches every status from the initial ones', () => {
    const reached = new Set<ActionStatus>(INITIAL_STATUSES);
    for (let known = 0; reached.size > known;) {
      known = reached.size;
      for (const move of Object.values(TRANSITIONS)) if (move.from.some((from) => reached.has(from))) for (const to of move.to) reached.add(to);
    }
    expect([...reached].sort()).toEqual([...ACTION_STATUSES].sort());
  });
});

const NOW = 1_000_000;

interface World {
  workspaceId: string;
  gatewayId: string;
  /** An integration-wide service of the gateway. */
  serviceId: string;
  /** A child the gateway's latest manifest left out. */
  detachedId: string;
}

/** Which device the action is for; the gateway fetches it in every case. */
type Device = 'gateway' | 'service' | 'detached';

interface StoreMove {
  /** The store function making the move, for the check that every guarded UPDATE is driven here. */
  fn: (...args: never[]) => unknown;
  device: Device;
  /** The deadline has passed (expire) or not (every other move). */
  due: boolean;
  /**
   * The statuses this function leaves, when only some of the move's: the cancels that look at a
   * device's queue by its fetching device see queued commands only (a waiting action's approval
   * re-checks the permission instead).
   */
  only?: readonly ActionStatus[];
  run(db: Db, world: World, action: ActionRow): Promise<ActionRow | ActionRow[] | undefined>;
  into: ActionStatus;
}

const PRINCIPAL = 'agent:mover';

const report = (action: ActionRow, ok: boolean) => ({
  id: action.id,
  targetId: action.targetId,
  ok,
  result: ok ? '{"on":true}' : null,
  errorCode: ok ? null : 'jammed',
  errorMessage: ok ? null : 'relay stuck',
});

/** Every store function that moves an action, by the move of the table it makes. */
const decision = (w: World, a: ActionRow) => ({ workspaceId: w.workspaceId, id: a.id, decidedBy: 'owner@example.com', reason: 'checked' });

const STORE_MOVES: Record<TransitionName, StoreMove[]> = {
  // Requested under an approval mode with no yes given: it becomes due waiting for the owner.
  due: [
    {
      fn: promoteScheduled,
      device: 'gateway',
      due: false,
      into: 'awaiting_approval',
      run: (db, w, a) => promoteScheduled(db, w.workspaceId, a.id, null, NOW),
    },
  ],
  approve: [{ fn: approveAction, device: 'gateway', due: false, into: 'queued', run: (db, w, a) => approveAction(db, decision(w, a), NOW) }],
  reject: [{ fn: rejectAction, device: 'gateway', due: false, into: 'rejected', run: (db, w, a) => rejectAction(db, decision(w, a), NOW) }],
  claim: [{ fn: claimNext, device: 'gateway', due: false, into: 'received', run: async (db, w) => (await claimNext(db, w.gatewayId, NOW))?.row }],
  complete: [
    { fn: completeAction, device: 'gateway', due: false, into: 'succeeded', run: async (db, _w, a) => (await completeAction(db, report(a, true), NOW))?.row },
    { fn: completeAction, device: 'gateway', due: false, into: 'failed', run: async (db, _w, a) => (await completeAction(db, report(a, false), NOW))?.row },
  ],
  cancel: [
    { fn: cancelQueued, device: 'gateway', due: false, into: 'cancelled', run: (db, w, a) => cancelQueued(db, w.workspaceId, a.id, null, 'owner', NOW) },
    {
      fn: cancelQueuedOnServices,
      device: 'service',
      due: false,
      into: 'cancelled',
      run: (db, w) => cancelQueuedOnServices(db, w.workspaceId, PRINCIPAL, w.gatewayId, NOW),
    },
    {
      fn: cancelQueuedOnDetachedChildren,
      device: 'detached',
      due: false,
      only: ['scheduled', 'queued'],
      into: 'cancelled',
      run: (db, w) => cancelQueuedOnDetachedChildren(db, w.workspaceId, w.gatewayId, NOW),
    },
    {
      fn: cancelQueuedForTarget,
      device: 'gateway',
      due: false,
      only: ['scheduled', 'queued'],
      into: 'cancelled',
      run: (db, w) => cancelQueuedForTarget(db, w.workspaceId, w.gatewayId, NOW),
    },
    {
      fn: cancelQueuedForFunction,
      device: 'gateway',
      due: false,
      into: 'cancelled',
      run: (db, w) => cancelQueuedForFunction(db, { workspaceId: w.workspaceId, deviceId: w.gatewayId, capability: 'set_power' }, 'function_changed', NOW),
    },
    // A detached child's command may no longer run: these cancel exactly such commands.
    { fn: cancelRefused, device: 'detached', due: false, only: ['queued'], into: 'cancelled', run: (db, w) => cancelRefused(db, w.gatewayId, null, NOW) },
    { fn: cancelIfRefused, device: 'detached', due: false, into: 'cancelled', run: (db, w, a) => cancelIfRefused(db, w.workspaceId, a.id, NOW) },
    {
      fn: cancelForConditions,
      device: 'gateway',
      due: false,
      into: 'cancelled',
      run: (db, w, a) => cancelForConditions(db, w.workspaceId, a.id, 'conditions_changed', NOW),
    },
    {
      fn: cancelWithdrawn,
      device: 'detached',
      due: false,
      into: 'cancelled',
      run: (db, w) => cancelWithdrawn(db, { workspaceId: w.workspaceId, principal: PRINCIPAL }, NOW),
    },
  ],
  expire: [{ fn: expireDue, device: 'gateway', due: true, into: 'expired', run: (db, _w, a) => expireDue(db, NOW, { id: a.id }) }],
};

interface StoreMark {
  fn: (...args: never[]) => unknown;
  device: Device;
  run(db: Db, world: World, action: ActionRow): Promise<ActionRow | undefined>;
  /** The columns the mark sets, as read back from the store. */
  made(action: ActionRow): boolean;
}

const STORE_MARKS: Record<MarkName, StoreMark[]> = {
  recall: [
    {
      fn: requestRecall,
      device: 'gateway',
      run: (db, w, a) => requestRecall(db, w.workspaceId, a.id, 'grant_revoked', NOW),
      made: (a) => a.cancelRequestedAt === NOW && a.cancelReason === 'grant_revoked',
    },
    {
      fn: recallForFunction,
      device: 'gateway',
      run: async (db, w) =>
        (await recallForFunction(db, { workspaceId: w.workspaceId, deviceId: w.gatewayId, capability: 'set_power' }, 'function_removed', NOW))[0],
      made: (a) => a.cancelRequestedAt === NOW && a.cancelReason === 'function_removed',
    },
    {
      fn: recallWithdrawn,
      device: 'detached',
      run: async (db, w) => (await recallWithdrawn(db, { workspaceId: w.workspaceId }, NOW))[0],
      made: (a) => a.cancelRequestedAt === NOW && a.cancelReason === 'device_detached',
    },
  ],
  reportLate: [
    {
      fn: reportLate,
      device: 'gateway',
      run: (db, _w, a) => reportLate(db, { ...report(a, true), errorCode: null, errorMessage: null }, NOW),
      made: (a) => a.reportedLateAt === NOW && a.result === '{"on":true}',
    },
  ],
};

describe('the database and the store', () => {
  let db: Db;
  beforeAll(async () => {
    db = await openDb(`file:${path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-states-')), 'service.db')}`);
  });
  afterAll(() => db.close());

  // SQLite uses a partial index only for a query that repeats its WHERE term exactly; the
  // guards are built from the table, the indexes were written by hand in a migration.
  it.each([
    ['actions_queued_by_target', statusIn(TRANSITIONS.claim.from)],
    ['actions_live_by_deadline', statusIn(TRANSITIONS.expire.from)],
    ['actions_awaiting_by_workspace', statusIn(TRANSITIONS.approve.from)],
    ['actions_awaiting_by_device', statusIn(TRANSITIONS.approve.from)],
    ['actions_scheduled_by_due', statusIn(TRANSITIONS.due.from)],
  ])('keeps the partial index %s matching the guard the store builds', async (index, guard) => {
    const row = await db.get<{ sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", [index]);
    expect(row?.sql).toMatch(new RegExp(`WHERE ${guard.replace(/[()]/g, '\\$&')}$`));
  });

  /** A fresh workspace with a gateway, its service and a detached child: each case is alone in it. */
  async function world(): Promise<World> {
    const workspaceId = randomUUID();
    await db.run('INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, 0)', [
      workspaceId,
      workspaceId,
      workspaceId.replaceAll('-', ''),
    ]);
    const device = async (kind: string, parentId: string | null, detachedAt: number | null) => {
      const id = randomUUID();
      await db.run(
        `INSERT INTO devices (id, workspace_id, parent_id, child_key, name, kind, attached_via, detached_at, created_at)
         VALUES (?, ?, ?, ?, ?, ?, 'test', ?, 0)`,
        [id, workspaceId, parentId, parentId === null ? null : id, kind, kind, detachedAt],
      );
      return id;
    };
    const gatewayId = await device('gateway', null, null);
    // The gateway's function and the principal's live grant for it: its commands may run.
    await db.run(
      `INSERT INTO capabilities (device_id, workspace_id, name, kind, arguments, position, schema_fingerprint)
       VALUES (?, ?, 'set_power', 'control', '{"type":"object"}', 0, 'fp')`,
      [gatewayId, workspaceId],
    );
    await db.run(
      `INSERT INTO grants (id, workspace_id, principal, device_id, capability, function_kind, schema_fingerprint, created_by, created_at)
       VALUES (?, ?, ?, ?, 'set_power', 'control', 'fp', 'test', 0)`,
      [randomUUID(), workspaceId, PRINCIPAL, gatewayId],
    );
    return { workspaceId, gatewayId, serviceId: await device('service', gatewayId, null), detachedId: await device('device', gatewayId, 1) };
  }

  /** An action in `status`, put there by hand: the case is what the move does from it. */
  async function actionIn(w: World, status: ActionStatus, device: Device, due: boolean): Promise<ActionRow> {
    const deviceId = { gateway: w.gatewayId, service: w.serviceId, detached: w.detachedId }[device];
    const row = await insertAction(db, {
      id: randomUUID(),
      workspaceId: w.workspaceId,
      deviceId,
      targetId: w.gatewayId,
      capability: 'set_power',
      arguments: '{}',
      principal: PRINCIPAL,
      connectionId: null,
      broadcastId: null,
      createdAt: NOW - 60_000,
      expiresAt: due ? NOW : NOW + 30_000,
      status: 'queued',
      approval: 'owner',
      approvalExpiresAt: null,
      ttlSeconds: 30,
      decidedBy: null,
      decidedAt: null,
    });
    expect(row.status).toBe('queued');
    // Every status but the initial ones was handed out once (a late report needs that).
    const handedOut = !(INITIAL_STATUSES as readonly ActionStatus[]).includes(status);
    // Scheduled for a time already come: the `due` move finds it due.
    await db.run('UPDATE actions SET status = ?, dispatched_at = CASE WHEN ? THEN created_at END, not_before = created_at WHERE id = ?', [
      status,
      handedOut ? 1 : 0,
      row.id,
    ]);
    return (await getAction(db, w.workspaceId, row.id))!;
  }

  it("lets the actions table's CHECK accept exactly the table's statuses", async () => {
    const { sql } = (await db.get<{ sql: string }>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'actions'"))!;
    const check = /CHECK \(status IN \(([^)]*)\)\)/.exec(sql);
    expect(check, sql).not.toBeNull();
    expect(check![1]!.split(',').map((literal) => literal.trim().replace(/^'(.*)'$/, '$1'))).toEqual([...ACTION_STATUSES]);
  });

  describe.each(transitionNames)('%s', (name) => {
    const move = TRANSITIONS[name];
    it.each(STORE_MOVES[name].map((storeMove) => [storeMove.fn.name, storeMove.into, storeMove] as const))(
      `%s moves an action from ${statuses(move.from)} (or the part it names) into %s, and no action in any other status`,
      async (_fn, _into, storeMove) => {
        expect(move.to).toContain(storeMove.into);
        const from: readonly ActionStatus[] = storeMove.only ?? move.from;
        for (const status of from) expect(move.from).toContain(status);
        for (const status of ACTION_STATUSES) {
          const w = await world();
          const before = await actionIn(w, status, storeMove.device, storeMove.due);
          const answer = await storeMove.run(db, w, before);
          const moved = [answer ?? []].flat();
          const after = (await getAction(db, w.workspaceId, before.id))!;
          if (from.includes(status)) {
            expect(after.status, `from ${status}`).toBe(storeMove.into);
            expect(moved, `from ${status}`).toEqual([after]);
          } else {
            expect(moved, `from ${status}`).toEqual([]);
            expect(after, `from ${status}`).toEqual(before);
          }
        }
      },
    );
  });

  describe.each(markNames)('the mark %s', (name) => {
    const mark = MARKS[name];
    it.each(STORE_MARKS[name].map((storeMark) => [storeMark.fn.name, storeMark] as const))(
      `%s marks an action in ${statuses(mark.on)} once, leaves its status, and touches no action in any other status`,
      async (_fn, storeMark) => {
        for (const status of ACTION_STATUSES) {
          const w = await world();
          const before = await actionIn(w, status, storeMark.device, false);
          const answer = await storeMark.run(db, w, before);
          const after = (await getAction(db, w.workspaceId, before.id))!;
          if ((mark.on as readonly ActionStatus[]).includes(status)) {
            expect(answer, `in ${status}`).toEqual(after);
            expect(after.status, `in ${status}`).toBe(status);
            expect(storeMark.made(after), `in ${status}`).toBe(true);
            expect(await storeMark.run(db, w, after), `again in ${status}`).toBeUndefined();
          } else {
            expect(answer, `in ${status}`).toBeUndefined();
            expect(after, `in ${status}`).toEqual(before);
          }
        }
      },
    );
  });

  it('drives every store function that UPDATEs an action above', () => {
    const store = path.resolve(import.meta.dirname, '../..', 'src', 'store');
    const sources = fs
      .readdirSync(store)
      .filter((file) => file.endsWith('.ts'))
      .map((file) => fs.readFileSync(path.join(store, file), 'utf8'));
    const updating = sources
      .flatMap((source) => source.split(/\n(?=export )/))
      .filter((part) => /UPDATE actions (?:AS \w+ )?(?:INDEXED BY \S+ )?SET/.test(part))
      .map((part) => /^export (?:async )?function (\w+)/.exec(part)?.[1]);
    const driven = [...Object.values(STORE_MOVES), ...Object.values(STORE_MARKS)].flatMap((each) => each.map((m) => m.fn.name));
    expect(new Set(updating)).toEqual(new Set(driven));
  });

  // A withdrawal runs inside the write transaction of a revocation or a republish, which every
  // other write waits for: it reads the live actions (queued or handed out, bounded by the
  // queue caps and by what devices hold), never a workspace's or a principal's history.
  it("withdraws through the live actions' indexes, never a workspace's or principal's history", async () => {
    const statements: [string, readonly SqlValue[]][] = [];
    const recording: Queryable = {
      all: async <T>(sql: string, args: readonly SqlValue[] = []) => (statements.push([sql, args]), [] as T[]),
      get: async <T>(sql: string, args: readonly SqlValue[] = []) => (statements.push([sql, args]), undefined as T | undefined),
      run: async () => ({ changes: 0 }),
    };
    const scopes = [
      { workspaceId: 'w', principal: 'p', deviceId: 'd' },
      { workspaceId: 'w', connectionId: 'c' },
      { workspaceId: 'w', deviceId: 'd' },
    ];
    for (const scope of scopes) {
      await cancelWithdrawn(recording, scope, NOW);
      await recallWithdrawn(recording, scope, NOW);
    }
    await recallWithdrawn(recording, null, NOW);
    await cancelQueuedOnServices(recording, 'w', 'p', 'g', NOW);
    const live =
      /^(?:actions_scheduled_by_\w+|actions_queued_by_\w+|actions_awaiting_by_\w+|actions_received_by_device|actions_live_by_deadline|actions_recalled_by_target)$/;
    for (const [sql, args] of statements) {
      const plan = await db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, args);
      const onActions = plan.map((step) => step.detail).filter((detail) => /^(?:SCAN|SEARCH) (?:actions|a)\b/.test(detail));
      expect(onActions.length, sql).toBeGreaterThan(0);
      for (const detail of onActions) expect(/USING (?:COVERING )?INDEX (\w+)/.exec(detail)?.[1], `${detail}\n${sql}`).toMatch(live);
    }
  });
});

describe('docs/reference/action-states.md', () => {
  const section = fs.readFileSync(path.resolve(import.meta.dirname, '../..', 'docs', 'reference', 'action-states.md'), 'utf8');
  const start = section.indexOf('# Action states (as implemented)\n');

  /** The page's copy of the table, between its markers. */
  function generated(): string {
    const code = (list: readonly string[]) => list.map((s) => `\`${s}\``).join(', ');
    return [
      `A new action is ${INITIAL_STATUSES.map((s) => `\`${s}\``).join(' or ')}. Final, no move leaves them: ${code(ACTION_STATUSES.filter((s) => ACTION_STATES[s].terminal))}.`,
      '',
      '| Move | From | To | Made by |',
      '|---|---|---|---|',
      ...transitionNames.map((name) => `| \`${name}\` | ${code(TRANSITIONS[name].from)} | ${code(TRANSITIONS[name].to)} | ${TRANSITIONS[name].by} |`),
      '',
      'Marks record news without moving the action, each at most once:',
      '',
      '| Mark | In | Records | Made when |',
      '|---|---|---|---|',
      ...markNames.map((name) => `| \`${name}\` | ${code(MARKS[name].on)} | ${MARKS[name].records} | ${MARKS[name].by} |`),
    ].join('\n');
  }

  it('has an "Action states (as implemented)" section', () => {
    expect(start).toBeGreaterThanOrEqual(0);
  });

  it('carries the table generated from the code between its markers (replace it with the expected text when this fails)', () => {
    const block = /<!-- generated:action-transitions:start -->\n([\s\S]*?)\n<!-- generated:action-transitions:end -->/.exec(section);
    expect(block, 'the markers are in the section').not.toBeNull();
    expect(block![1]).toBe(generated());
  });

  it.each([...ACTION_STATUSES])('mentions the status %s', (status) => {
    expect(section).toContain(`\`${status}\``);
  });

  it.each(transitionNames.map((name) => [name, statuses(TRANSITIONS[name].from), statuses(TRANSITIONS[name].to)]))('mentions the move %s (%s → %s)', (name) => {
    expect(section).toContain(`| \`${name}\` |`);
  });
});
