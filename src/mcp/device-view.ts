import { createHash } from 'node:crypto';
import { once } from './advertised-schemas.js';
import { DEVICE_VIEW_SCRIPT } from './device-view-script.js';
import { DEVICE_VIEW_STYLE } from './device-view-style.js';

/** At most this many bytes per view (docs/agents/apps.md "Limits"). */
export const MAX_VIEW_BYTES = 64 * 1024;

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/**
 * The device view's HTML: one self-contained page, its script and style inline. Its own
 * Content-Security-Policy allows that script and that style by hash and nothing else: no
 * request, no remote script, style, font, image or frame, whatever the host's policy adds.
 * The page starts empty; the script fills it from the tool result the host hands it, with
 * `textContent` only, so nothing a device wrote is ever read as markup.
 */
export const deviceViewHtml = once((): string => {
  const policy = [
    "default-src 'none'",
    `script-src ${sha256(DEVICE_VIEW_SCRIPT)}`,
    `style-src ${sha256(DEVICE_VIEW_STYLE)}`,
    "img-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${policy}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Device</title>
<style>${DEVICE_VIEW_STYLE}</style>
</head>
<body>
<main>
<h1 id="device">Device</h1>
<p id="status" role="status" aria-live="polite">Waiting for the tool's answer.</p>
<section id="action" aria-labelledby="action-heading" hidden>
<h2 id="action-heading">Action</h2>
<ol id="steps"></ol>
<p id="approval" hidden>The owner decides in the console. <button type="button" id="open-console">Open the console</button></p>
<div id="outcome" hidden><h3 id="outcome-heading">Result</h3><pre id="outcome-text"></pre></div>
</section>
<section id="state" aria-labelledby="state-heading" hidden>
<h2 id="state-heading">Last-known values</h2>
<p id="online"></p>
<table id="values"><thead><tr><th scope="col">Function</th><th scope="col">Value</th><th scope="col">Reported</th></tr></thead><tbody id="value-rows"></tbody></table>
<p id="no-values" hidden>No values reported yet.</p>
</section>
<p id="error" role="alert" hidden></p>
<div id="controls" role="group" aria-label="Controls">
<button type="button" id="again" disabled>Run again</button>
<button type="button" id="refresh" disabled>Refresh</button>
</div>
</main>
<script>${DEVICE_VIEW_SCRIPT}</script>
</body>
</html>
`;
  const bytes = Buffer.byteLength(html, 'utf8');
  if (bytes > MAX_VIEW_BYTES) throw new Error(`the device view is ${bytes} bytes, over its ${MAX_VIEW_BYTES}`);
  return html;
});
