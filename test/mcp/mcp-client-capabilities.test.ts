import { McpServer } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { createLegacyElicitation, MAX_REMEMBERED_PER_CONNECTION } from '../../src/mcp/legacy-elicitation.js';

/**
 * What 2025-era clients declared on `initialize` is remembered in a bounded memory per
 * instance (src/mcp/legacy-elicitation.ts): one agent connection initializing over and over
 * forgets only its own clients, and a client in use is the last to be forgotten.
 */
const ELICITS = { elicitation: {} };
const LIMITS = { perConnection: 10, perWorkspace: 100, perInstance: 1000, waitMs: 1000 };

function declaredFor(memory: ReturnType<typeof createLegacyElicitation>, key: string): unknown {
  const server = new McpServer({ name: 'probe', version: '1' });
  memory.prepare(key, server);
  return (server.server as unknown as { _clientCapabilities?: unknown })._clientCapabilities;
}

describe('remembered client capabilities are bounded per connection and least recently used first', () => {
  it('keeps another connection’s client while one connection initializes 20,000 times', () => {
    const memory = createLegacyElicitation(LIMITS);
    memory.remember('victim', 'victim#s1', ELICITS);
    for (let i = 0; i < 20_000; i++) memory.remember('flooder', `flooder#${i}`, ELICITS);
    expect(declaredFor(memory, 'victim#s1')).toEqual(ELICITS);
    // The flooder keeps its own most recent clients only.
    expect(declaredFor(memory, 'flooder#19999')).toEqual(ELICITS);
    expect(declaredFor(memory, `flooder#${19_999 - MAX_REMEMBERED_PER_CONNECTION}`)).toBeUndefined();
  });

  it('keeps a client in use when the memory is full, forgetting the least recently used instead', () => {
    const memory = createLegacyElicitation(LIMITS);
    memory.remember('steady', 'steady#s1', ELICITS);
    // 10,000 clients in all, from connections that each stay within their own share.
    for (let c = 0; c < 100; c++) for (let i = 0; i < (c === 0 ? 99 : 100); i++) memory.remember(`conn${c}`, `conn${c}#${i}`, ELICITS);
    expect(declaredFor(memory, 'steady#s1')).toEqual(ELICITS);
    memory.remember('late', 'late#s1', ELICITS);
    expect(declaredFor(memory, 'steady#s1')).toEqual(ELICITS);
    expect(declaredFor(memory, 'conn0#0')).toBeUndefined();
    expect(declaredFor(memory, 'late#s1')).toEqual(ELICITS);
  });
});
