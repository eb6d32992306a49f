/** What every plane of `npm run bench` is given, and what it gives back (run.ts prints and files it). */

export interface PlaneContext {
  root: string;
  outDir: string;
  newDatabase(): Promise<string>;
  /** Registers an undo step (run newest first, also on failure and Ctrl-C). */
  defer(step: () => Promise<unknown>): void;
  /** True once Ctrl-C (or SIGTERM) arrived: a plane's long loops stop instead of starting more work. */
  interrupted(): boolean;
}

export interface PlaneResult {
  markdown: string;
  failures: string[];
  files: string[];
}
