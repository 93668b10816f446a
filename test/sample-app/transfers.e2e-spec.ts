/**
 * The sample shop's multi-key lock, end to end: three replicas (separate processes) behind one
 * Redis take concurrent credit transfers between three users in both directions
 * (`POST /transfers` under `@Locked(['wallet:<body.from>', 'wallet:<body.to>'])`). With the lock,
 * every balance is what the transfers that succeeded add up to and the total is conserved; the
 * same burst with LOCKS=off loses updates, which proves the first half can fail.
 */
import { startFleet, type Fleet } from '../../sample-app/harness/replicas';
import { killAllWorkers } from '../support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';

const USERS = ['ann', 'bob', 'cy'];
const OPENING = 1_000;
const TRANSFERS = 60;

const redis = redisClient();
afterAll(async () => {
  await killAllWorkers(); // a backstop: each fleet is stopped by its own afterAll
  await redis.quit();
});

interface Burst {
  /** Each user's balance as the transfers answered 200 add up to. */
  ledger: Record<string, number>;
  balances: Record<string, number>;
  statuses: number[];
  busy: number;
}

/** Sets every user's credit, fires the transfers at once over the replicas, reads the result. */
async function fireTransfers(fleet: Fleet): Promise<Burst> {
  const put = (userId: string) =>
    fetch(`${fleet.urls[0]}/credits/${userId}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ credit: OPENING }),
    });
  await Promise.all(USERS.map(put));
  const ledger = Object.fromEntries(USERS.map((user) => [user, OPENING]));
  const responses = await Promise.all(
    Array.from({ length: TRANSFERS }, async (_, i) => {
      // ann → bob, bob → cy, cy → ann, and every pair the other way round as well.
      const a = USERS[i % 3]!;
      const b = USERS[(i + 1) % 3]!;
      const [from, to] = i % 2 ? [a, b] : [b, a];
      const amount = 1 + (i % 5);
      const response = await fetch(`${fleet.urls[i % fleet.urls.length]}/transfers`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ from, to, amount }),
      });
      const body = (await response.json()) as { reason?: string };
      if (response.status === 200) {
        ledger[from]! -= amount;
        ledger[to]! += amount;
      }
      return { status: response.status, busy: body.reason === 'busy' };
    }),
  );
  const balances: Record<string, number> = {};
  for (const user of USERS) {
    const response = await fetch(`${fleet.urls[1]}/credits/${user}`);
    balances[user] = ((await response.json()) as { credit: number }).credit;
  }
  return {
    ledger,
    balances,
    statuses: responses.map((r) => r.status),
    busy: responses.filter((r) => r.busy).length,
  };
}

const total = (balances: Record<string, number>) =>
  Object.values(balances).reduce((sum, value) => sum + value, 0);

describe('credit transfers on 3 replicas with the multi-key lock', () => {
  const prefix = uniquePrefix('sample-transfers');
  let fleet: Fleet | undefined;
  let burst: Burst;

  beforeAll(async () => {
    fleet = await startFleet({
      redisUrl: SHARED_REDIS_URL,
      prefix,
      locks: true,
      env: { SETTLEMENT: 'off' },
    });
    burst = await fireTransfers(fleet);
  }, 90_000);

  afterAll(async () => {
    await fleet?.stop();
    await deleteKeys(redis, prefix);
  });

  it('answers every transfer 200, or 409 busy after waiting its 5 s, never anything else', () => {
    const other = burst.statuses.filter((status) => status !== 200 && status !== 409);
    expect(other).toEqual([]);
    expect(burst.statuses.filter((status) => status === 409)).toHaveLength(burst.busy);
    expect(burst.statuses.filter((status) => status === 200).length).toBeGreaterThan(0);
  });

  it('conserves the total, and each balance is what its transfers add up to', () => {
    expect(total(burst.balances)).toBe(USERS.length * OPENING);
    expect(burst.balances).toEqual(burst.ledger);
  });
});

describe('the same transfers with LOCKS=off (the control run)', () => {
  const prefix = uniquePrefix('sample-transfers-nolock');
  let fleet: Fleet | undefined;

  afterAll(async () => {
    await fleet?.stop();
    await deleteKeys(redis, prefix);
  });

  it('loses updates: the balances are not what the transfers add up to', async () => {
    fleet = await startFleet({
      redisUrl: SHARED_REDIS_URL,
      prefix,
      locks: false,
      env: { SETTLEMENT: 'off' },
    });
    const burst = await fireTransfers(fleet);
    expect(burst.statuses.every((status) => status === 200)).toBe(true);
    expect(burst.balances).not.toEqual(burst.ledger);
  }, 90_000);
});
