/**
 * The leader kind on the shared Redis, under a prefix of its own, beside its in-memory twin: a
 * term is an exclusive lease under `<prefix>{<role>}:leader` (never the lock of the same name),
 * its fence the term, and `inspect-leader.script.ts` reads the leader, the lease left, the term
 * and the processes subscribed to the role's release channel — the same answers in memory.
 */
import { randomBytes } from 'node:crypto';
import { MemoryLockBackend } from '../../lib/backends/memory.backend';
import { RedisBackend } from '../../lib/backends/redis.backend';
import { EXCLUSIVE, LEADER } from '../../lib/keys/lease-kind';
import { lockRedisKeys } from '../../lib/keys/lock-keys';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('leader-kind');
const redis = redisClient();
const backend = new RedisBackend({ client: redisClient(), owned: true }, 1_000, 10_000);
const memory = new MemoryLockBackend({ fenceRetention: 10_000 });

const token = (id: string): string => `${randomBytes(16).toString('hex')} ${Date.now()} ${id}`;

afterAll(async () => {
  await backend.close();
  await memory.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe.each([
  ['Redis', () => backend],
  ['memory', () => memory],
] as const)('the leader kind on %s', (_, store) => {
  const role = `role-${_}`;
  const keys = lockRedisKeys(prefix, role, LEADER);

  it('lives under names of its own, apart from the lock of the same name', async () => {
    expect(keys.lock).toBe(`${prefix}{${role}}:leader`);
    const lock = lockRedisKeys(prefix, role, EXCLUSIVE);
    const locker = token('locker');
    expect(await store().acquire(lock, locker, 2_000)).toBeGreaterThan(0);
    // The lock of the same name holds nothing back, and nothing of it is the leader's.
    expect(await store().acquire(keys, token('leader'), 2_000)).toBeGreaterThan(0);
    expect(await store().release(lock, locker)).toBe(true);
    expect((await store().leaders.inspect(keys)).token).toMatch(/ leader$/);
  });

  it('reads who leads, the term, the lease left and the followers subscribed', async () => {
    const info = await store().leaders.inspect(keys);
    expect(info.token).toMatch(/ leader$/);
    expect(info.leaseLeftMs).toBeGreaterThan(0);
    expect(info.leaseLeftMs).toBeLessThanOrEqual(2_000);
    expect(info.term).toBe(await store().acquire(keys, info.token!, 2_000)); // its own grant, asked again
    const pubsub = store().createPubSub();
    await pubsub.subscribe(keys.channel);
    await waitFor(async () => (await store().leaders.inspect(keys)).followers === 1, 2_000);
    pubsub.close();
  });

  it('releases by compare-and-delete and reads nobody afterwards, the term kept', async () => {
    const { token: held, term } = await store().leaders.inspect(keys);
    expect(await store().release(keys, 'someone else')).toBe(false);
    expect(await store().release(keys, held!)).toBe(true);
    const after = await store().leaders.inspect(keys);
    expect(after).toMatchObject({ token: null, leaseLeftMs: 0, term });
    expect(await store().acquire(keys, token('next'), 2_000)).toBeGreaterThan(term);
  });
});
