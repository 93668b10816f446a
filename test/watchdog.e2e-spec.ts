/**
 * The lease follows the work: the watchdog renews a held lock every lease/3 for as
 * long as the work runs, and stops the moment it settles. Runs on a private redis-server, so
 * MONITOR and INFO commandstats see this file's commands only.
 */
import Redis from 'ioredis';
import type { LockLostError } from 'nestjs-redis-lock';
import { renewManyScript } from '../lib/kinds/exclusive/renew-many.script';
import { releaseScript } from '../lib/kinds/exclusive/release.script';
import {
  acquireKind,
  KINDS,
  outcomeOf,
  renewedNamesOf,
  writeForeignValue,
} from './support/foreign-values';
import { lockServices, redisKeyOf, warmedUp } from './support/lock-services';
import { monitorServer, type MonitoredCommand } from './support/monitor';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { now, sleep } from './support/time';

const prefix = 'watchdog:';
const TTL = 600;
let server: RedisServer;
let probe: Redis;
let services: ReturnType<typeof lockServices>;
const keyOf = (key: string): string => redisKeyOf(prefix, key);

beforeAll(async () => {
  server = await startRedis();
  probe = new Redis(server.url);
  services = lockServices({ redis: server.url, prefix, ttl: TTL });
});

afterAll(async () => {
  await services?.closeAll();
  probe?.disconnect();
  await stopAllRedis();
});

/**
 * The client's commands that name `token`, in order — without the PUBLISH the release script runs
 * inside Redis (its message is the token).
 */
function commandsNaming(commands: MonitoredCommand[], token: string): string[][] {
  return commands
    .map(({ args }) => args)
    .filter((args) => args.includes(token) && args[0]!.toLowerCase() !== 'publish');
}

const runs = (script: { sha: string; source: string }, args: string[]): boolean =>
  /^eval(sha)?$/i.test(args[0]!) && (args[1] === script.sha || args[1] === script.source);

