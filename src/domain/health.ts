import { z } from 'zod';
import { DATABASE_RETRY_AFTER_SECONDS, DomainError } from './errors.js';
import { defineOperation } from './operation.js';
import { checkDependenciesShared } from './readiness.js';

export const healthObject = z.object({
  service: z.string().describe("The service's short name."),
  protocolVersion: z.literal(1),
  commit: z.string().optional(),
  authConfigured: z.boolean().describe('True when owner sessions come from an external identity provider.'),
  deviceControlsEnabled: z.boolean().describe('False while the kill switch refuses every new action.'),
});

export const getHealth = defineOperation({
  name: 'health.get',
  title: 'Service health',
  description: 'Service health. It says nothing of device health or physical execution.',
  credentials: ['public'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/healthz', unwrapped: true }],
  input: z.object({}),
  output: healthObject,
  async run({ ctx }) {
    const { serviceName, commit, authConfigured, deviceControlsEnabled } = ctx.settings;
    return {
      service: serviceName,
      protocolVersion: 1 as const,
      ...(commit ? { commit } : {}),
      authConfigured,
      deviceControlsEnabled,
    };
  },
});

export const readinessObject = z.object({
  status: z.literal('ready'),
  dependencies: z
    .array(z.object({ name: z.enum(['database', 'redis']), state: z.literal('up') }))
    .describe('Every dependency this instance is configured with, each answering.'),
});

/**
 * Readiness (docs/operators/probes.md "Probes"): whether this instance can serve requests now. Unlike
 * /healthz (liveness: the process answers), it asks every dependency — the database with a
 * bounded `SELECT 1` and a look at its write lock that never waits, Redis when configured — and
 * answers 503 `unavailable` naming the ones that do not answer or are locked. A probe is public, so the body says which dependency is down and not
 * the driver's words (an internal address, say): those go to the log.
 */
export const getReadiness = defineOperation({
  name: 'readiness.get',
  title: 'Service readiness',
  description:
    'Whether this instance can serve requests now: 200 when every dependency (the database, Redis when configured) answers, 503 `unavailable` naming the ones that do not (the embedded database also when another process holds its write lock). For load balancers and readiness probes; /healthz is liveness.',
  credentials: ['public'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/readyz', unwrapped: true }],
  input: z.object({}),
  output: readinessObject,
  async run({ ctx }) {
    const states = await checkDependenciesShared(ctx.settings.dependencies);
    const down = states.filter((state) => !state.up);
    if (down.length === 0) return { status: 'ready' as const, dependencies: states.map(({ name }) => ({ name, state: 'up' as const })) };
    for (const { name, reason } of down) ctx.log.warn({ msg: 'dependency unavailable', requestId: ctx.requestId, dependency: name, error: reason });
    const listed = states.map(({ name, up, problem }) => `${name} ${up ? 'up' : problem === 'locked by another process' ? 'locked' : 'down'}`).join(', ');
    const what = down.map(({ name, problem }) => `${name} ${problem ?? 'not answering'}`).join(' and ');
    throw new DomainError('unavailable', `Not ready: ${what} (${listed}).`, {
      issues: down.map(({ name, problem }) => ({ path: name, message: problem ?? 'not answering' })),
      retryAfterSeconds: DATABASE_RETRY_AFTER_SECONDS,
    });
  },
});
