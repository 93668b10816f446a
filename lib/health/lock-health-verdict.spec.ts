import type { RenewalStatus } from '../engine/renewal-record';
import { RedisLockConfigError } from '../errors/errors';
import { resolveHealthOptions } from './lock-health-options';
import { judgeLockHealth } from './lock-health-verdict';
import type { PingOutcome } from './ping-connections';

const NOW = 100_000;
const limits = resolveHealthOptions({}, 30_000); // maxLag 5 000, 1 failure, 60 s window
const reachable: PingOutcome = {
  reachable: true,
  latencyMs: 1.5,
  nodes: 1,
  answered: 1,
  needed: 1,
};
const quiet: RenewalStatus = {
  running: true,
  lastTickLate: 2,
  lastTickAt: NOW - 1_000,
  overdue: 0,
  lastRenewedAt: NOW - 1_000,
  failedAt: [],
  failedInRow: 0,
};

function judge(renewals: Partial<RenewalStatus>, ping = reachable, held = 1) {
  return judgeLockHealth(ping, { held, renewals: { ...quiet, ...renewals } }, limits, NOW);
}

describe('judgeLockHealth', () => {
  it('is up with the details of a quiet instance', () => {
    expect(judge({})).toEqual({
      redis: { reachable: true, latencyMs: 1.5 },
      renewals: {
        running: true,
        lagMs: 2,
        recentFailures: 0,
        failingInRow: 0,
        lastRenewalAgoMs: 1_000,
      },
      held: 1,
    });
  });

  it('is down when Redis does not answer, naming the nodes when there are several', () => {
    const single = judge({}, { reachable: false, nodes: 1, answered: 0, needed: 1, error: 'boom' });
    expect(single.reasons).toEqual(['Redis is unreachable: boom']);
    const quorum = judge({}, { reachable: false, latencyMs: 3, nodes: 3, answered: 1, needed: 2 });
    expect(quorum.redis).toEqual({
      reachable: false,
      latencyMs: 3,
      nodes: { answered: 1, total: 3, needed: 2 },
    });
    expect(quorum.reasons).toEqual(['Redis is unreachable (1 of 3 answered, 2 needed): no answer']);
  });

  it('is up with recent failures in a row once nothing is held and Redis answers', () => {
    const failedAt = [NOW - 2_000, NOW - 500];
    const idle = judge({ failedAt, failedInRow: 2, lastFailure: 'timeout' }, reachable, 0);
    expect(idle.reasons).toBeUndefined();
    expect(idle.renewals).toMatchObject({ recentFailures: 2, failingInRow: 2 });
    expect(judge({ failedAt, failedInRow: 2, lastFailure: 'timeout' }).reasons).toEqual([
      'The last 2 renewal batch(es) failed: timeout',
    ]);
  });

  it('counts only the failures within the window, and goes down while they are in a row', () => {
    const failedAt = [NOW - 70_000, NOW - 30_000, NOW - 500];
    const failing = judge({ failedAt, failedInRow: 2, lastFailure: 'timeout' });
    expect(failing.renewals).toMatchObject({
      recentFailures: 2,
      failingInRow: 2,
      lastFailure: 'timeout',
      lastFailureAgoMs: 500,
    });
    expect(failing.reasons).toEqual(['The last 2 renewal batch(es) failed: timeout']);
    // A renewal succeeded since: up, the failures still shown.
    const recovered = judge({ failedAt, failedInRow: 0, lastFailure: 'timeout' });
    expect(recovered.reasons).toBeUndefined();
    expect(recovered.renewals.recentFailures).toBe(2);
  });

  it('forgets a failing streak older than the window (its locks are long gone)', () => {
    const old = judge({ failedAt: [NOW - 61_000], failedInRow: 1, lastFailure: 'timeout' });
    expect(old.reasons).toBeUndefined();
    expect(old.renewals.recentFailures).toBe(0);
  });

  it('goes down at maxFailedRenewals in a row, not before', () => {
    const two = resolveHealthOptions({ maxFailedRenewals: 2 }, 30_000);
    const status = { ...quiet, failedAt: [NOW - 10], failedInRow: 1, lastFailure: 'x' };
    expect(judgeLockHealth(reachable, { held: 1, renewals: status }, two, NOW).reasons).toBe(
      undefined,
    );
    const again = { ...status, failedAt: [NOW - 20, NOW - 10], failedInRow: 2 };
    expect(judgeLockHealth(reachable, { held: 1, renewals: again }, two, NOW).reasons).toHaveLength(
      1,
    );
  });

  it('is down when the loop lags past maxLag: a late recent tick, or one overdue now', () => {
    expect(judge({ lastTickLate: 5_000 }).reasons).toBeUndefined();
    expect(judge({ lastTickLate: 5_001 }).reasons).toEqual([
      'The renewal loop runs 5001 ms late (maxLag 5000 ms).',
    ]);
    expect(judge({ overdue: 6_000 }).renewals.lagMs).toBe(6_000);
    // A late tick long ago no longer counts.
    expect(judge({ lastTickLate: 9_000, lastTickAt: NOW - 61_000 }).renewals.lagMs).toBe(0);
  });

  it('is down when the loop is not scheduled', () => {
    expect(judge({ running: false }).reasons).toEqual([
      'The renewal loop is not scheduled while locks are held.',
    ]);
  });
});

describe('resolveHealthOptions', () => {
  it('defaults maxLag to a sixth of the ttl, one failure, a minute', () => {
    expect(resolveHealthOptions({}, 6_000)).toEqual({
      maxLag: 1_000,
      maxFailedRenewals: 1,
      window: 60_000,
    });
  });

  it.each([
    [{ maxLag: 0 }, /`maxLag` is 0/],
    [{ maxLag: Number.NaN }, /`maxLag`/],
    [{ window: -1 }, /`window` is -1/],
    [{ maxFailedRenewals: 0 }, /`maxFailedRenewals` is 0; expected a whole number >= 1/],
    [{ maxFailedRenewals: 1.5 }, /`maxFailedRenewals`/],
    [{ maxlag: 100 }, /`maxlag` is not an option.*maxLag/],
  ])('refuses %p', (options, message) => {
    const resolve = () => resolveHealthOptions(options as never, 30_000);
    expect(resolve).toThrow(RedisLockConfigError);
    expect(resolve).toThrow(message);
  });
});
