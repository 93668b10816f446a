/**
 * Compile-time specification of the Lua scripts' call signatures (checked by `tsc` in
 * `npm run lint`, never run): a caller passes every key and argument a script reads, of the right
 * kind, and gets the script's reply type without a cast. Each `@ts-expect-error` below must stay
 * an error — if the typing were lost, tsc would report the unused directive and the lint would fail.
 */
import { acquireScript } from '../../lib/kinds/exclusive/acquire.script';
import { fairAcquireScript } from '../../lib/kinds/exclusive/fair-acquire.script';
import { releaseScript } from '../../lib/kinds/exclusive/release.script';
import { renewManyScript } from '../../lib/kinds/exclusive/renew-many.script';
import type { RedisCommander } from '../../lib/redis/redis-client';

declare const client: RedisCommander;

export async function accepted(): Promise<void> {
  const fence: number | [number] = await acquireScript.run(
    client,
    ['lock', 'lock:fence', 'lock:writers-waiting'],
    ['t', 1_000, 60, '', 0],
  );
  const uncontended: number | [number] = await acquireScript.run(
    client,
    ['lock', 'lock:fence'],
    ['t', 1_000, 61_000],
  );
  const released: 0 | 1 = await releaseScript.run(client, ['lock'], ['t', 'PUBLISH']);
  const fair: number | [number, number] = await fairAcquireScript.run(
    client,
    ['lock', 'fence', 'queue', 'waiters', 'holder', 'waiter-ids'],
    ['t', 1_000, '1', 5_000, 60, 'id'],
  );
  const renewed: (0 | 1)[] = await renewManyScript.run(
    client,
    ['a', 'a:fence', 'a:holder'],
    [60, 't', 1_000],
  );
  void [fence, uncontended, released, fair, renewed];
}

export async function refused(): Promise<void> {
  const keys = ['l', 'l:fence', 'l:writers-waiting'] as const;
  // @ts-expect-error the fence counter key is missing
  await acquireScript.run(client, ['lock'], ['t', 1_000, 60, '', 0]);
  // @ts-expect-error one argument too many
  await acquireScript.run(client, keys, ['t', 1_000, 60, '', 0, 'x']);
  // @ts-expect-error the lease and the token swapped
  await acquireScript.run(client, keys, [1_000, 't', 60, '', 0]);
  // @ts-expect-error not a publish command
  await releaseScript.run(client, ['lock'], ['t', 'SET']);
  // @ts-expect-error the channel is no argument: the script builds it from the lock key
  await releaseScript.run(client, ['lock'], ['t', 'PUBLISH', 'channel']);
  // @ts-expect-error the fence retention comes first
  await renewManyScript.run(client, ['a', 'a:fence', 'a:holder'], ['t', 1_000]);
  // @ts-expect-error a fence is a number, not a string reply
  const fence: string = await acquireScript.run(
    client,
    ['lock', 'lock:fence', 'lock:writers-waiting'],
    ['t', 1_000, 60, '', 0],
  );
  void fence;
}
