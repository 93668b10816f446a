/**
 * "The bar": issue #28's performance targets, and the older rows it does not replace (fair mode
 * uncontended, mutual exclusion, memory and renewal), judged from one run's results. Ratios are of
 * medians over interleaved repetitions; the spread is the ratio within each repetition (both sides
 * ran next to each other in it, so they saw the same machine).
 */
import { footprintBarRow } from './footprint-report';
import type { Results, S3Cell } from './report';

export interface BarRow {
  criterion: string;
  bar: string;
  measured: string;
  /** The same measure against the hand-written fenced floor (same guarantees as ours), if any. */
  fenced?: string;
  pass: boolean | null;
}

export const n0 = (v: number): string =>
  Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a';
export const f = (v: number, digits = 2): string =>
  Number.isFinite(v) ? v.toFixed(digits) : 'n/a';
export const ms = (v: number): string =>
  !Number.isFinite(v)
    ? 'n/a'
    : Math.abs(v) >= 100
      ? n0(v)
      : Math.abs(v) >= 10
        ? v.toFixed(1)
        : v.toFixed(2);
export const pct = (v: number): string => (Number.isFinite(v) ? `${Math.round(v * 100)}%` : 'n/a');

/** Min–max over repetitions, as `1,234–1,300`. */
export function spread(values: number[], format: (v: number) => string): string {
  const finite = values.filter(Number.isFinite);
  return finite.length ? `${format(Math.min(...finite))}–${format(Math.max(...finite))}` : 'n/a';
}

const times = (v: number): string => `${f(v)}×`;

/** Each repetition's `mine[i] / theirs[i]`, formatted as a min–max spread. */
function perRep(mine: number[], theirs: number[]): string {
  return `per repetition ${spread(
    mine.map((v, i) => v / (theirs[i] ?? NaN)),
    times,
  )}`;
}

export const PEER_DEFAULTS = (id: string): boolean => id.endsWith(':defaults');

const labelOf = (r: Results, id: string): string =>
  r.contenders.find((c) => c.id === id)?.label ?? id;

/** The peer at its defaults that `better` ranks first in a scenario's cells. */
function bestPeer<T>(
  cells: Record<string, T>,
  better: (a: T, b: T) => boolean,
): [id: string, cell: T] | undefined {
  const peers = Object.entries(cells).filter(([id]) => PEER_DEFAULTS(id));
  if (peers.length === 0) return undefined;
  return peers.reduce((a, b) => (better(b[1], a[1]) ? b : a));
}

interface ThroughputCell {
  runs: { opsPerSec: number }[];
  median: { opsPerSec: number };
}

const ops = (cell: ThroughputCell): number[] => cell.runs.map((run) => run.opsPerSec);

/** `ours` over `other` in ops/s: the ratio of medians, both figures, and the per-repetition spread. */
function throughputRatio(ours: ThroughputCell, other: ThroughputCell, otherName?: string) {
  const ratio = ours.median.opsPerSec / other.median.opsPerSec;
  return {
    ratio,
    text:
      `${times(ratio)} (${n0(ours.median.opsPerSec)} vs ${n0(other.median.opsPerSec)} ops/s` +
      `${otherName ? `, ${otherName}` : ''}); ${perRep(ops(ours), ops(other))}`,
  };
}

/** S1 or S2: ours against the raw floor and against the best peer at defaults. */
function throughputRows(
  r: Results,
  cells: Record<string, ThroughputCell>,
  name: string,
  rawMin: number,
  peerMin: number,
  judged: (pass: boolean) => boolean | null,
): BarRow[] {
  const { ours, raw, fenced } = cells;
  if (!ours || !raw) return [];
  const vsRaw = throughputRatio(ours, raw);
  const vsFenced = fenced && throughputRatio(ours, fenced);
  const rows: BarRow[] = [
    {
      criterion: `${name} ops/s vs the raw floor`,
      bar: `≥ ${f(rawMin)}×`,
      measured: vsRaw.text,
      fenced:
        vsFenced && `${vsFenced.text}${vsFenced.ratio >= rawMin ? ' — meets the bar here' : ''}`,
      pass: judged(vsRaw.ratio >= rawMin),
    },
  ];
  const peer = bestPeer(cells, (a, b) => a.median.opsPerSec > b.median.opsPerSec);
  if (peer) {
    const vsPeer = throughputRatio(ours, peer[1], labelOf(r, peer[0]));
    const floorVsPeer = fenced && throughputRatio(fenced, peer[1]);
    rows.push({
      criterion: `${name} ops/s vs the best peer at defaults`,
      bar: `≥ ${f(peerMin)}×`,
      measured: vsPeer.text,
      fenced: floorVsPeer && `the fenced floor itself: ${floorVsPeer.text}`,
      pass: judged(vsPeer.ratio >= peerMin),
    });
  }
  return rows;
}

