/** What every plane of `npm run bench` is given, and what it gives back (run.ts prints and files it). */

export interface PlaneContext {
  root: string;
  outDir: string;
  newDatabase(): Promise<string>;
  /** Registers an undo step (run newest first, also on failure and Ctrl-C). */
  defer(step: () => Promise<unknown>): void;
}

export interface PlaneResult {
  markdown: string;
  failures: string[];
  files: string[];
}
