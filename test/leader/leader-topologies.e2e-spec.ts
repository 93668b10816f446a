/**
 * Leader election on a Redis Cluster of its own (3 primaries, sharded pub/sub where the server
 * has it): roles whose slots three different primaries serve each elect one of two services,
 * hand over on resignation by the release message, and read back through `inspectLeader`.
 */
import type { LeaderHandle } from 'nestjs-redis-lock';
import { onOwnCluster } from '../support/own-cluster';
import { waitFor } from '../support/time';

const cluster = onOwnCluster('leader-cluster');

it('elects one leader per role on a Cluster, and hands over on resignation', async () => {
  const roles = await cluster.keyPerShard('role');
  const [a, b] = [cluster.service({ ttl: 10_000 }), cluster.service({ ttl: 10_000 })];
  for (const role of roles) {
    const handles: LeaderHandle[] = [a.lead(role), b.lead(role)];
    await waitFor(() => handles.filter((handle) => handle.isLeader).length === 1, 5_000);
    const leader = handles.find((handle) => handle.isLeader)!;
    const follower = handles.find((handle) => handle !== leader)!;
    await waitFor(async () => (await a.inspectLeader(role)).followers >= 1, 5_000);
    const info = await b.inspectLeader(role);
    expect(info).toMatchObject({ role, led: true, term: leader.term });
    const term = leader.term;
    const resignedAt = performance.now();
    await leader.resign();
    // Well under the 10 s lease: the release message woke the follower.
    await waitFor(() => follower.isLeader, 2_000, 2);
    expect(performance.now() - resignedAt).toBeLessThan(1_000);
    expect(follower.term).toBeGreaterThan(term);
    await follower.resign();
  }
}, 60_000);
