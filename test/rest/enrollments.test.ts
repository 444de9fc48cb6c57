import { beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../helpers/clock.js';
import { createSetupToken, lampManifest } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

const ENROLLMENT_CODE = /^dfc_enroll_[A-Za-z0-9_-]{43}$/;
const TEN_MINUTES = 10 * 60_000;

const clock = manualClock();
let owner: string;

const server = useTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('enrollment-owner');
});

async function newCode(): Promise<{ id: string; code: string; expiresAt: number }> {
  const res = await api.post('/v1/enrollments', { token: owner });
  expect(res.status).toBe(201);
  return res.body.data;
}

describe('POST /v1/enrollments (legacy)', () => {
  it('returns a one-use 256-bit code valid 10 minutes', async () => {
    const res = await api.post('/v1/enrollments', { token: owner });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.any(String),
      code: expect.stringMatching(ENROLLMENT_CODE),
      expiresAt: clock.now() + TEN_MINUTES,
    });
  });

  it('rejects unknown body fields with 400', async () => {
    const res = await api.post('/v1/enrollments', { token: owner, body: { ttlSeconds: 3600 } });
    expect(res.status).toBe(400);
  });

  it('answers 403 to a setup token (a valid credential of another kind)', async () => {
    const setup = await createSetupToken(api, owner);
    expect((await api.post('/v1/enrollments', { token: setup.token })).status).toBe(403);
  });
});

describe('POST /v1/device/enroll (legacy)', () => {
  it('trades a code for a device credential, answering like /v1/sdk/devices', async () => {
    const { code } = await newCode();
    const res = await api.post('/v1/device/enroll', { body: { code, name: 'Old board' } });
    expect(res.status).toBe(201);
    const account = await api.get('/v1/account', { token: owner });
    expect(res.body.data).toMatchObject({
      device: { name: 'Old board', kind: 'device', parentId: null, revoked: false, capabilities: [] },
      token: expect.stringMatching(/^dfc_device_/),
      workspace: account.body.data.routingId,
    });
    const { device, token } = res.body.data;
    expect((await api.post(`/v1/device/${device.id}/manifest`, { token, body: lampManifest })).status).toBe(200);
    const list = await api.get('/v1/devices', { token: owner });
    expect(list.body.data.map((d: { id: string }) => d.id)).toContain(device.id);
  });

  it('accepts a code only once', async () => {
    const { code } = await newCode();
    expect((await api.post('/v1/device/enroll', { body: { code, name: 'first' } })).status).toBe(201);
    const again = await api.post('/v1/device/enroll', { body: { code, name: 'second' } });
    expect(again.status).toBe(401);
    expect(again.body.error.code).toBe('unauthorized');
  });

  it('lets exactly one of two concurrent enrollments with the same code win', async () => {
    const { code } = await newCode();
    const results = await Promise.all([
      api.post('/v1/device/enroll', { body: { code, name: 'A' } }),
      api.post('/v1/device/enroll', { body: { code, name: 'B' } }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 401]);
  });

  it('accepts a code one millisecond before its 10 minutes are up', async () => {
    const { code, expiresAt } = await newCode();
    try {
      clock.set(expiresAt - 1);
      expect((await api.post('/v1/device/enroll', { body: { code, name: 'in time' } })).status).toBe(201);
    } finally {
      clock.set(Date.now());
    }
  });

  it('answers 401 once the 10 minutes are up', async () => {
    const { code, expiresAt } = await newCode();
    try {
      clock.set(expiresAt);
      expect((await api.post('/v1/device/enroll', { body: { code, name: 'late' } })).status).toBe(401);
    } finally {
      clock.set(Date.now());
    }
  });

  it('answers 401 for an unknown code and 400 for a missing one', async () => {
    expect((await api.post('/v1/device/enroll', { body: { code: 'dfc_enroll_nope', name: 'x' } })).status).toBe(401);
    const missing = await api.post('/v1/device/enroll', { body: { name: 'x' } });
    expect(missing.status).toBe(400);
    expect(missing.body.error.issues.map((i: { path: string }) => i.path)).toContain('code');
  });

  it('does not spend the code on an invalid request', async () => {
    const { code } = await newCode();
    expect((await api.post('/v1/device/enroll', { body: { code, name: '' } })).status).toBe(400);
    expect((await api.post('/v1/device/enroll', { body: { code, name: 'valid' } })).status).toBe(201);
  });
});
