import { ClientWatch, ConnectionWatch } from '../redis/connection-watch';
import type { RedisClient } from '../redis/redis-client';
import { pingConnections } from './ping-connections';

/** A stand-in client: PING answers (or never does), as the test says. */
function fakeClient(port: number, answers: boolean, extra: object = {}): RedisClient {
  return {
    status: 'ready',
    options: { host: '10.0.0.1', port },
    on: () => undefined,
    off: () => undefined,
    ping: () => (answers ? Promise.resolve('PONG') : new Promise<never>(() => undefined)),
    ...extra,
  } as unknown as RedisClient;
}

const watch = (clients: RedisClient[], quorum: number): ConnectionWatch =>
  new ConnectionWatch(
    clients.map((client, i) => new ClientWatch(client, `node-${i}`)),
    quorum,
    'test',
  );

describe('pingConnections', () => {
  it('one Redis: its PING, with the latency', async () => {
    const outcome = await pingConnections(watch([fakeClient(1, true)], 1), 50);
    expect(outcome).toMatchObject({ reachable: true, nodes: 1, answered: 1, needed: 1 });
    expect(outcome.latencyMs).toEqual(expect.any(Number));
    expect(outcome.error).toBeUndefined();
  });

  it('one Redis that does not answer: unreachable after the timeout', async () => {
    const outcome = await pingConnections(watch([fakeClient(1, false)], 1), 20);
    expect(outcome).toMatchObject({ reachable: false, answered: 0 });
    expect(outcome.error).toMatch(/did not answer PING within 20 ms/);
  });

  it('Redlock: reachable with a quorum, naming a silent node', async () => {
    const nodes = [fakeClient(1, true), fakeClient(2, false), fakeClient(3, true)];
    const outcome = await pingConnections(watch(nodes, 2), 20);
    expect(outcome).toMatchObject({ reachable: true, nodes: 3, answered: 2, needed: 2 });
    expect(outcome.error).toMatch(/^node-1: Redis did not answer PING/);
    const minority = await pingConnections(watch([nodes[1]!, nodes[1]!, nodes[0]!], 2), 20);
    expect(minority).toMatchObject({ reachable: false, answered: 1, needed: 2 });
  });

  it('Cluster: every primary must answer', async () => {
    const primaries = [fakeClient(7000, true), fakeClient(7001, false)];
    const cluster = fakeClient(0, true, { isCluster: true, nodes: () => primaries });
    const outcome = await pingConnections(watch([cluster], 1), 20);
    expect(outcome).toMatchObject({ reachable: false, nodes: 2, answered: 1, needed: 2 });
    expect(outcome.error).toMatch(/^10\.0\.0\.1:7001: /);
  });

  it('a connection that never came up: its cause at once, without waiting', async () => {
    let onError: (error: Error) => void = () => undefined;
    const client = fakeClient(1, false, {
      status: 'connecting',
      on: (event: string, listener: (error: Error) => void) => {
        if (event === 'error') onError = listener;
      },
    });
    const connections = watch([client], 1);
    onError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    const outcome = await pingConnections(connections, 60_000);
    expect(outcome).toMatchObject({ reachable: false, answered: 0 });
    expect(outcome.error).toMatch(/node-0: connection refused/);
  });

  it('no connections (in-memory backend): reachable', async () => {
    const outcome = await pingConnections(watch([], 1), 20);
    expect(outcome).toMatchObject({ reachable: true, nodes: 0, answered: 0 });
  });
});
