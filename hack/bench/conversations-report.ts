import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { FloorId, FloorRun, TurnTiming, Where } from './sdk-floors.js';
import { percentile } from './stats.js';

export const CASE_IDS = ['warm', 'pooled', 'pooled-first', 'pooled-first-unprewarmed', 'cold'] as const;
export type CaseId = (typeof CASE_IDS)[number];

export interface CaseRun {
  id: CaseId;
  timings: TurnTiming[];
  /** Pooled: ms from the terminal line until the node was idle again with a new pre-started runner. */
  refillMs?: number[];
  /** Share of the CPUs other processes took during the measured turns. */
  otherCpuShare: number | null;
  failure?: string;
}

export interface TreeRss {
  totalMiB: number;
  byName: Record<string, number>;
}

export interface MemoryFigures {
  /** A pre-started runner nobody claimed yet (its runtime prewarmed). */
  idleRunner?: TreeRss;
  /** The same with ACIS_POOL_PREWARM=0. */
  idleRunnerWithoutPrewarm?: TreeRss;
  /** A warm conversation's runner between turns, its SDK session live. */
  heldRunner?: TreeRss;
  /** The ACIS server process alone. */
  serverIdleMiB?: number;
  serverOneStreamMiB?: number;
  serverManyStreamsMiB?: number;
  followerStreams?: number;
  failure?: string;
}

export interface ConversationRunInfo {
  date: string;
  node: string;
  cpus: string;
  turns: number;
  warmupTurns: number;
  isolation: string;
  acisCommand: string;
  streams: number;
}

/**
 * Each case, the floor it is held to, and the aim (issue text): on the first and the terminal line,
 * or (`firstLineOnly`) on the first agent line alone, as the pooled first message's issue defines it.
 */
type Aim = ({ kind: 'added-ms'; ms: number } | { kind: 'ratio'; max: number }) & { firstLineOnly?: true };
export const CASES: Record<CaseId, { title: string; floor: FloorId; aim: Aim }> = {
  warm: { title: 'warm conversation, later turn (held runner, live session)', floor: 'live', aim: { kind: 'added-ms', ms: 15 } },
  pooled: { title: 'pooled claim (pre-started runner, session resumed)', floor: 'prestarted', aim: { kind: 'added-ms', ms: 15 } },
  'pooled-first': {
    title: "pooled conversation's first message (pre-started runner, runtime prewarmed)",
    floor: 'prestarted-new',
    aim: { kind: 'added-ms', ms: 15, firstLineOnly: true },
  },
  'pooled-first-unprewarmed': {
    title: "pooled conversation's first message with ACIS_POOL_PREWARM=0 (the runtime starts at the claim)",
    floor: 'prestarted-new',
    aim: { kind: 'added-ms', ms: 15, firstLineOnly: true },
  },
  cold: {
    title: 'cold start with resume (ACIS_POOL_SIZE=0: a new sandboxed runner resumes the session)',
    floor: 'fresh',
    aim: { kind: 'ratio', max: 1.3 },
  },
};

const FLOOR_TITLES: Record<FloorId, string> = {
  live: "live streaming-input session's next turn",
  prestarted: 'process pre-started with `startup({resume})`, fed the prompt',
  fresh: 'fresh `query({resume})` (in bwrap: sandbox and host start included)',
  'fresh-in-host': 'fresh `query({resume})` in a sandboxed host started ahead (what a pre-started ACIS runner does)',
  'prestarted-new': 'process pre-started with `startup()` for a new session, fed its first message',
};

interface Stats {
  n: number;
  first_line_p50_ms: number | null;
  first_line_p90_ms: number | null;
  terminal_p50_ms: number | null;
  terminal_p90_ms: number | null;
}