/** S1's costs per op: client CPU, commands inside Lua, round trips. */
function s1CostRows(r: Results, judged: (pass: boolean) => boolean | null): BarRow[] {
  const s1 = r.s1;
  if (!s1?.ours || !s1.raw) return [];
  const rows: BarRow[] = [];
  const { ours, raw, fenced } = s1;
  const cpu = (cell: typeof ours): number[] => cell.runs.map((run) => run.cpuUsPerOp);
  const cpuText = (other: typeof ours, name: string): string =>
    `${times(ours.median.cpuUsPerOp / other.median.cpuUsPerOp)} (${n0(ours.median.cpuUsPerOp)} vs ` +
    `${n0(other.median.cpuUsPerOp)} µs${name}); ${perRep(cpu(ours), cpu(other))}`;
  const cpuRatio = ours.median.cpuUsPerOp / raw.median.cpuUsPerOp;
  rows.push({
    criterion: 'Client CPU per uncontended acquire + release (S1)',
    bar: "≤ 1.15× the raw floor's",
    measured: cpuText(raw, ''),
    fenced: fenced && cpuText(fenced, ', the fenced floor'),
    pass: judged(cpuRatio <= 1.15),
  });
  const lua = ours.roundTrips.luaPerOp;
  if (lua !== undefined) {
    const byName = (counts: Record<string, number> | undefined): string =>
      Object.entries(counts ?? {})
        .map(([name, n]) => `${name} ${f(n, n % 1 ? 2 : 0)}`)
        .join(', ');
    const fencedLua = fenced?.roundTrips.luaPerOp;
    rows.push({
      criterion: 'Commands run inside Lua per uncontended acquire + release (S1, MONITOR)',
      bar: '≤ 5',
      measured: `${f(lua)} (${byName(ours.roundTrips.luaByCommand)})`,
      fenced:
        fencedLua === undefined
          ? undefined
          : `the fenced floor runs ${f(fencedLua)} (${byName(fenced?.roundTrips.luaByCommand)})`,
      pass: lua <= 5.0001,
    });
  }
  const rt = ours.roundTrips.perOp;
  rows.push({
    criterion: 'S1 round trips per acquire + release',
    bar: '2 (one each)',
    measured: f(rt),
    fenced: fenced && `the fenced floor sends ${f(fenced.roundTrips.perOp)}`,
    pass: rt <= 2.0001,
  });
  return rows;
}

