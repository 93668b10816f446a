import { evaluateBar, f, ms, n0, pct, spread } from './bar';
import type { Baseline } from './baseline';
import { waitChartSvg, type ChartPanel } from './chart';
import type { ContendedMetrics } from './contended';
import type { S5Metrics } from './decorator';
import type { FootprintResult } from './footprint';
import { renderFootprint } from './footprint-report';
import type { S6CyclesResult, S6HeldResult } from './memory';
import type { S1Commands, S1Metrics, S2Metrics } from './uncontended';
import { renderMultiKey, type MultiKeyResult } from './multi-key';
import { renderReadLock, type ReadLockResult } from './read-lock';
import { renderSemaphore, type SemaphoreResults } from './semaphore';

export interface S3Cell {
  runs: ContendedMetrics[];
  median: ContendedMetrics;
  errors: string[];
}

/** Everything a run measured; `bench/results/latest.json`. Markdown and SVG are rendered from it. */
export interface Results {
  meta: {
    date: string;
    commit: string;
    libDirty: boolean;
    node: string;
    os: string;
    cpu: string;
    memoryGb: number;
    /** 1, 5, 15-minute load average when the run started (the machine may be shared). */
    loadAverage: number[];
    loadAverageEnd: number[];
    redis: string;
    redisOwned: boolean;
    versions: Record<string, string>;
    config: Record<string, number>;
    only: string[] | null;
    contenders: string[] | null;
    seconds: number;
  };
  contenders: { id: string; label: string; library: string; variant: string; settings: string }[];
  s1?: Record<
    string,
    {
      runs: S1Metrics[];
      median: S1Metrics;
      roundTrips: S1Commands;
    }
  >;
  s2?: Record<string, { runs: S2Metrics[]; median: S2Metrics }>;
  /** s3[mode][pauseMs][contenderId]; mode 'inproc' = 8 workers in one process, 'procs' = 8 processes. */
  s3?: Record<'inproc' | 'procs', Record<string, Record<string, S3Cell>>>;
  s5?: { runs: S5Metrics[]; median: S5Metrics };
  s6?: { cycles: S6CyclesResult; held: S6HeldResult };
  /** S6: bytes per held lock and per waiting caller, in this process and in Redis. */
  footprint?: FootprintResult;
  sem?: SemaphoreResults;
  multiKey?: MultiKeyResult;
  rw?: ReadLockResult;
  /** The published run whose read-lock and permit figures this one is judged against. */
  baseline?: Baseline;
}

const verdict = (pass: boolean | null): string =>
  pass === null ? '—' : pass ? '✅ meets' : '❌ misses';

