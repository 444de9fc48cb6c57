import type { Context } from 'hono';
import type { OperationContext, CredentialOf } from '../domain/context.js';
import { callableFunctionsValidUntil } from '../domain/functions.js';
import { answerInParts, type HttpEnv } from '../http/request.js';
import type { Admitted } from './gate.js';
import { cacheableToolsList, toolsListKey, type ToolsListCache } from './tools-list-cache.js';

/** What a cache miss keeps the SDK's answer under, once it is answered. */
export interface ListToKeep {
  workspaceId: string;
  key: string;
  version: number;
  validUntil: number;
}

/**
 * The answer path of a modern tools/list: from the caller's cached list while it is current
 * (tools-list-cache.ts); a miss says under which key the SDK's answer is to be kept.
 * Anything else goes on (`{}`).
 */
export async function cachedListAnswer(
  c: Context<HttpEnv>,
  ctx: OperationContext,
  request: Admitted,
  toolLists: ToolsListCache,
): Promise<{ response: Response } | { keep?: ListToKeep }> {
  const { credential } = request;
  const cacheable = request.parsedOk ? cacheableToolsList(c.req.raw.headers, request.parsed) : undefined;
  if (!cacheable) return {};
  const now = ctx.clock.now();
  const version = credential.functionsVersion;
  const key = listKey(ctx, credential, cacheable.cursor);
  const cached = toolLists.answer(credential.workspaceId, key, { version, now }, cacheable.id);
  if (cached) return { response: answerInParts(c, cached.headers, cached.parts) };
  return { keep: { workspaceId: credential.workspaceId, key, version, validUntil: await callableFunctionsValidUntil(ctx.db, credential, now) } };
}

function listKey(ctx: OperationContext, credential: CredentialOf<'agent'>, cursor: string | undefined): string {
  return toolsListKey(credential.workspaceId, credential.principal, credential.access, ctx.settings.deviceControlsEnabled, cursor);
}