/** S3P with the think time after each release: ours at defaults judged, fair mode beside it. */
function handOffRows(r: Results, judged: (pass: boolean) => boolean | null): BarRow[] {
  const pause = r.meta.config.pauseMs;
  const p5 = r.s3?.procs?.[String(pause)];
  const ours = p5?.ours;
  if (!p5 || !ours) return [];
  const { fenced } = p5;
  const fair = p5['ours:fair'];
  const at = `S3P, ${pause} ms think, ours at defaults`;
  const p99 = (cell: S3Cell): number[] => cell.runs.map((run) => run.waitP99);
  const rows: BarRow[] = [];
  const peer = bestPeer(p5, (a, b) => a.median.waitP99 < b.median.waitP99);
  if (peer) {
    const [peerId, best] = peer;
    const lower = (cell: S3Cell): string =>
      `${f(best.median.waitP99 / cell.median.waitP99, 1)}× lower (${ms(cell.median.waitP99)} ms); ` +
      perRep(p99(best), p99(cell));
    const factor = best.median.waitP99 / ours.median.waitP99;
    rows.push({
      criterion: `Wait p99 vs the best peer at defaults (${at})`,
      bar: '≥ 4× lower',
      measured:
        `${f(factor, 1)}× lower (${ms(ours.median.waitP99)} vs ${ms(best.median.waitP99)} ms, ` +
        `${labelOf(r, peerId)}); ${perRep(p99(best), p99(ours))}` +
        (fair ? `; fair: true ${lower(fair)}` : ''),
      fenced: fenced && `the fenced floor: ${lower(fenced)}`,
      pass: judged(factor >= 4),
    });
  }
  const gaps = (cell: S3Cell): string =>
    `${ms(cell.median.gapP50)} ms (per repetition ${spread(
      cell.runs.map((run) => run.gapP50),
      ms,
    )})`;
  rows.push({
    criterion: `Hand-off gap p50 (${at})`,
    bar: '≤ 0.3 ms',
    measured: gaps(ours) + (fair ? `; fair: true ${gaps(fair)}` : ''),
    fenced: fenced && `the fenced floor: ${gaps(fenced)}`,
    pass: judged(ours.median.gapP50 <= 0.3),
  });
  let allRuns = 0;
  for (const byId of Object.values(r.s3?.procs ?? {}))
    allRuns += byId.ours?.median.waitsOver1s ?? 0;
  const over = ours.median.waitsOver1s;
  rows.push({
    criterion: `Waits over 1 s (${at}, summed over repetitions)`,
    bar: '0',
    measured:
      `${n0(over)} (worst wait ${ms(ours.median.waitMax)} ms; every S3P run of ours: ${n0(allRuns)})` +
      (fair ? `; fair: true ${n0(fair.median.waitsOver1s)}` : ''),
    fenced: fenced && `the fenced floor: ${n0(fenced.median.waitsOver1s)}`,
    pass: over === 0,
  });
  return rows;
}

function decoratorRows(r: Results, judged: (pass: boolean) => boolean | null): BarRow[] {
  const s5 = r.s5;
  // Runs from before the withLock route have nothing to judge @Locked against.
  if (!s5 || s5.median.seqLockedVsWithLockCpu === undefined) return [];
  const m = s5.median;
  const reps = (field: string): string =>
    `per repetition ${spread(
      s5.runs.map((run) => run[field] ?? NaN),
      times,
    )}`;
  // Runs from before the intercepted route lack @Locked's floor.
  const overFloor = (ratio: number | undefined, unit: string): string =>
    ratio === undefined
      ? ''
      : `; ${times(ratio)} the ${unit} of withLock behind a pass-through interceptor (@Locked's floor)`;
  return [
    {
      criterion: '@Locked CPU per request over the same route calling withLock (S5, sequential)',
      bar: '≤ 1.10× (+10 %)',
      measured:
        `${times(m.seqLockedVsWithLockCpu)} (${n0(m.seqLockedCpuUs)} vs ${n0(m.seqWithLockCpuUs)} µs); ` +
        `${reps('seqLockedVsWithLockCpu')}; at 16 concurrent ${times(m.concLockedVsWithLockCpu)}; ` +
        `the floor route: ${n0(m.seqFloorCpuUs)} µs` +
        overFloor(m.seqLockedVsInterceptedCpu, 'CPU'),
      pass: judged(m.seqLockedVsWithLockCpu <= 1.1),
    },
    {
      criterion: '@Locked requests/s at 16 concurrent vs the withLock route (S5)',
      bar: '≥ 0.9×',
      measured:
        `${times(m.concLockedVsWithLock)} (${n0(m.concLockedRps)} vs ${n0(m.concWithLockRps)} req/s); ` +
        `${reps('concLockedVsWithLock')}; the floor route: ${n0(m.concFloorRps)} req/s` +
        overFloor(m.concLockedVsIntercepted, 'requests/s'),
      pass: judged(m.concLockedVsWithLock >= 0.9),
    },
  ];
}

