import type { Cluster } from 'ioredis';
import { ClusterPubSubCheck } from './cluster-pubsub-check';

/** A Cluster client whose nodes answer `COMMAND INFO SPUBLISH` only once `up` is set. */
function fakeCluster() {
  const state = { up: false, asked: 0 };
  const answer = (): Promise<unknown> => {
    state.asked++;
    return state.up
      ? Promise.resolve([['spublish']])
      : Promise.reject(new Error('Connection is closed.'));
  };
  const node = { options: { host: '127.0.0.1', port: 7000 }, call: answer };
  const cluster = { call: answer, nodes: () => [node] } as unknown as Cluster;
  return { cluster, state };
}

describe('ClusterPubSubCheck', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('asks again with backoff, without anyone subscribing, until the nodes answer', async () => {
    const { cluster, state } = fakeCluster();
    const check = new ClusterPubSubCheck(cluster, 100);
    await jest.advanceTimersByTimeAsync(0);
    expect(state.asked).toBe(1);
    expect(check.publish).toBe('PUBLISH'); // until they answer: what every server has
    await jest.advanceTimersByTimeAsync(250 + 500 + 1_000);
    expect(state.asked).toBe(4); // after 250, 500 and 1,000 ms
    state.up = true;
    await jest.advanceTimersByTimeAsync(2_000);
    expect(check.publish).toBe('SPUBLISH');
    const asked = state.asked;
    await jest.advanceTimersByTimeAsync(60_000);
    expect(state.asked).toBe(asked); // answered: never asked again
    check.close();
  });

  it('waits at most 5 s between tries, and stops at close', async () => {
    const { cluster, state } = fakeCluster();
    const check = new ClusterPubSubCheck(cluster, 100);
    await jest.advanceTimersByTimeAsync(60_000);
    const asked = state.asked;
    await jest.advanceTimersByTimeAsync(5_000);
    expect(state.asked).toBe(asked + 1);
    check.close();
    await jest.advanceTimersByTimeAsync(60_000);
    expect(state.asked).toBe(asked + 1);
  });
});
