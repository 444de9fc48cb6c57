import path from 'node:path';

/**
 * The environment the measuring scripts (bench, roundtrips, wake-latency) start the service
 * with: a temp libSQL file in `dir`, loopback, an OS-chosen port, no log lines, and the rate
 * limits and workspace caps raised out of the way, so they measure the service and not its
 * limiter. Scripts add or override what they need.
 */
export function measuringEnv(dir: string): Record<string, string> {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: `file:${path.join(dir, 'service.db')}`,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_AGENT_PER_SECOND: '1000000',
    RATE_LIMIT_AGENT_BURST: '1000000',
    RATE_LIMIT_DEVICE_PER_SECOND: '1000000',
    RATE_LIMIT_DEVICE_BURST: '1000000',
    RATE_LIMIT_OWNER_PER_SECOND: '1000000',
    RATE_LIMIT_OWNER_BURST: '1000000',
    AUTH_FAILURES_PER_MINUTE: '1000000',
    WORKSPACE_MAX_DEVICES: '100000',
    WORKSPACE_MAX_QUEUED_ACTIONS: '1000000',
    DEVICE_QUEUE_PER_PRINCIPAL: '1000000',
    WORKSPACE_MAX_AGENT_CONNECTIONS: '100000',
    WORKSPACE_MAX_SETUP_TOKENS: '100000',
    WORKSPACE_MAX_ENROLLMENT_CODES: '100000',
    WORKSPACE_MAX_OAUTH_CLIENTS: '100000',
    WORKSPACE_MAX_GRANTS: '10000000',
    WORKSPACE_MAX_WEBHOOKS: '100000',
    EVENTS_MAX_STREAMS_PER_WORKSPACE: '100000',
    // The task phase holds one subscriptions/listen stream per agent loop, all on one token.
    MCP_LISTEN_PER_CONNECTION: '100000',
    MCP_LISTEN_PER_WORKSPACE: '100000',
    MCP_LISTEN_PER_INSTANCE: '100000',
  };
}