/** Read locks and permits against the published run's figures (`r.baseline`). */
function kindRows(r: Results, judged: (pass: boolean) => boolean | null): BarRow[] {
  const base = r.baseline;
  if (!base) return [];
  const run = `${base.source}, run ${base.date.slice(0, 10)} at ${base.commit} on ${base.cpu}`;
  const rows: BarRow[] = [];
  const row = (
    criterion: string,
    now: number,
    runs: number[],
    published: number,
    [nowMs, publishedMs]: [number, number | undefined],
  ): BarRow => {
    // Runs of another length, or on another processor, are not the same measure: shown, never
    // judged (ops/s of one machine say nothing of another's).
    const sameLength = publishedMs === undefined || publishedMs === nowMs;
    const sameCpu = base.cpu === r.meta.cpu;
    const notJudged = !sameLength
      ? `; not judged: ${nowMs} ms runs here, ${publishedMs} ms in the published run`
      : !sameCpu
        ? `; not judged: this run is on ${r.meta.cpu}`
        : '';
    return {
      criterion,
      bar: '≥ 1.00× the published figure',
      measured:
        `${times(now / published)} (${n0(now)} vs ${n0(published)} ops/s, ${run}); ` +
        `per repetition ${spread(
          runs.map((v) => v / published),
          times,
        )}` +
        notJudged,
      pass: notJudged ? null : judged(now / published >= 1),
    };
  };
  if (r.rw && base.readOpsPerSec)
    rows.push(
      row(
        `Read locks: RW, ${r.rw.loops} loops on one key, mode: 'read'`,
        r.rw.read.opsPerSec,
        r.rw.read.runs ?? [],
        base.readOpsPerSec,
        [r.rw.ms, base.readMs],
      ),
    );
  // S1/S2 of the kinds: judged once a published run has them, reported next to the mutex before.
  for (const [id, name] of [
    ['ours:read', "Read locks: mode: 'read'"],
    ['ours:permits', 'Semaphore permits: permits: 3'],
  ] as const) {
    for (const [scenario, cells, key] of [
      ['S1 sequential', r.s1, 's1'],
      ['S2 64-parallel', r.s2, 's2'],
    ] as const) {
      const cell = cells?.[id];
      if (!cell) continue;
      const published = base.kinds?.[id]?.[key];
      const vsMutex = cells.ours
        ? `; ${times(cell.median.opsPerSec / cells.ours.median.opsPerSec)} the mutex's`
        : '';
      if (published)
        rows.push(row(`${name}, ${scenario}`, cell.median.opsPerSec, ops(cell), published, [0, 0]));
      else
        rows.push({
          criterion: `${name}, ${scenario}`,
          bar: '≥ 1.00× the published figure',
          measured: `${n0(cell.median.opsPerSec)} ops/s${vsMutex}; the published run (${run}) has no figure to compare with yet`,
          pass: null,
        });
    }
  }
  const permits = r.sem?.ours;
  if (permits && base.permitsOpsPerSec)
    rows.push(
      row(
        'Semaphore permits: SEM, ours with permits: 3',
        permits.median.opsPerSec,
        ops(permits),
        base.permitsOpsPerSec,
        [r.meta.config.semMs ?? 2_000, base.permitsMs],
      ),
    );
  return rows;
}

function multiKeyRow(r: Results, judged: (pass: boolean) => boolean | null): BarRow[] {
  const rows = r.multiKey?.rows ?? [];
  const find = (raw: boolean, keys: number) =>
    rows.find((row) => row.raw === raw && row.keys === keys && !row.case.includes('fair'));
  const [one, two, rawOne, rawTwo] = [find(false, 1), find(false, 2), find(true, 1), find(true, 2)];
  if (!one || !two) return [];
  const seq = (row: typeof one): number[] =>
    row.runs?.map((x) => x.sequentialOpsPerSec) ?? [row.sequentialOpsPerSec];
  const ratio = two.sequentialOpsPerSec / one.sequentialOpsPerSec;
  return [
    {
      criterion: 'MK two keys vs one key, sequential (ours, all-at-once script)',
      bar: '≥ 0.80×',
      measured:
        `${times(ratio)} (${n0(two.sequentialOpsPerSec)} vs ${n0(one.sequentialOpsPerSec)} ops/s); ` +
        perRep(seq(two), seq(one)),
      fenced:
        rawOne && rawTwo
          ? `the raw floor's two keys vs one: ${times(rawTwo.sequentialOpsPerSec / rawOne.sequentialOpsPerSec)}`
          : undefined,
      pass: judged(ratio >= 0.8),
    },
  ];
}

