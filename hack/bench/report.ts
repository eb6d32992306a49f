import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LoadResult } from './load.js';
import { BARE_FLOOR, QUERY_FLOOR, type Scenario } from './scenarios.js';
import { median } from './stats.js';

/** A scenario's runs, one per round. */
export interface ScenarioOutcome {
  scenario: Scenario;
  runs: ScenarioRun[];
}

/** One measured run of a scenario. */
export interface ScenarioRun {
  round: number;
  result?: LoadResult;
  /** CPU time per request of the server process and of its PostgreSQL backends (null off Linux). */
  serverCpuUsPerRequest?: number | null;
  dbCpuUsPerRequest?: number | null;
  /** Share of all CPUs spent outside the server, its backends and the load generator meanwhile (null off Linux). */
  otherCpuShare?: number | null;
  /** Why the run failed (probe mismatch, non-2xx, unexpected status, connection errors). */
  failure?: string;
  /** The one-query floor's throughput in the same round (at the same data size), when it ran. */
  queryFloorRps?: number | undefined;
}

export interface RunInfo {
  date: string;
  node: string;
  postgres: string;
  cpus: string;
  connections: number;
  warmupSeconds: number;
  durationSeconds: number;
  rounds: number;
  /** Share of all CPUs busy just before the run (other work on the machine); null off Linux. */
  machineBusyBefore: number | null;
  acisCommand: string;
}

/** A scenario's figures: the median over its rounds of each column, each ratio taken within its round. */
interface Row {
  id: string;
  title: string;
  dataset: string | null;
  rounds: number;
  rps: number | null;
  p50_ms: number | null;
  p99_ms: number | null;
  server_cpu_us_per_request: number | null;
  db_cpu_us_per_request: number | null;
  other_cpu_share: number | null;
  non_2xx: number | null;
  errors: number | null;
  statuses: Record<string, number>;
  pct_of_one_query_floor: number | null;
  /** The lowest and highest of the per-round ratios, to show how far the rounds agree. */
  pct_of_one_query_floor_range: [number, number] | null;
  pct_of_bare_floor: number | null;
  baseline: string | null;
  baseline_dataset: string | null;
  pct_of_baseline: number | null;
  failure: string | null;
  /** Every round's own figures. */
  per_round: Array<{ round: number; rps: number | null; pct_of_one_query_floor: number | null; failure: string | null }>;
}

/**
 * Each row is the median of its rounds. The ratio to the one-query floor is taken within each round
 * (the floor leads every round) and then the median taken, so a machine that speeds up or slows
 * down between rounds or data sizes moves a scenario and its floor together. The comparison with a
 * baseline (the same request at 1k tenants) is of those floor-relative medians, for the same reason.
 */
function rows(outcomes: ScenarioOutcome[]): Row[] {
  const outcomeOf = (id: string | undefined) => outcomes.find((o) => o.scenario.id === id);
  const pct = (value: number | null | undefined, of: number | null | undefined) => (value && of ? (100 * value) / of : null);
  const medianOf = (runs: ScenarioRun[], pick: (run: ScenarioRun) => number | null | undefined) =>
    median(runs.map(pick).filter((value): value is number => typeof value === 'number'));
  const roundPct = (scenario: Scenario, run: ScenarioRun) => (scenario.id === QUERY_FLOOR ? null : pct(run.result?.rps, run.queryFloorRps));
  /** Each round's ratio to its own floor (none for the floor itself). */
  const roundRatios = ({ scenario, runs }: ScenarioOutcome) =>
    runs.map((run) => roundPct(scenario, run)).filter((value): value is number => value !== null);
  const floorPct = (outcome: ScenarioOutcome | undefined) => (outcome ? median(roundRatios(outcome)) : null);
  const bareFloorRps = medianOf(outcomeOf(BARE_FLOOR)?.runs ?? [], (run) => run.result?.rps);
  return outcomes.map((outcome) => {
    const { scenario, runs } = outcome;
    const ratios = roundRatios(outcome);
    const failed = runs.filter((run) => run.failure);
    const sum = (pick: (result: LoadResult) => number) => runs.reduce((total, run) => total + (run.result ? pick(run.result) : 0), 0);
    const statuses: Record<string, number> = {};
    for (const run of runs)
      for (const [code, count] of Object.entries(run.result?.statuses ?? {})) statuses[code] = (statuses[code] ?? 0) + count;
    const rps = medianOf(runs, (run) => run.result?.rps);
    return {
      id: scenario.id,
      title: scenario.title,
      dataset: scenario.dataset,
      rounds: runs.length,
      rps,
      p50_ms: medianOf(runs, (run) => run.result?.p50Ms),
      p99_ms: medianOf(runs, (run) => run.result?.p99Ms),
      server_cpu_us_per_request: medianOf(runs, (run) => run.serverCpuUsPerRequest),
      db_cpu_us_per_request: medianOf(runs, (run) => run.dbCpuUsPerRequest),
      other_cpu_share: medianOf(runs, (run) => run.otherCpuShare),
      non_2xx: runs.some((run) => run.result) ? sum((result) => result.non2xx) : null,
      errors: runs.some((run) => run.result) ? sum((result) => result.errors) : null,
      statuses,
      pct_of_one_query_floor: median(ratios),
      pct_of_one_query_floor_range: ratios.length ? [Math.min(...ratios), Math.max(...ratios)] : null,
      pct_of_bare_floor: scenario.id === BARE_FLOOR ? null : pct(rps, bareFloorRps),
      baseline: scenario.baseline ?? null,
      baseline_dataset: outcomeOf(scenario.baseline)?.scenario.dataset ?? null,
      pct_of_baseline: pct(floorPct(outcome), floorPct(outcomeOf(scenario.baseline))),
      failure: failed.length ? `${failed.length} of ${runs.length} rounds failed; round ${failed[0]!.round}: ${failed[0]!.failure}` : null,
      per_round: runs.map((run) => ({
        round: run.round,
        rps: run.result?.rps ?? null,
        pct_of_one_query_floor: roundPct(scenario, run),
        failure: run.failure ?? null,
      })),
    };
  });
}

