import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LoadResult } from './load.js';
import { BARE_FLOOR, QUERY_FLOOR, type Scenario } from './scenarios.js';

export interface ScenarioOutcome {
  scenario: Scenario;
  result?: LoadResult;
  /** CPU time per request of the server process and of its PostgreSQL backends (null off Linux). */
  serverCpuUsPerRequest?: number | null;
  dbCpuUsPerRequest?: number | null;
  /** Share of all CPUs spent outside the server, its backends and the load generator meanwhile (null off Linux). */
  otherCpuShare?: number | null;
  /** Why the scenario failed (probe mismatch, non-2xx, unexpected status, connection errors). */
  failure?: string;
}

export interface RunInfo {
  date: string;
  node: string;
  postgres: string;
  cpus: string;
  connections: number;
  warmupSeconds: number;
  durationSeconds: number;
  /** Share of all CPUs busy just before the run (other work on the machine); null off Linux. */
  machineBusyBefore: number | null;
  acisCommand: string;
}

interface Row {
  id: string;
  title: string;
  dataset: string | null;
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
  pct_of_bare_floor: number | null;
  baseline: string | null;
  baseline_dataset: string | null;
  pct_of_baseline: number | null;
  failure: string | null;
}

function rows(outcomes: ScenarioOutcome[]): Row[] {
  const outcomeOf = (id: string | undefined) => outcomes.find((o) => o.scenario.id === id);
  const rpsOf = (id: string | undefined) => outcomeOf(id)?.result?.rps;
  const pct = (rps: number | undefined, of: number | undefined) => (rps && of ? (100 * rps) / of : null);
  return outcomes.map(({ scenario, result, serverCpuUsPerRequest, dbCpuUsPerRequest, otherCpuShare, failure }) => ({
    id: scenario.id,
    title: scenario.title,
    dataset: scenario.dataset,
    rps: result?.rps ?? null,
    p50_ms: result?.p50Ms ?? null,
    p99_ms: result?.p99Ms ?? null,
    server_cpu_us_per_request: serverCpuUsPerRequest ?? null,
    db_cpu_us_per_request: dbCpuUsPerRequest ?? null,
    other_cpu_share: otherCpuShare ?? null,
    non_2xx: result?.non2xx ?? null,
    errors: result?.errors ?? null,
    statuses: result?.statuses ?? {},
    pct_of_one_query_floor: scenario.id === QUERY_FLOOR ? null : pct(result?.rps, rpsOf(QUERY_FLOOR)),
    pct_of_bare_floor: scenario.id === BARE_FLOOR ? null : pct(result?.rps, rpsOf(BARE_FLOOR)),
    baseline: scenario.baseline ?? null,
    baseline_dataset: outcomeOf(scenario.baseline)?.scenario.dataset ?? null,
    pct_of_baseline: pct(result?.rps, rpsOf(scenario.baseline)),
    failure: failure ?? null,
  }));
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
      percent(row.pct_of_one_query_floor),
      percent(row.pct_of_bare_floor),
      row.pct_of_baseline === null ? '' : `${percent(row.pct_of_baseline)} of ${row.baseline_dataset ?? row.baseline}`,
    ].join(' | '),
  );
  return [
    '### Provisioning plane benchmark',
    '',
    `${info.date}; Node ${info.node}; ${info.postgres}; ${info.cpus}.`,
    `Every server in its own process on loopback, autocannon in the bench process; ${info.connections} connections,`,
    `${info.warmupSeconds} s warm-up then ${info.durationSeconds} s measured per scenario.`,
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
export async function writeReport(
  dir: string,
  name: string,
  info: RunInfo,
  outcomes: ScenarioOutcome[],
): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const markdownPath = path.join(dir, `${name}.md`);
  const jsonPath = path.join(dir, `${name}.json`);
  await writeFile(markdownPath, renderMarkdown(info, outcomes));
  await writeFile(jsonPath, `${JSON.stringify({ ...info, scenarios: rows(outcomes) }, null, 2)}\n`);
  return [markdownPath, jsonPath];
}