function stats(timings: TurnTiming[]): Stats {
  const first = timings.map((t) => t.firstLineMs);
  const terminal = timings.map((t) => t.terminalMs);
  return {
    n: timings.length,
    first_line_p50_ms: percentile(first, 0.5),
    first_line_p90_ms: percentile(first, 0.9),
    terminal_p50_ms: percentile(terminal, 0.5),
    terminal_p90_ms: percentile(terminal, 0.9),
  };
}

interface Comparison {
  floor: string;
  added_first_line_p50_ms: number | null;
  added_terminal_p50_ms: number | null;
  ratio_first_line_p50: number | null;
  ratio_terminal_p50: number | null;
}

function compare(own: Stats, floor: Stats | undefined, label: string): Comparison {
  const diff = (a: number | null, b: number | null | undefined) => (a === null || b == null ? null : a - b);
  const ratio = (a: number | null, b: number | null | undefined) => (a === null || !b ? null : a / b);
  return {
    floor: label,
    added_first_line_p50_ms: diff(own.first_line_p50_ms, floor?.first_line_p50_ms),
    added_terminal_p50_ms: diff(own.terminal_p50_ms, floor?.terminal_p50_ms),
    ratio_first_line_p50: ratio(own.first_line_p50_ms, floor?.first_line_p50_ms),
    ratio_terminal_p50: ratio(own.terminal_p50_ms, floor?.terminal_p50_ms),
  };
}

/** The aim holds when the first line and (unless the aim is on the first line only) the terminal line meet it at the median, against the plain floor. */
function aimMet(id: CaseId, vsPlain: Comparison): boolean | null {
  const aim = CASES[id].aim;
  const [first, terminal] =
    aim.kind === 'added-ms'
      ? [vsPlain.added_first_line_p50_ms, vsPlain.added_terminal_p50_ms]
      : [vsPlain.ratio_first_line_p50, vsPlain.ratio_terminal_p50];
  const meets = (value: number) => (aim.kind === 'added-ms' ? value < aim.ms : value <= aim.max);
  if (first === null || (!aim.firstLineOnly && terminal === null)) return null;
  return meets(first) && (aim.firstLineOnly === true || meets(terminal!));
}

function floorStats(floors: FloorRun[], kind: FloorId, where: Where): Stats | undefined {
  const floor = floors.find((f) => f.kind === kind && f.where === where && !f.failure);
  return floor ? stats(floor.timings) : undefined;
}

function caseRows(cases: CaseRun[], floors: FloorRun[]) {
  return cases.map((run) => {
    const own = stats(run.timings);
    const meta = CASES[run.id];
    const vsPlain = compare(own, floorStats(floors, meta.floor, 'plain'), `plain ${meta.floor}`);
    const bwrap = floorStats(floors, meta.floor, 'bwrap');
    return {
      id: run.id,
      title: meta.title,
      ...own,
      aim: `${meta.aim.kind === 'added-ms' ? `adds < ${meta.aim.ms} ms at p50 over its floor` : `within ${meta.aim.max}x its floor at p50`}${meta.aim.firstLineOnly ? ' (first line)' : ''}`,
      aim_met: run.failure ? false : aimMet(run.id, vsPlain),
      vs_plain_floor: vsPlain,
      vs_bwrap_floor: bwrap ? compare(own, bwrap, `bwrap ${meta.floor}`) : null,
      // A pooled runner is started ahead but its SDK process is not: this is the floor of that design.
      vs_design_floor:
        run.id === 'pooled' && floorStats(floors, 'fresh-in-host', 'bwrap')
          ? compare(own, floorStats(floors, 'fresh-in-host', 'bwrap'), 'bwrap fresh-in-host')
          : null,
      refill_p50_ms: run.refillMs ? percentile(run.refillMs, 0.5) : null,
      refill_p90_ms: run.refillMs ? percentile(run.refillMs, 0.9) : null,
      other_cpu_share: run.otherCpuShare,
      timings: run.timings,
      refill_ms: run.refillMs ?? null,
      failure: run.failure ?? null,
    };
  });
}

