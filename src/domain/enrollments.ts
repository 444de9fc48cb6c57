import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { hashToken, issueToken } from './tokens.js';
import { consumeEnrollment, insertEnrollment, recordEnrolledDevice } from '../store/enrollments.js';
import { assertDeviceCapacity, assertWithinCap } from './capacity.js';
import { createAttachedDevice } from './devices.js';
import { DomainError } from './errors.js';
import { defineOperation } from './operation.js';
import { attachedDevice, timestamp, uuid } from './schemas.js';

/** Legacy board enrollment (docs/reference/rules.md "Devices"): a one-use code valid 10 minutes. */
const ENROLLMENT_TTL_MS = 10 * 60_000;

export const createEnrollment = defineOperation({
  name: 'enrollments.create',
  title: 'Create a board enrollment code (legacy)',
  description: 'Legacy: create a one-use board enrollment code, valid 10 minutes. New devices should use setup tokens.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false },
  rest: [{ method: 'POST', path: '/v1/enrollments', status: 201, deprecated: true }],
  input: z.strictObject({}),
  output: z.object({
    id: uuid,
    code: z.string().describe('Secret, returned once only.'),
    expiresAt: timestamp,
  }),
  async run({ ctx, credential }) {
    const now = ctx.clock.now();
    const issued = issueToken('enrollment');
    const row = {
      id: randomUUID(),
      workspaceId: credential.workspaceId,
      codePrefix: issued.displayPrefix,
      expiresAt: now + ENROLLMENT_TTL_MS,
      usedAt: null,
      createdAt: now,
    };
    await ctx.db.transaction(async (tx) => {
      await insertEnrollment(tx, { ...row, codeHash: issued.hash, createdBy: credential.subject });
      await assertWithinCap(tx, ctx.settings.capacity, 'enrollmentCodes', credential.workspaceId, now);
    });
    return { id: row.id, code: issued.token, expiresAt: row.expiresAt };
  },
});

export const enrollBoard = defineOperation({
  name: 'enrollments.enroll',
  title: 'Enroll a board (legacy)',
  description: 'Legacy: a board trades its enrollment code for a device credential, once.',
  // The code in the body is the credential; a bearer header is not needed.
  credentials: ['public'],
  access: 'none',
  hints: { readOnly: false, destructive: false },
  rest: [{ method: 'POST', path: '/v1/device/enroll', status: 201, deprecated: true }],
  input: z.strictObject({
    code: z.string().min(1).max(128),
    name: z.string().min(1).max(64),
    kind: z.enum(['device', 'gateway']).default('device'),
  }),
  output: attachedDevice,
  run: ({ ctx, input }) =>
    ctx.db.transaction(async (tx) => {
      const now = ctx.clock.now();
      const enrollment = await consumeEnrollment(tx, hashToken(input.code), now);
      if (!enrollment) throw new DomainError('unauthorized', 'The enrollment code is unknown, used or expired.');
      await assertDeviceCapacity(tx, ctx.settings.capacity, enrollment.workspaceId, 1);
      const attached = await createAttachedDevice(tx, {
        workspaceId: enrollment.workspaceId,
        name: input.name,
        kind: input.kind,
        attachedVia: enrollment.id,
        now,
      });
      await recordEnrolledDevice(tx, enrollment.id, attached.device.id);
      return attached;
    }),
});
