/**
 * What sends webhooks, given by the composition root (src/http/webhook-transport.ts): the
 * domain decides what is sent and when, the transport how, behind the service's SSRF guard.
 */
export interface WebhookTransport {
  /** Why this URL may not receive webhooks (not HTTPS, a non-public address), or undefined if it may. */
  refusal(url: URL): Promise<string | undefined>;
  /** POSTs `body` within `timeoutMs`; answers the response's status, or why there was none. */
  post(url: string, request: { headers: Record<string, string>; body: string; timeoutMs: number; signal: AbortSignal }): Promise<PostOutcome>;
}

export type PostOutcome = { statusCode: number } | { error: string };

/**
 * WEBHOOK_ALLOW_PRIVATE_HOSTS (docs/operators/security.md "Webhooks to a home network"): the
 * private hosts an operator lets webhooks reach, by name (lower case) or by range.
 */
export interface PrivateHostAllowance {
  names: string[];
  ranges: { address: string; prefix: number; family: 'ipv4' | 'ipv6' }[];
}