async function evalshaCalls(): Promise<number> {
  const stats = await probe.info('commandstats');
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

describe('watchdog', () => {
  it(`keeps a lock exclusive while its holder works 3× the ${TTL} ms lease`, async () => {
    const holder = services.create();
    const other = services.create();
    let attempts = 0;
    let intrusions = 0;

    await holder.withLock('long-job', async (lock) => {
      const started = now();
      while (now() - started < TTL * 3) {
        const intruder = await other.tryAcquire('long-job');
        attempts++;
        if (intruder) {
          intrusions++;
          await intruder.release();
        }
        await sleep(10);
      }
      expect(lock.isHeld).toBe(true);
      expect(lock.signal.aborted).toBe(false);
    });

    expect(attempts).toBeGreaterThanOrEqual(10);
    expect(intrusions).toBe(0);
    expect(await probe.exists(keyOf('long-job'))).toBe(0);
  });

  it('renews while held, and sends no renewal and leaves no key after release()', async () => {
    const holder = services.create();
    const { commands, stop } = await monitorServer(server.url);
    try {
      const lock = await holder.acquire('renewed');
      await sleep(TTL * 1.5);
      expect(lock.isHeld).toBe(true);
      expect(await lock.release()).toBe(true);
      const evalshaAfterRelease = await evalshaCalls();

      // Three renewal periods (lease/3 each): the key stays gone, no renewal resurrects it.
      const watchUntil = now() + TTL;
      while (now() < watchUntil) {
        expect(await probe.pttl(keyOf('renewed'))).toBe(-2);
        await sleep(15);
      }
      expect(await evalshaCalls()).toBe(evalshaAfterRelease);

      const own = commandsNaming(commands, lock.token);
      const renewals = own.filter((args) => runs(renewManyScript, args));
      expect(renewals.length).toBeGreaterThanOrEqual(2);
      // The release is the last command that mentions this holder's token.
      expect(runs(releaseScript, own[own.length - 1]!)).toBe(true);
    } finally {
      await stop();
    }
  });

  it("stops renewing when withLock()'s work fails, passing the error through untouched", async () => {
    const holder = services.create();
    const failure = new Error('work failed');
    const { commands, stop } = await monitorServer(server.url);
    try {
      let token = '';
      await expect(
        holder.withLock('failing', async (lock) => {
          token = lock.token;
          await sleep(TTL);
          throw failure;
        }),
      ).rejects.toBe(failure);
      const evalshaAfterSettle = await evalshaCalls();

      await sleep(TTL);
      expect(await probe.exists(keyOf('failing'))).toBe(0);
      expect(await evalshaCalls()).toBe(evalshaAfterSettle);
      const own = commandsNaming(commands, token);
      expect(own.filter((args) => runs(renewManyScript, args)).length).toBeGreaterThanOrEqual(1);
      expect(runs(releaseScript, own[own.length - 1]!)).toBe(true);
    } finally {
      await stop();
    }
  });

  it('keeps a renew:false lease fixed, so it expires on its own', async () => {
    const holder = services.create();
    const lock = await holder.acquire('fixed', { renew: false });
    await sleep(TTL + 100);
    expect(await probe.exists(keyOf('fixed'))).toBe(0);
    expect(await lock.release()).toBe(false);
  });

  it('renews many held locks in batches: a few commands per period, not one per lock', async () => {
    const holder = services.create();
    const count = 300;
    // A longer lease than the file's: 300 locks and MONITOR traffic must not make one miss.
    const ttl = 900;
    const locks = await Promise.all(
      Array.from({ length: count }, (_, i) => holder.acquire(`many:${i}`, { ttl })),
    );
    const { commands, stop } = await monitorServer(server.url);
    let renewCommands: string[][];
    try {
      await sleep((ttl / 3) * 4); // four renewal periods
      renewCommands = commands
        .map(({ args }) => args)
        .filter((args) => runs(renewManyScript, args));
    } finally {
      await stop();
    }
    // One command per lock per period would be ~1,200; batches make it a handful per period.
    expect(renewCommands.length).toBeGreaterThanOrEqual(2);
    expect(renewCommands.length).toBeLessThanOrEqual(4 * 3);
    // Every lock was in a batch, and every one is still held on Redis.
    const renewedTokens = new Set(renewCommands.flat());
    for (const lock of locks) {
      expect(renewedTokens.has(lock.token)).toBe(true);
      expect(lock.isHeld).toBe(true);
    }
    const released = await Promise.all(locks.map((lock) => lock.release()));
    expect(released.every(Boolean)).toBe(true);
  });

  it('loses only the lock whose key was replaced by a foreign value, not its batch', async () => {
    const holder = services.create();
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((k) => holder.acquire(`batch:${k}`)));
    // Another application overwrote b's key with a hash: its renewal meets WRONGTYPE.
    await probe.del(keyOf('batch:b'));
    await probe.hset(keyOf('batch:b'), 'field', 'value');
    await sleep(TTL * 1.5);
    expect(b!.isHeld).toBe(false);
    expect((b!.signal.reason as LockLostError).reason).toBe('not-owner');
    for (const lock of [a, c]) {
      expect(lock!.isHeld).toBe(true);
      expect(await probe.get(keyOf(lock!.key))).toBe(lock!.token);
    }
    expect(await probe.hget(keyOf('batch:b'), 'field')).toBe('value');
    expect(await a!.release()).toBe(true);
    expect(await c!.release()).toBe(true);
    await probe.del(keyOf('batch:b'));
  });

  it.each(KINDS)(
    'keeps each lock its own outcome when a foreign value sits under a %s lock in a mixed batch',
    async (victimKind) => {
      const holder = await warmedUp(services.create());
      // One victim per name the kind renews under, each beside a held lock of every kind, all
      // acquired at once (on a connected service) so the watchdog renews them as one batch.
      const names = renewedNamesOf(prefix, `mixed:${victimKind}:0`, victimKind).map((_, i) => i);
      const sets = await Promise.all(
        names.map(async (i) => {
          const base = `mixed:${victimKind}:${i}`;
          const [victim, ...others] = await Promise.all([
            acquireKind(holder, base, victimKind),
            ...KINDS.map((kind) => acquireKind(holder, `${base}:beside-${kind}`, kind)),
          ]);
          return { victim, others, name: renewedNamesOf(prefix, base, victimKind)[i]! };
        }),
      );
      await Promise.all(sets.map((set) => writeForeignValue(probe, set.name)));
      await sleep(TTL * 1.5);
      const mainName = (set: (typeof sets)[number]) =>
        set.name === renewedNamesOf(prefix, set.victim.key, victimKind)[0];
      for (const set of sets) {
        // Every lock beside a foreign value keeps its lease: its renewal answered for itself.
        expect(set.others.map(outcomeOf)).toEqual(['held', 'held', 'held']);
        // The victim is lost as "not ours" when its own name holds the foreign value, never by a
        // deadline (that would mean its renewal failed with the batch's).
        if (mainName(set)) expect(outcomeOf(set.victim)).toBe('lost:not-owner');
        else expect(['held', 'lost:not-owner']).toContain(outcomeOf(set.victim));
      }
      await Promise.all(sets.flatMap((set) => set.others.map((lock) => lock.release())));
      // A victim still held may meet the foreign value again at release: that refusal is its own.
      await Promise.all(
        sets
          .filter((set) => set.victim.isHeld)
          .map((set) => set.victim.release().catch(() => false)),
      );
      await probe.del(...sets.map((set) => set.name));
    },
  );
});
