/**
 * Scenario 1 — a client paused past its lease. The holder's process is SIGSTOPped (or blocks its
 * own event loop) for longer than the lease; meanwhile another process acquires the lock and
 * writes through a fenced store. When the paused holder resumes, its signal is already aborted at
 * its first look, before any await; its release()/extend() cannot touch the new owner's key; and
 * a write it attempts with its old fence is refused by the store.
 */
import Redis from 'ioredis';
import { LockService } from 'nestjs-redis-lock';
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { now, sleep } from '../support/time';
import { signalPid } from '../support/tracked-pids';
import { lockKeys, ms, observe } from './fault-support';
import { fencedRead, fencedWrite } from './fixtures/fenced-store';

const WORKER = 'test/fault/fixtures/paused-holder-worker.ts';
const PREFIX = 'pause:';
const TTL = 400;

interface Report {
  aborted: boolean;
  sinceLastCheck: number;
  writes: number;
  reason?: string;
  staleWrite: boolean;
  extend: string;
  release: boolean | string;
  lost: string[];
}

let server: RedisServer;
let redis: Redis;
let locks: LockService;
const holders: Record<'sigstop' | 'block', Worker> = {} as never;

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  locks = new LockService({ redis: server.url, prefix: PREFIX, ttl: 5_000 });
  // Start both holder processes at once: process start-up is most of this file's time.
  holders.sigstop = startHolder('sigstop', 'sigstop');
  holders.block = startHolder('blocked', 'block');
});

afterAll(async () => {
  await killAllWorkers();
  await locks?.close();
  redis?.disconnect();
  await stopAllRedis();
});

function startHolder(key: string, mode: 'sigstop' | 'block'): Worker {
  return spawnWorker(WORKER, {
    REDIS_URL: server.url,
    PREFIX,
    KEY: key,
    TTL: String(TTL),
    MODE: mode,
    BLOCK_MS: String(TTL * 2.5),
    RECORD: `store:${key}`,
  });
}

async function reportOf(worker: Worker): Promise<Report> {
  const [, json] = await worker.waitForOutput(/^report (.*)$/m, 20_000);
  await worker.succeeded();
  return JSON.parse(json!) as Report;
}

/** The new owner takes the lock once the paused holder's lease ran out, and writes through the store. */
async function takeOver(key: string, pausedAt: number) {
  const owner = await locks.acquire(key, { wait: TTL * 4 });
  const takenAfter = now() - pausedAt;
  expect(await fencedWrite(redis, `store:${key}`, owner.fence, 'B')).toBe(true);
  return { owner, takenAfter };
}

/** What the new owner must still see after the old holder resumed and misbehaved. */
async function expectOwnerIntact(key: string, owner: { token: string; fence: number }) {
  const { lock } = lockKeys(PREFIX, key);
  expect(await redis.get(lock)).toBe(owner.token);
  expect(await redis.pttl(lock)).toBeGreaterThan(0);
  expect(await fencedRead(redis, `store:${key}`)).toEqual({ fence: owner.fence, value: 'B' });
}

describe('scenario 1: a holder paused past its lease', () => {
  it('SIGSTOP: on resume the signal is aborted at the first look, stale writes/extend/release fail', async () => {
    const key = 'sigstop';
    const holder = holders.sigstop;
    const [, , oldFence] = await holder.waitForOutput(/^acquired (.+) (\d+)$/m);
    await holder.waitForOutput(/^working$/m);

    signalPid(holder.pid, 'SIGSTOP');
    const pausedAt = now();
    const { owner, takenAfter } = await takeOver(key, pausedAt);
    expect(owner.fence).toBeGreaterThan(Number(oldFence));
    await sleep(TTL / 2);
    signalPid(holder.pid, 'SIGCONT');
    const pausedFor = now() - pausedAt;

    const report = await reportOf(holder);
    expect(report.writes).toBeGreaterThanOrEqual(3); // it was working before the pause
    expect(report.aborted).toBe(true);
    // The look that found the signal aborted was the first one after the pause.
    expect(report.sinceLastCheck).toBeGreaterThan(TTL);
    expect(report.reason).toBe('deadline');
    expect(report.staleWrite).toBe(false);
    expect(report.extend).toBe('LockLostError:deadline');
    expect(report.release).toBe(false);
    expect(report.lost).toEqual(['deadline']);
    await expectOwnerIntact(key, owner);
    expect(await owner.release()).toBe(true);

    observe('1-sigstop', {
      ttl: TTL,
      pausedFor: ms(pausedFor),
      takenOverAfter: ms(takenAfter),
      firstLookAfter: ms(report.sinceLastCheck),
      oldFence: Number(oldFence),
      newFence: owner.fence,
      staleWrite: report.staleWrite ? 'accepted' : 'refused',
      extend: report.extend,
      release: report.release,
    });
  });

  it('blocked event loop: the first synchronous look after the block sees the signal aborted', async () => {
    const key = 'blocked';
    const holder = holders.block;
    const [, , oldFence] = await holder.waitForOutput(/^acquired (.+) (\d+)$/m);
    holder.send('go');
    const pausedAt = now();
    const { owner, takenAfter } = await takeOver(key, pausedAt);
    holder.send('taken');
    expect(owner.fence).toBeGreaterThan(Number(oldFence));

    const report = await reportOf(holder);
    expect(report.aborted).toBe(true);
    expect(report.reason).toBe('deadline');
    expect(report.staleWrite).toBe(false);
    expect(report.extend).toBe('LockLostError:deadline');
    expect(report.release).toBe(false);
    expect(report.lost).toEqual(['deadline']);
    await expectOwnerIntact(key, owner);
    expect(await owner.release()).toBe(true);

    observe('1-block', {
      ttl: TTL,
      blockedFor: ms(report.sinceLastCheck),
      takenOverAfter: ms(takenAfter),
      oldFence: Number(oldFence),
      newFence: owner.fence,
      staleWrite: report.staleWrite ? 'accepted' : 'refused',
      release: report.release,
    });
  });
});
