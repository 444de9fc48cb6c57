import type { McpServer } from '@modelcontextprotocol/server';

const GUIDE = `You can operate physical devices through this server. Work like this:

1. Call list_functions (or list_devices) to see exactly what you may do now. Each device function is also a tool named <function>__<first 12 hex digits of the device id>; its description names the device and where it sits (a device behind a gateway, an integration-wide service).
2. Prefer read functions (readOnlyHint) to learn the state before you change anything. Control functions act in the physical world: do only what the user asked for.
3. A device tool call queues an action, waits up to 10 seconds for the device's result and returns the Action; a call that declares MCP Tasks instead gets a task after 1 second, which its client follows until the action ends (a call waiting for the owner's approval, up to the approval window). If its status is still "awaiting_approval" (the owner must approve it first), "queued" or "received", follow it with get_action or the action:// resource instead of calling the tool again; cancel_action can still stop it while it is awaiting approval or queued. Cancelling the call itself (or closing its response) withdraws its action too.
4. Give each device tool call a fresh request _meta "dfc/idempotencyKey" (1 to 128 characters) and send the same key when you retry it after a lost answer: the retry returns the first call's Action and the device acts once. "dfc/ttlSeconds" (1 to 300, default 30) sets how long the device has to act.
5. "failed" and "expired" results are errors: report them, do not retry blindly.
6. A 403 means the owner has not granted (or has revoked) that function, or your access is read-only: ask the user, do not work around it.`;

/**
 * One prompt: how an agent should use this server. It is real guidance for the model, and
 * it also makes prompts/list a real method here rather than -32601.
 */
export function registerPrompts(server: McpServer): void {
  server.registerPrompt(
    'operate_devices',
    { title: 'Operate devices safely', description: 'How to discover, call and follow device functions on this server.' },
    () => ({ messages: [{ role: 'user', content: { type: 'text', text: GUIDE } }] }),
  );
}