const num = (value: number | null, digits: number) => (value === null ? 'n/a' : value.toFixed(digits));
/** The first words of a failure, safe inside a table cell (the whole text is in the JSON file). */
const cell = (text: string) => {
  const flat = text.replace(/\s+/g, ' ').replaceAll('|', '\\|');
  return flat.length > 120 ? `${flat.slice(0, 120)}…` : flat;
};
const percent = (value: number | null) => (value === null ? '' : `${value.toFixed(0)}%`);

export function renderMarkdown(info: RunInfo, outcomes: ScenarioOutcome[]): string {
  const table = rows(outcomes).map((row) =>
    [
      row.title,
      row.dataset ? `${row.dataset} tenants` : '',
      num(row.rps, 0),
      num(row.p50_ms, 2),
      num(row.p99_ms, 2),
      num(row.server_cpu_us_per_request, 0),
      num(row.db_cpu_us_per_request, 0),
      row.other_cpu_share === null ? 'n/a' : percent(100 * row.other_cpu_share),
      row.failure ? `**${row.non_2xx ?? 'n/a'} FAILED: ${cell(row.failure)}**` : String(row.non_2xx),
      row.pct_of_one_query_floor === null
        ? ''
        : `${percent(row.pct_of_one_query_floor)}${row.rounds > 1 && row.pct_of_one_query_floor_range ? ` (${row.pct_of_one_query_floor_range.map((v) => v.toFixed(0)).join('–')})` : ''}`,
      percent(row.pct_of_bare_floor),
      row.pct_of_baseline === null ? '' : `${percent(row.pct_of_baseline)} of ${row.baseline_dataset ?? row.baseline}`,
    ].join(' | '),
  );
  return [
    '### Provisioning plane benchmark',
    '',
    `${info.date}; Node ${info.node}; ${info.postgres}; ${info.cpus}.`,
    `Every server in its own process on loopback, autocannon in the bench process; ${info.connections} connections,`,
    `${info.warmupSeconds} s warm-up then ${info.durationSeconds} s measured per scenario; ${info.rounds} round(s) at each data size,`,
    'each led by the one-query floor. Every column is the median of the rounds; a ratio to the one-query floor is taken',
    'within its round (its range over the rounds in brackets), and "vs baseline" compares those floor-relative medians.',
    `ACIS: \`${info.acisCommand}\`, LOG_LEVEL=warn, database pool of 20, no pre-started sandbox runners.`,
    info.machineBusyBefore === null ? '' : `Machine ${(100 * info.machineBusyBefore).toFixed(0)}% busy just before the run.`,
    'CPU columns: CPU time per request of the server process and of its PostgreSQL backends; "other CPU": share of',
    'the machine spent meanwhile outside them and the load generator (other processes, interrupts); when it is high,',
    "that row's throughput is low and noisy, and its CPU per request is the steadier figure.",
    '',
    '| Scenario | Data | req/s | p50 ms | p99 ms | server CPU µs/req | db CPU µs/req | other CPU | non-2xx | % of 1-query floor | % of bare floor | vs baseline |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...table.map((line) => `| ${line} |`),
    '',
  ].join('\n');
}

/** Writes `<name>.md` and `<name>.json` under `dir`; returns their paths. */
export async function writeReport(dir: string, name: string, info: RunInfo, outcomes: ScenarioOutcome[]): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const markdownPath = path.join(dir, `${name}.md`);
  const jsonPath = path.join(dir, `${name}.json`);
  await writeFile(markdownPath, renderMarkdown(info, outcomes));
  await writeFile(jsonPath, `${JSON.stringify({ ...info, scenarios: rows(outcomes) }, null, 2)}\n`);
  return [markdownPath, jsonPath];
}
