/**
 * What a grant the owner makes in a browser starts with (docs/owners/console-guide.md "Safer
 * defaults"), on the console's grant form and on the OAuth consent page alike: owner approval,
 * so a control function moves nothing without the owner's yes, and an expiry of 7 days, so a
 * forgotten grant ends by itself. The API's own defaults (none, no expiry) are unchanged.
 */
export const BROWSER_GRANT_DEFAULTS = { approval: 'owner', ttlSeconds: 604_800 } as const;