const ms = (value: number | null | undefined) => (value == null ? 'n/a' : value.toFixed(1));
const pair = (a: number | null, b: number | null) => `${ms(a)} / ${ms(b)}`;
const added = (value: number | null) => (value === null ? 'n/a' : `${value >= 0 ? '+' : ''}${value.toFixed(1)}`);
const times = (value: number | null) => (value === null ? 'n/a' : `${value.toFixed(2)}×`);
const share = (value: number | null) => (value === null ? 'n/a' : `${(100 * value).toFixed(0)}%`);
const mib = (value: number | undefined) => (value === undefined ? 'n/a' : value.toFixed(1));
const cell = (text: string) => {
  const flat = text.replace(/\s+/g, ' ').replaceAll('|', '\\|');
  return flat.length > 160 ? `${flat.slice(0, 160)}…` : flat;
};
const byName = (tree: TreeRss | undefined) =>
  tree
    ? Object.entries(tree.byName)
        .map(([name, value]) => `${name} ${value.toFixed(1)}`)
        .join(', ')
    : '';

export function renderConversationsMarkdown(
  info: ConversationRunInfo,
  cases: CaseRun[],
  floors: FloorRun[],
  memory: MemoryFigures,
): string {
  const rows = caseRows(cases, floors);
  const comparison = (pick: (row: (typeof rows)[number]) => Comparison | null) =>
    rows.flatMap((row) => {
      const c = pick(row);
      return c
        ? [
            `| ${row.id} | ${c.floor} | ${added(c.added_first_line_p50_ms)} | ${added(c.added_terminal_p50_ms)} | ${times(c.ratio_first_line_p50)} | ${times(c.ratio_terminal_p50)} |`,
          ]
        : [];
    });
  const refill = rows.find((row) => row.refill_p50_ms !== null);
  const perStream =
    memory.serverManyStreamsMiB !== undefined && memory.serverOneStreamMiB !== undefined && memory.followerStreams
      ? ((memory.serverManyStreamsMiB - memory.serverOneStreamMiB) * 1024) / memory.followerStreams
      : undefined;
  return [
    '### Conversation plane benchmark',
    '',
    `${info.date}; Node ${info.node}; ${info.cpus}. ACIS: \`${info.acisCommand}\`, runners isolated with \`${info.isolation}\`,`,
    'filler off at the tenant, one conversation per case, turns one at a time, each sent once every bench process',
    "(stub, ACIS, runners, SDK processes) is idle again, the floors' turns alternating with ACIS's. Times are ms from sending the turn (ACIS: before",
    '`POST /conversations/{id}/messages`; floors: handing the prompt to the SDK, or calling `query()`) to the first',
    `agent line and to the terminal \`result\`; ${info.warmupTurns} warm-up turns, then ${info.turns} measured turns per case. The model stub runs`,
    'in its own process and answers at once. A last turn per case asks the stub for the history it was sent,',
    'proving every measured turn carried the whole conversation.',
    '',
    '"other CPU": the share of the machine that processes outside the bench took during the measured turns (other',
    "work on a shared machine); when it is high, that row's times are slow and noisy.",
    '',
    '| Case | n | first line p50 / p90 | terminal p50 / p90 | other CPU | aim (vs plain floor) | met |',
    '|---|--:|--:|--:|--:|---|---|',
    ...rows.map(
      (row) =>
        `| ${row.title} | ${row.n} | ${pair(row.first_line_p50_ms, row.first_line_p90_ms)} | ${pair(row.terminal_p50_ms, row.terminal_p90_ms)} | ${share(row.other_cpu_share)} | ${row.aim} | ${
          row.failure ? `**FAILED: ${cell(row.failure)}**` : row.aim_met === null ? 'n/a' : row.aim_met ? 'yes' : '**no**'
        } |`,
    ),
    '',
    'Over the floors (p50; "added" is ms more than the floor, "×" the ratio). The aims are judged against the plain',
    'floors (the SDK in a host process, as the issue defines them); the bubblewrap floors run the same SDK host',
    "(hack/bench/sdk-host.ts, compiled to JavaScript) in a sandbox built like a runner's, and show what isolation",
    'itself costs.',
    '',
    '| Case | floor | added first line | added terminal | × first line | × terminal |',
    '|---|---|--:|--:|--:|--:|',
    ...comparison((row) => row.vs_plain_floor),
    ...comparison((row) => row.vs_bwrap_floor),
    ...comparison((row) => row.vs_design_floor),
    '',
    refill
      ? `Pooled: the node starts the claimed runner's replacement at the claim, during the turn; it was refilled and idle again p50 ${ms(refill.refill_p50_ms)} ms / p90 ${ms(refill.refill_p90_ms)} ms after the terminal line (idleness is read in 100 ms windows).`
      : '',
    '',
    '| Floor (SDK driven directly) | where | n | first line p50 / p90 | terminal p50 / p90 | other CPU |',
    '|---|---|--:|--:|--:|--:|',
    ...floors.map((floor) => {
      const s = stats(floor.timings);
      return `| ${FLOOR_TITLES[floor.kind]} | ${floor.where} | ${s.n} | ${pair(s.first_line_p50_ms, s.first_line_p90_ms)} | ${pair(s.terminal_p50_ms, s.terminal_p90_ms)} | ${share(floor.otherCpuShare)}${
        floor.failure ? ` **FAILED: ${cell(floor.failure)}**` : ''
      } |`;
    }),
    '',
    'Resident memory (VmRSS, MiB; a runner is summed over its process tree):',
    '',
    '| What | RSS MiB | by process |',
    '|---|--:|---|',
    `| one idle pre-started runner, runtime prewarmed | ${mib(memory.idleRunner?.totalMiB)} | ${byName(memory.idleRunner)} |`,
    `| one idle pre-started runner, \`ACIS_POOL_PREWARM=0\` | ${mib(memory.idleRunnerWithoutPrewarm?.totalMiB)} | ${byName(memory.idleRunnerWithoutPrewarm)} |`,
    `| one held warm runner (live SDK session) | ${mib(memory.heldRunner?.totalMiB)} | ${byName(memory.heldRunner)} |`,
    `| ACIS server, no stream open | ${mib(memory.serverIdleMiB)} | |`,
    `| ACIS server, one open stream (its run in flight, the model slow) | ${mib(memory.serverOneStreamMiB)} | |`,
    `| ACIS server, that stream + ${memory.followerStreams ?? 'n/a'} idle re-attached streams | ${mib(memory.serverManyStreamsMiB)} | ${
      perStream === undefined ? '' : `${perStream.toFixed(0)} KiB per stream`
    } |`,
    memory.failure ? `\n**Memory of streams FAILED: ${cell(memory.failure)}**` : '',
    '',
  ].join('\n');
}

/** Writes `conversations.md` and `conversations.json` under `dir`; returns their paths. */
export async function writeConversationsReport(
  dir: string,
  info: ConversationRunInfo,
  cases: CaseRun[],
  floors: FloorRun[],
  memory: MemoryFigures,
): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const markdownPath = path.join(dir, 'conversations.md');
  const jsonPath = path.join(dir, 'conversations.json');
  await writeFile(markdownPath, renderConversationsMarkdown(info, cases, floors, memory));
  const json = {
    ...info,
    cases: caseRows(cases, floors),
    floors: floors.map((floor) => ({
      kind: floor.kind,
      where: floor.where,
      ...stats(floor.timings),
      other_cpu_share: floor.otherCpuShare,
      timings: floor.timings,
      failure: floor.failure ?? null,
    })),
    memory,
  };
  await writeFile(jsonPath, `${JSON.stringify(json, null, 2)}\n`);
  return [markdownPath, jsonPath];
}
