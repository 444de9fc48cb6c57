import { z } from 'zod';
import { defineOperation } from './operation.js';

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
