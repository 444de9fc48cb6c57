// The types of scripts/node-lines.mjs, which plain Node runs without a build.
export declare const NODE_BINARIES: Readonly<Record<24 | 22 | 20, string>>;
export declare const NODE22_HELPERS: readonly string[];
export declare const NODE22_EXEMPT: Readonly<Record<string, string>>;
export declare const NODE_LINE_FILES: Readonly<{ 24: undefined; 22: readonly string[]; 20: readonly string[] }>;
