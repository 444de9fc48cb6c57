import { EXTENSION_ID, RESOURCE_MIME_TYPE } from '@modelcontextprotocol/ext-apps/server';
import type { McpServer } from '@modelcontextprotocol/server';
import type { ActionRecord } from '../domain/action-records.js';
import { deviceText, MAX_DEVICE_NAME_CHARS } from './device-text.js';
import { deviceViewHtml } from './device-view.js';

// ---------------------------------------------------------------------------------------
// MCP Apps (docs/agents/apps.md): the extension as `@modelcontextprotocol/ext-apps` defines it.
// The server declares it, device tools and get_device_state name the device view in
// `_meta.ui.resourceUri`, and the view is one `ui://` resource. A client that does not speak the
// extension sees the same tools and answers; the `_meta` entries are for the host to ignore.
// ---------------------------------------------------------------------------------------

/** The extension's key in `capabilities.extensions`: `io.modelcontextprotocol/ui`. */
export const APPS_EXTENSION = EXTENSION_ID;

/** The view's media type: `text/html;profile=mcp-app`. */
export const APP_MIME_TYPE = RESOURCE_MIME_TYPE;

/** The one view: a device, its last-known values and an action's progress. */
export const DEVICE_VIEW_URI = 'ui://device-function-control/device.html';

/** What a tool that shows the device view carries in its `_meta` (and nothing else: it is repeated in each device tool of a tools/list). */
export const VIEW_TOOL_META = { ui: { resourceUri: DEVICE_VIEW_URI } } as const;

/**
 * The view's sandbox: it loads nothing from anywhere (every script and style is inline), so
 * each list of allowed domains is empty. No `domain`: the view needs no stable origin (no
 * OAuth callback, no CORS, no API key), so a host's default per-conversation origin serves it.
 */
export const DEVICE_VIEW_RESOURCE_META = {
  ui: { csp: { connectDomains: [], resourceDomains: [], frameDomains: [], baseUriDomains: [] }, prefersBorder: true },
};

/** Result `_meta` key: what the view needs and the structured answer does not say (the device's name, the tool to call again). */
export const VIEW_RESULT_META_KEY = 'dfc/view';

export interface ViewResultMeta {
  deviceId: string;
  /** The device's own name, cleaned as in tool titles (device-text.ts); the view shows it as text. */
  deviceName: string;
  /** The device tool that queued the action: what the view's "Run again" calls. */
  tool?: string;
  /** The owner's console page of an action that needs the owner's approval. */
  consoleUrl?: string;
}

export function viewResultMeta(view: ViewResultMeta): Record<string, unknown> {
  return { [VIEW_RESULT_META_KEY]: { ...view, deviceName: deviceText(view.deviceName, MAX_DEVICE_NAME_CHARS) || '?' } };
}

/** The console page where the owner decides on an action (the link the approval webhooks carry). */
export function consoleActionUrl(publicBaseUrl: string, action: Pick<ActionRecord, 'id'>): string {
  return `${publicBaseUrl}/console/actions/${encodeURIComponent(action.id)}`;
}

/** Lists and reads the device view. The same for every caller: what it shows comes from the caller's own tool results. */
export function registerAppResources(server: McpServer): void {
  server.registerResource(
    'device-view',
    DEVICE_VIEW_URI,
    {
      title: 'Device view',
      description: "An interactive view of a device tool's answer for MCP Apps hosts: the device, its last-known values and the action's progress.",
      mimeType: APP_MIME_TYPE,
      _meta: DEVICE_VIEW_RESOURCE_META,
    },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: APP_MIME_TYPE, text: deviceViewHtml(), _meta: DEVICE_VIEW_RESOURCE_META }] }),
  );
}