/** Rows the issue does not replace: fair mode uncontended, exclusion, memory and renewal. */
function keptRows(r: Results): BarRow[] {
  const rows: BarRow[] = [];
  // Fair mode must cost nothing when nobody waits: its S1 and S2 against ours at defaults.
  for (const [name, cells] of [
    ['S1 sequential', r.s1],
    ['S2 64-parallel', r.s2],
  ] as const) {
    const fair = cells?.['ours:fair']?.median.opsPerSec;
    const plain = cells?.ours?.median.opsPerSec;
    if (fair === undefined || plain === undefined) continue;
    rows.push({
      criterion: `${name} ops/s, fair: true vs defaults (uncontended)`,
      bar: '≥ 0.95×',
      measured: `${f(fair / plain)}× (${n0(fair)} vs ${n0(plain)} ops/s)`,
      pass: fair / plain >= 0.95,
    });
  }
  if (r.s3) {
    let violations = 0;
    for (const byPause of Object.values(r.s3))
      for (const byId of Object.values(byPause))
        for (const cell of Object.values(byId)) violations += cell.median.violations;
    rows.push({
      criterion: 'Mutual-exclusion violations (every library, S3 + S3P)',
      bar: '0',
      measured: String(violations),
      pass: violations === 0,
    });
  }
  if (r.s6) {
    const c = r.s6.cycles;
    const growth = c.heapAfterMb - c.heapBeforeMb;
    rows.push({
      criterion: `S6 heap over ${n0(c.cycles)} acquire/release cycles (after GC)`,
      bar: 'flat (≤ 1 MB growth)',
      measured: `${f(c.heapBeforeMb)} → ${f(c.heapAfterMb)} MB (${growth >= 0 ? '+' : ''}${f(growth)} MB; slope ${f(c.slopeKbPer100k, 0)} KB/100k)`,
      pass: growth <= 1,
    });
    const h = r.s6.held;
    rows.push({
      criterion: `S6 renewal of ${n0(h.locks)} held locks (${h.periods} periods)`,
      bar: 'in batches: far fewer commands than locks per period, Redis quiet between batches',
      measured: `${f(h.renewalCommandsPerPeriod, 1)} commands per period for ${n0(h.locks)} locks; renewal traffic in ${pct(h.renewalActiveShare)} of ${h.sampleMs} ms samples (${h.renewalBursts} bursts)`,
      pass: h.renewalCommandsPerPeriod <= h.locks / 100 && h.renewalActiveShare <= 0.5,
    });
    rows.push({
      criterion: 'S6 timers while 10 k locks are held',
      bar: 'not one per lock',
      measured: `live timers median ${n0(h.liveTimersMedian)}, peak ${n0(h.liveTimersMax)} (${f(h.timersCreatedPerRenewal)} created per renewal command); active 'Timeout' peak ${n0(h.activeTimeoutsMax)}`,
      pass: h.liveTimersMax < h.locks / 10,
    });
    rows.push({
      criterion: `S6 no lock lost while ${n0(h.locks)} are renewed (ttl ${h.ttlMs} ms)`,
      bar: '0 lost',
      measured: `${n0(h.lost)} lost`,
      pass: h.lost === 0,
    });
  }
  if (r.footprint) rows.push(footprintBarRow(r.footprint));
  return rows;
}

/** Every row of the bar, in the issue's order, then the rows kept from before it. */
export function evaluateBar(r: Results): BarRow[] {
  // Ratios are judged on medians of at least 3 interleaved repetitions; fewer cannot pass or fail.
  const judged = (pass: boolean): boolean | null => (r.meta.config.reps >= 3 ? pass : null);
  return [
    ...(r.s1 ? throughputRows(r, r.s1, 'S1 sequential', 0.95, 1.0, judged) : []),
    ...(r.s2 ? throughputRows(r, r.s2, 'S2 64-parallel', 0.92, 1.05, judged) : []),
    ...s1CostRows(r, judged),
    ...handOffRows(r, judged),
    ...decoratorRows(r, judged),
    ...kindRows(r, judged),
    ...multiKeyRow(r, judged),
    ...keptRows(r),
  ];
}