function table(head: string[], rows: string[][], align?: string[]): string {
  const sep = head.map((_, i) => align?.[i] ?? (i === 0 ? ':--' : '--:'));
  return [head, sep, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

/** `value` over the same figure of `other` (the raw or the fenced floor), as `0.95×`. */
const vs = (value: number | undefined, other: number | undefined): string =>
  value === undefined || other === undefined ? '—' : `${f(value / other)}×`;

function contendedTable(r: Results, cells: Record<string, S3Cell>): string {
  const rows = r.contenders
    .filter((c) => cells[c.id])
    .map((c) => {
      const m = cells[c.id].median;
      return [
        c.id.startsWith('ours') ? `**${c.label}**` : c.label,
        n0(m.sectionsPerSec),
        pct(m.crossShare),
        ms(m.gapP50),
        ms(m.gapP99),
        ms(m.releaseP50),
        ms(m.waitP50),
        ms(m.waitP99),
        ms(m.waitMax),
        n0(m.waitsOver1s),
        n0(m.giveUps),
        f(m.fairMinMax),
        f(m.jain, 3),
        n0(m.violations),
      ];
    });
  return table(
    [
      'Library',
      'CS/s',
      'cross-worker hand-offs',
      'gap p50 ms',
      'gap p99 ms',
      'release p50 ms',
      'wait p50 ms',
      'wait p99 ms',
      'wait max ms',
      'waits > 1 s',
      'gave up',
      'fair min/max',
      'Jain',
      'violations',
    ],
    rows,
  );
}

/**
 * One row per library: the headline numbers of every scenario (what docs/benchmarks.md carries).
 * S1/S2 ran peers at defaults only (retry settings do not matter uncontended), ours also with
 * `fair: true`.
 */
export function summaryTable(r: Results): string | undefined {
  const pause = String(r.meta.config.pauseMs);
  const p5 = r.s3?.procs?.[pause];
  if (!r.s1 && !r.s2 && !p5) return undefined;
  const rows = r.contenders.map((x) => {
    const s1 = r.s1?.[x.id]?.median;
    const s2 = r.s2?.[x.id]?.median;
    const raw1 = r.s1?.raw?.median.opsPerSec;
    const raw2 = r.s2?.raw?.median.opsPerSec;
    const fenced1 = r.s1?.fenced?.median.opsPerSec;
    const fenced2 = r.s2?.fenced?.median.opsPerSec;
    const ratios = (value: number, raw?: number, fenced?: number): string =>
      `${n0(value)} (${vs(value, raw)}${fenced === undefined ? '' : ` · ${vs(value, fenced)}`})`;
    const m = p5?.[x.id]?.median;
    // Libraries that S3 did not run (ours as a read lock or a permit) have no S3 figures.
    const inS3 = Object.values(r.s3?.procs ?? {}).some((byId) => byId[x.id]);
    let over = 0;
    for (const byId of Object.values(r.s3?.procs ?? {}))
      over += byId[x.id]?.median.waitsOver1s ?? 0;
    let violations = 0;
    for (const byPause of Object.values(r.s3 ?? {})) {
      for (const byId of Object.values(byPause)) violations += byId[x.id]?.median.violations ?? 0;
    }
    return [
      x.id.startsWith('ours') ? `**${x.label}**` : x.label,
      s1 ? ratios(s1.opsPerSec, raw1, fenced1) : '—',
      s2 ? ratios(s2.opsPerSec, raw2, fenced2) : '—',
      m ? ms(m.gapP50) : '—',
      m ? ms(m.waitP99) : '—',
      m ? ms(m.waitMax) : '—',
      inS3 ? n0(over) : '—',
      inS3 ? n0(violations) : '—',
    ];
  });
  const against = r.s1?.fenced || r.s2?.fenced ? 'vs raw · vs fenced' : 'vs raw';
  return table(
    [
      'Library',
      `S1 ops/s (${against})`,
      `S2 ops/s (${against})`,
      `S3P gap p50 ms (${pause} ms pause)`,
      'S3P wait p99 ms',
      'S3P wait max ms',
      'S3P waits > 1 s',
      'violations',
    ],
    rows,
  );
}

export function render(r: Results, svgHref: string): { markdown: string; svg?: string } {
  const c = r.meta.config;
  const out: string[] = [];
  out.push('# nestjs-redis-lock benchmark results', '');
  out.push(
    `Run ${r.meta.date} on ${r.meta.cpu}, ${r.meta.memoryGb} GB, ${r.meta.os}; Node ${r.meta.node}; ` +
      `Redis ${r.meta.redis} (${r.meta.redisOwned ? 'private redis-server on loopback, no persistence' : 'external instance'}); ` +
      `commit ${r.meta.commit}${r.meta.libDirty ? ' (lib/ modified)' : ''}; ${Math.round(r.meta.seconds)} s in total. ` +
      `Load average (1/5/15 min) ${r.meta.loadAverage.join(' / ')} at the start, ${r.meta.loadAverageEnd.join(' / ')} at the end` +
      (r.meta.loadAverage[0] > Number(/× (\d+)/.exec(r.meta.cpu)?.[1] ?? Infinity)
        ? ' — the machine was shared with other work, so absolute numbers are noisy; compare rows within a table (runs are interleaved).'
        : '.'),
    '',
  );
  out.push(
    `Versions: ${Object.entries(r.meta.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.`,
    '',
    `Medians over ${c.reps} interleaved repetitions (each repetition starts with a different library); ` +
      `violations, waits over 1 s, give-ups and sections are summed over repetitions, wait max is the worst repetition.`,
    '',
  );

  const summary = summaryTable(r);
  if (summary) out.push('## Summary', '', summary, '');

  const bar = evaluateBar(r);
  if (bar.length > 0) {
    out.push('## The bar', '');
    out.push(
      table(
        ['Criterion', 'Bar', 'Measured', 'vs fenced floor', ''],
        bar.map((b) => [b.criterion, b.bar, b.measured, b.fenced ?? '—', verdict(b.pass)]),
        [':--', ':--', ':--', ':--', ':--'],
      ),
      '',
      `Judged on ours at defaults; ratios are of medians over ${c.reps} interleaved repetitions (fewer than 3 judge nothing), the spread is each repetition's own ratio. *vs fenced floor* is the same measure against a hand-written lock with our guarantees (fence, holder identity in the value, wake-up message): where a bar is out of reach of the raw floor, this shows how close we are to a floor that keeps those guarantees. It is information, not the verdict.`,
      '',
    );
  }

  if (r.s1) {
    out.push(
      `## S1 — sequential, uncontended (${n0(c.s1Ops)} × acquire + release of a fresh key)`,
      '',
    );
    const raw = r.s1.raw?.median.opsPerSec;
    const fenced = r.s1.fenced?.median.opsPerSec;
    const byName = (counts: Record<string, number> | undefined): string =>
      Object.entries(counts ?? {})
        .map(([k, v]) => `${k} ${f(v)}`)
        .join(', ');
    out.push(
      table(
        [
          'Library',
          'ops/s',
          'ops/s min–max',
          'p50 µs',
          'p99 µs',
          'vs raw',
          'vs fenced',
          'client CPU µs/op',
          'commands sent per op (MONITOR)',
          'by command',
          'commands inside Lua per op',
          'by command (Lua)',
        ],
        r.contenders
          .filter((x) => r.s1![x.id])
          .map((x) => {
            const s = r.s1![x.id];
            return [
              x.id.startsWith('ours') ? `**${x.label}**` : x.label,
              n0(s.median.opsPerSec),
              spread(
                s.runs.map((run) => run.opsPerSec),
                n0,
              ),
              n0(s.median.p50Us),
              n0(s.median.p99Us),
              vs(s.median.opsPerSec, raw),
              vs(s.median.opsPerSec, fenced),
              n0(s.median.cpuUsPerOp),
              f(s.roundTrips.perOp),
              byName(s.roundTrips.byCommand),
              s.roundTrips.luaPerOp === undefined ? '—' : f(s.roundTrips.luaPerOp),
              s.roundTrips.luaPerOp === undefined ? '—' : byName(s.roundTrips.luaByCommand),
            ];
          }),
      ),
      '',
      'MONITOR over 200 sampled iterations of each library alone. *Commands sent* are those clients sent (each a round trip in a sequential loop); *commands inside Lua* are those the server ran inside scripts (MONITOR names their source `lua`), every script of the op together. *Client CPU* = user + system CPU of the bench process per op (process.cpuUsage), the part a library controls. Peers run at defaults here: their retry settings play no part without contention. Ours runs in fair mode too, for what fair mode costs when nobody waits.',
      '',
    );
  }
  if (r.s2) {
    out.push(`## S2 — ${c.s2Loops} concurrent loops on distinct keys, ${c.s2Ms / 1000} s`, '');
    const raw = r.s2.raw?.median.opsPerSec;
    const fenced = r.s2.fenced?.median.opsPerSec;
    out.push(
      table(
        ['Library', 'ops/s', 'ops/s min–max', 'p50 µs', 'p99 µs', 'vs raw', 'vs fenced'],
        r.contenders
          .filter((x) => r.s2![x.id])
          .map((x) => {
            const s = r.s2![x.id].median;
            return [
              x.id.startsWith('ours') ? `**${x.label}**` : x.label,
              n0(s.opsPerSec),
              spread(
                r.s2![x.id].runs.map((run) => run.opsPerSec),
                n0,
              ),
              n0(s.p50Us),
              n0(s.p99Us),
              vs(s.opsPerSec, raw),
              vs(s.opsPerSec, fenced),
            ];
          }),
      ),
      '',
    );
  }
  let svg: string | undefined;
  if (r.s3) {
    out.push(
      `## S3 — one key, ${c.s3Workers} workers, ${c.criticalMs} ms critical section, ${c.s3Ms / 1000} s per run`,
      '',
      '*CS/s* critical sections per second; *cross-worker hand-offs* share of consecutive holders that differ; ' +
        "*gap* = next holder's acquire resolved − previous holder's release resolved, cross-worker hand-offs only; *release* = release() called → resolved, p50; " +
        '*wait* = acquire called → resolved (a library that gives up is asked again, the wait keeps counting); ' +
        '*gave up* = rejections of acquire (summed); *fair* = fewest / most sections per worker; ' +
        '*violations* = grants that resolved before the previous holder called release (machine-wide monotonic clock; must be 0). ' +
        `Judge hand-off speed on the runs with the ${c.pauseMs} ms pause: without it the releasing worker usually re-takes its own lock.`,
      '',
    );
    const sections: [string, 'procs' | 'inproc', number][] = [
      [`S3P — 8 processes, ${c.pauseMs} ms pause after release`, 'procs', c.pauseMs],
      ['S3P — 8 processes, no pause', 'procs', 0],
      [`S3 — 8 workers in one process, ${c.pauseMs} ms pause after release`, 'inproc', c.pauseMs],
      ['S3 — 8 workers in one process, no pause', 'inproc', 0],
    ];
    for (const [title, mode, pause] of sections) {
      const cells = r.s3[mode]?.[String(pause)];
      if (!cells) continue;
      out.push(`### ${title}`, '', contendedTable(r, cells), '');
    }
    const panels: ChartPanel[] = [];
    for (const pause of [c.pauseMs, 0]) {
      const cells = r.s3.procs?.[String(pause)];
      if (!cells) continue;
      panels.push({
        title: pause ? `${pause} ms pause after release` : 'no pause',
        rows: r.contenders
          .filter((x) => cells[x.id])
          .map((x) => ({
            label: x.label,
            p50: cells[x.id].median.waitP50,
            p99: cells[x.id].median.waitP99,
            max: cells[x.id].median.waitMax,
            ours: x.id.startsWith('ours'),
          })),
      });
    }
    if (panels.length > 0) {
      svg = waitChartSvg(
        'S3P: acquire wait, 8 processes contending for one key (log scale)',
        `${r.meta.cpu}, Redis ${r.meta.redis}, Node ${r.meta.node}, ${r.meta.date.slice(0, 10)} — medians of ${c.reps} runs, max = worst run`,
        panels,
      );
      out.push(`![S3P acquire wait per library](${svgHref})`, '');
    }
    const errors = r.contenders.flatMap((x) => {
      const all = new Set<string>();
      for (const byPause of Object.values(r.s3!))
        for (const cells of Object.values(byPause))
          for (const e of cells[x.id]?.errors ?? []) all.add(e);
      return all.size
        ? [
            `- ${x.label}: ${[...all]
              .slice(0, 2)
              .map((e) => `\`${e.slice(0, 160)}\``)
              .join('; ')}`,
          ]
        : [];
    });
    if (errors.length > 0) out.push('Why libraries gave up (first messages):', '', ...errors, '');
  }
  if (r.s5) {
    const m = r.s5.median;
    const handlerRtt = m.handlerRttUs;
    // Runs from before the withLock route lack its figures: leave its row and columns out.
    const withLock = m.seqWithLockP50Us !== undefined;
    // Likewise the intercepted route (withLock behind a pass-through interceptor).
    const intercepted = m.seqInterceptedP50Us !== undefined;
    const row = (name: string, p50: number, cpu: number): string[] => [
      name,
      n0(p50),
      n0(p50 - m.seqPlainP50Us),
      f((p50 - m.seqPlainP50Us) / handlerRtt),
      n0(p50 - m.seqFloorP50Us),
      f((p50 - m.seqFloorP50Us) / handlerRtt),
      n0(cpu),
      n0(cpu - m.seqFloorCpuUs),
    ];
    out.push(
      `## S5 — @Locked overhead on an HTTP route (Nest ${r.meta.versions['@nestjs/core']}, express, same process)`,
      '',
      `${intercepted ? 'Seven' : withLock ? 'Six' : 'Five'} routes in one app return the same body: undecorated; two PINGs on the lock's connection inside the handler (what two round trips cost in a request); the **floor route**, undecorated, which sends by hand on the lock's connection the two commands a lock needs at least (\`SET key token NX PX 30000\`, then a compare-and-delete script by EVALSHA), as information; \`LockService\` acquire + release inside the handler; ${withLock ? "the **withLock route**, `LockService.withLock('bench:<id>', …)` by hand with the same key and body — what the bar judges @Locked against; " : ''}${intercepted ? "the same withLock route behind an interceptor that does nothing — **@Locked's floor**: the lock and the interceptor chain @Locked needs to reach the request (RxJS, two `AsyncResource.bind` per call), nothing of ours; " : ''}\`@Locked('bench:<id>')\`. A fresh id per request (uncontended); ${n0(c.s5Sequential)} sequential requests per route in interleaved blocks of 100 over keep-alive, then ${n0(c.s5Concurrent)} per route from 16 concurrent loops (undecorated, floor, ${withLock ? 'withLock, ' : ''}${intercepted ? 'intercepted withLock, ' : ''}@Locked) in 10 interleaved phases. The unit is the *handler RTT*: half the latency the two PINGs add to a request, p50 (${n0(handlerRtt)} µs; a PING in a tight loop on the same connection takes ${n0(m.rttUs)} µs).`,
      '',
      table(
        [
          'Route (sequential)',
          'p50 µs',
          'over undecorated µs',
          'in handler RTT',
          'over floor µs',
          'in handler RTT',
          'CPU µs/request',
          'CPU µs over floor',
        ],
        [
          row('undecorated', m.seqPlainP50Us, m.seqPlainCpuUs),
          row('2 × PING in the handler', m.seqPingsP50Us, m.seqPingsCpuUs),
          row('floor: SET NX PX + EVALSHA delete by hand', m.seqFloorP50Us, m.seqFloorCpuUs),
          row('LockService acquire + release in the handler', m.seqManualP50Us, m.seqManualCpuUs),
          ...(withLock
            ? [row('LockService.withLock in the handler', m.seqWithLockP50Us, m.seqWithLockCpuUs)]
            : []),
          ...(intercepted
            ? [
                row(
                  'withLock behind a pass-through interceptor',
                  m.seqInterceptedP50Us,
                  m.seqInterceptedCpuUs,
                ),
              ]
            : []),
          row("@Locked('bench:<id>')", m.seqLockedP50Us, m.seqLockedCpuUs),
        ],
      ),
      '',
      table(
        [
          '16 concurrent loops',
          'undecorated',
          'floor',
          ...(withLock ? ['withLock'] : []),
          ...(intercepted ? ['intercepted withLock'] : []),
          '@Locked',
          '@Locked / floor',
          ...(withLock ? ['@Locked / withLock'] : []),
          ...(intercepted ? ['@Locked / intercepted'] : []),
        ],
        [
          [
            'mean latency µs',
            n0(m.concPlainMeanUs),
            n0(m.concFloorMeanUs),
            ...(withLock ? [n0(m.concWithLockMeanUs)] : []),
            ...(intercepted ? [n0(m.concInterceptedMeanUs)] : []),
            n0(m.concLockedMeanUs),
            f(m.concLockedMeanUs / m.concFloorMeanUs),
            ...(withLock ? [f(m.concLockedMeanUs / m.concWithLockMeanUs)] : []),
            ...(intercepted ? [f(m.concLockedMeanUs / m.concInterceptedMeanUs)] : []),
          ],
          [
            'requests/s',
            n0(m.concPlainRps),
            n0(m.concFloorRps),
            ...(withLock ? [n0(m.concWithLockRps)] : []),
            ...(intercepted ? [n0(m.concInterceptedRps)] : []),
            n0(m.concLockedRps),
            f(m.concLockedVsFloor),
            ...(withLock ? [f(m.concLockedVsWithLock)] : []),
            ...(intercepted ? [f(m.concLockedVsIntercepted)] : []),
          ],
          [
            'CPU µs/request',
            n0(m.concPlainCpuUs),
            n0(m.concFloorCpuUs),
            ...(withLock ? [n0(m.concWithLockCpuUs)] : []),
            ...(intercepted ? [n0(m.concInterceptedCpuUs)] : []),
            n0(m.concLockedCpuUs),
            f(m.concLockedVsFloorCpu),
            ...(withLock ? [f(m.concLockedVsWithLockCpu)] : []),
            ...(intercepted ? [f(m.concLockedVsInterceptedCpu)] : []),
          ],
        ],
      ),
      '',
      `\`LockService\` acquire + release in a tight loop on the same connection: ${n0(m.lockOpUs)} µs (${f(m.lockOpUs / m.rttUs)} PING RTT). CPU is this process's (HTTP client, Nest and lock together). The concurrent @Locked ratios are medians of the 10 phases' ratios (each phase runs the routes next to each other). Non-200 responses: ${m.non200}.`,
      '',
    );
  }
  if (r.s6 || r.footprint) out.push('## S6 — memory and renewal', '');
  if (r.s6) {
    const cy = r.s6.cycles;
    const h = r.s6.held;
    out.push(
      `${n0(cy.cycles)} acquire/release cycles (${cy.concurrency} loops, 6,400 keys) in ${f(cy.seconds, 1)} s (${n0(cy.opsPerSec)} ops/s): heap after GC ${f(cy.heapBeforeMb)} → ${f(cy.heapAfterMb)} MB, ` +
        `checkpoints every tenth: ${cy.heapCheckpointsMb.map((v) => f(v)).join(', ')} MB (slope ${f(cy.slopeKbPer100k, 0)} KB per 100k cycles); RSS ${n0(cy.rssBeforeMb)} → ${n0(cy.rssAfterMb)} MB.`,
      '',
      `${n0(h.locks)} locks held at once, ttl ${h.ttlMs} ms (renewal every ${h.ttlMs / 3} ms), for ${h.periods} renewal periods (${h.holdMs} ms): ` +
        `acquired in ${f(h.acquireSeconds)} s, ${n0(h.heapPerLockBytes)} B of heap per held lock; ` +
        `${n0(h.renewalCommands)} renewal commands (EVALSHA, INFO commandstats) = ${f(h.renewalCommandsPerPeriod, 1)} per period for ${n0(h.locks)} locks, ` +
        `in ${h.renewalBursts} bursts (INFO sampled every ${h.sampleMs} ms: ${h.burstSizes.map(n0).join(', ')}; renewal traffic in ${pct(h.renewalActiveShare)} of the samples); ` +
        `timers: ${f(h.timersCreatedPerRenewal)} created per renewal command, live (unref'ed included) median ${n0(h.liveTimersMedian)} / peak ${n0(h.liveTimersMax)}, ` +
        `process.getActiveResourcesInfo() 'Timeout' median ${n0(h.activeTimeoutsMedian)} / peak ${n0(h.activeTimeoutsMax)}; ` +
        `write syscalls while holding: ${n0(h.writeSyscalls)} (${f(h.writeSyscalls / h.renewalCommands)} per renewal command); CPU while holding: ${n0(h.holdCpuPercent)}% of one core; ` +
        `locks lost: ${n0(h.lost)}; released as still held: ${n0(h.releasedOk)} / ${n0(h.locks)}.`,
      '',
    );
  }
  if (r.footprint) out.push(...renderFootprint(r.footprint));
  if (r.sem) out.push(...renderSemaphore(r.sem));
  if (r.multiKey) out.push(...renderMultiKey(r.multiKey));
  if (r.rw) out.push(...renderReadLock(r.rw));
  out.push('## Settings used', '');
  for (const x of r.contenders) out.push(`- **${x.label}** — ${x.settings}`);
  out.push('');
  return { markdown: out.join('\n'), svg };
}
