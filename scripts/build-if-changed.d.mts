// The types of scripts/build-if-changed.mjs, which plain Node runs without a build.
export declare const root: string;
export declare class BuildFailed extends Error {
  readonly status: number;
  constructor(message: string, status: number);
}
export declare function buildIfChanged(who: string): void;
