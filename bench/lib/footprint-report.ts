/** The S6 tables of bytes per held lock and per waiting caller, and their row in "The bar". */
import type { Cost, FootprintResult, FootprintSubject, WaiterCost } from './footprint';
import type { BarRow } from './bar';

const bytes = (v: number): string =>
  Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a';
const keys = (v: number): string =>
  Number.isFinite(v) ? String(Math.round(v * 1000) / 1000) : 'n/a';
/** A lock's keys in the order lib/keys/lock-keys.ts introduces them; any other kind after. */
const KINDS = ['lock', 'fence', 'holder', 'queue', 'waiters', 'waiter-ids'];
const rank = (kind: string): number => (KINDS.includes(kind) ? KINDS.indexOf(kind) : KINDS.length);
const byKind = (c: Cost): string =>
  Object.entries(c.byKind)
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([kind, size]) => `${kind} ${bytes(size)}`)
    .join(', ') || '—';
const name = (s: FootprintSubject): string =>
  s.id.startsWith('ours') ? `**${s.label}**` : s.label;

/** `align`: one letter per column, l (left) or r (right). */
function table(head: string[], rows: string[][], align: string): string {
  const sep = head.map((_, i) => (align[i] === 'l' ? ':--' : '--:'));
  return [head, sep, ...rows].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

export function renderFootprint(f: FootprintResult): string[] {
  const chars = f.subjects.map((s) => Math.round(s.lockKeyChars)).filter(Number.isFinite);
  const waiterRow = (s: FootprintSubject, shape: string, w: WaiterCost): string[] => [
    name(s),
    shape,
    bytes(w.heapBytes),
    keys(w.keys),
    bytes(w.redisKeyBytes),
    byKind(w),
    bytes(w.redisUsedBytes),
    String(w.ended),
  ];
  return [
    '### Bytes per held lock and per waiting caller',
    '',
    `${bytes(f.locks)} locks held by one instance (one \`LockService\`; one \`Mutex\` per lock for redis-semaphore), then ${bytes(f.waiters)} callers of a second instance waiting on locks the first holds: each on a key of its own, then all on one key. ` +
      '*Heap* = heapUsed after GC, after minus before, per lock or caller (a waiting call includes the bench’s own promise for it, ~100 B). ' +
      '*MEMORY USAGE* = summed over every key the library wrote under its prefix (SCAN; `SAMPLES 0`), per lock or caller; *by key* splits it by the lock’s keys. ' +
      '*used_memory* = INFO memory delta per lock or caller: the keys plus what Redis keeps around them (expiry table, pub/sub subscriptions, client buffers) — the more honest figure, and the noisier. ' +
      `*Left after release* = MEMORY USAGE still there once every lock was released (ours keeps each fence counter for \`fenceRetention\`, 60 s by default). Lock key names were ${[...new Set(chars)].join(' / ')} bytes long; every byte more costs about one byte per key written.`,
    '',
    table(
      [
        'Per held lock',
        'keys written',
        'heap B',
        'MEMORY USAGE B',
        'by key',
        'used_memory B',
        'left after release B',
      ],
      f.subjects.map((s) => [
        name(s),
        keys(s.held.keys),
        bytes(s.held.heapBytes),
        bytes(s.held.redisKeyBytes),
        byKind(s.held),
        bytes(s.held.redisUsedBytes),
        bytes(s.released.redisKeyBytes),
      ]),
      'lrrrlrr',
    ),
    '',
    table(
      [
        'Per waiting caller',
        'waiting on',
        'heap B',
        'keys written',
        'MEMORY USAGE B',
        'by key',
        'used_memory B',
        'ended early',
      ],
      f.subjects.flatMap((s) => [
        waiterRow(s, 'a key of its own', s.waiterOwnKey),
        waiterRow(s, 'one key, all of them', s.waiterOneKey),
      ]),
      'llrrrlrr',
    ),
    '',
    '*Ended early* = waiting calls granted or given up before the snapshot (must be 0). A waiter of ours sleeps on the release channel (one subscription per key in this process, shared by its waiters) until its holder’s lease ends; in fair mode it also has an entry in the key’s queue in Redis. A redis-semaphore waiter polls (`SET NX` every 10 ms) and writes nothing while it waits.',
    '',
    ...f.subjects.map((s) => `- ${name(s)} — ${s.settings}`),
    '',
  ];
}

export function footprintBarRow(f: FootprintResult): BarRow {
  const of = (id: string): FootprintSubject | undefined => f.subjects.find((s) => s.id === id);
  const ours = of('ours');
  const fair = of('ours:fair');
  const peer = of('redis-semaphore');
  const held = (s: FootprintSubject): string =>
    `${bytes(s.held.heapBytes)} B heap + ${bytes(s.held.redisKeyBytes)} B in Redis (used_memory ${bytes(s.held.redisUsedBytes)} B)`;
  const waiter = (s: FootprintSubject): string =>
    `${bytes(s.waiterOwnKey.heapBytes)} B heap + ${bytes(s.waiterOwnKey.redisKeyBytes)} B keys / ${bytes(s.waiterOwnKey.redisUsedBytes)} B used_memory`;
  const all = [ours, fair, peer].filter((s): s is FootprintSubject => s !== undefined);
  const reported = all.every(
    (s) =>
      [s.held, s.waiterOwnKey, s.waiterOneKey].every(
        (c) => Number.isFinite(c.heapBytes) && Number.isFinite(c.redisKeyBytes),
      ) &&
      s.waiterOwnKey.ended === 0 &&
      s.waiterOneKey.ended === 0,
  );
  return {
    criterion: 'S6 bytes per held lock / per waiter reported (in process and in Redis)',
    bar: 'reported, next to redis-semaphore’s Mutex',
    measured: [
      ours && `held: ours ${held(ours)}`,
      peer && `redis-semaphore ${held(peer)}`,
      ours && `waiter on its own key: ours ${waiter(ours)}`,
      fair && `fair ${waiter(fair)}`,
      peer && `redis-semaphore ${waiter(peer)}`,
    ]
      .filter(Boolean)
      .join('; '),
    pass: ours && fair && peer ? reported : null,
  };
}
