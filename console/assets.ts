/** The built single-page app as the console's port serves it (console/ui/build.ts makes it). */
export interface ConsoleAsset {
  body: Buffer;
  contentType: string;
  /** Content-hashed file names never change: cached for a year. index.html is revalidated. */
  immutable: boolean;
}

/** Files by URL path (`/` is index.html). */
export type ConsoleAssets = ReadonlyMap<string, ConsoleAsset>;
