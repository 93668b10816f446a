/**
 * Leader election across separate Node processes on the shared Redis (fixtures/leader-worker.ts):
 * three replicas campaign for one role while a monitor records who believes it leads. Never two
 * leaders at once and terms strictly increasing, with a control (leaders that ignore their
 * signal) that shows the overlap the check would catch; a SIGKILLed leader replaced within its
 * lease; a SIGSTOPped one revoked before it acts again; a graceful shutdown handed over by the
 * release message, in milliseconds.
 */
import { runCli } from '../../lib/cli/cli';
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { sleep, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { beliefsOf, eventsOf, hostNow, overlaps } from './leader-log';

const prefix = uniquePrefix('leader');
const redis = redisClient();

function replicas(role: string, env: Record<string, string>, count = 3): Worker[] {
  return Array.from({ length: count }, () =>
    spawnWorker('test/leader/fixtures/leader-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      ROLE: role,
      ...env,
    }),
  );
}

async function ready(workers: Worker[]): Promise<void> {
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m, 30_000)));
}

const outputs = (workers: readonly Worker[]) => workers.map((worker) => worker.stdout);

afterEach(async () => {
  await killAllWorkers();
});

afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe('leader election across 3 processes', () => {
  // Terms of 300 ms rotate leadership about ten times in the run.
  const fuzzEnv = { LEASE: '1000', TERM_LIMIT: '300', TICK_MS: '2' };

  it('never has two leaders at once, and terms strictly increase', async () => {
    const workers = replicas('fuzz', fuzzEnv);
    await ready(workers);
    await sleep(3_500);
    const beliefs = beliefsOf(outputs(workers));
    const terms = beliefs.map((belief) => belief.term);
    console.log(`fuzz: ${beliefs.length} terms, ${overlaps(beliefs).length} overlaps`);
    expect(beliefs.length).toBeGreaterThanOrEqual(5);
    expect(new Set(beliefs.map((b) => b.worker)).size).toBeGreaterThan(1);
    expect(overlaps(beliefs)).toEqual([]);
    expect(terms).toEqual([...terms].sort((a, b) => a - b));
    expect(new Set(terms).size).toBe(terms.length);
  });

  it('shows overlap when leaders ignore their signal, so the check above can fail', async () => {
    const workers = replicas('control', { ...fuzzEnv, IGNORE_SIGNAL: '1' });
    await ready(workers);
    await sleep(3_500);
    const found = overlaps(beliefsOf(outputs(workers)));
    console.log(`control: ${found.length} overlaps`);
    expect(found.length).toBeGreaterThan(0);
  });

  it('lets a follower lead within the lease after the leader is SIGKILLed', async () => {
    const lease = 2_000;
    const workers = replicas('killed', { LEASE: String(lease) });
    await ready(workers);
    await waitFor(() => eventsOf(outputs(workers)).some((e) => e.what === 'elected'), 10_000);
    const first = eventsOf(outputs(workers)).find((e) => e.what === 'elected')!;
    workers[first.worker]!.kill('SIGKILL');
    const killedAt = hostNow();
    const next = () =>
      eventsOf(outputs(workers)).find((e) => e.what === 'elected' && e.term > first.term);
    await waitFor(() => next() !== undefined, lease + 3_000);
    const takeover = next()!.at - killedAt;
    console.log(`SIGKILL: next leader after ${takeover.toFixed(0)} ms (lease ${lease} ms)`);
    expect(next()!.worker).not.toBe(first.worker);
    // The followers retry when the lease they last read ends (plus `retryJitter`): the lease, with
    // room for a busy host to run their timers.
    expect(takeover).toBeLessThanOrEqual(lease + 250);
  });

  it('revokes a SIGSTOPped leader before it acts again, and the next term is higher', async () => {
    const lease = 1_000;
    const workers = replicas('stopped', { LEASE: String(lease), TICK_MS: '5' });
    await ready(workers);
    await waitFor(() => eventsOf(outputs(workers)).some((e) => e.what === 'elected'), 10_000);
    const first = eventsOf(outputs(workers)).find((e) => e.what === 'elected')!;
    const paused = workers[first.worker]!;
    await paused.waitForOutput(/^tick /m, 5_000);
    paused.kill('SIGSTOP');
    const stoppedAt = hostNow();
    await sleep(lease * 2);
    paused.kill('SIGCONT');
    await paused.waitForOutput(new RegExp(`^revoked ${first.term} `, 'm'), 5_000);
    await sleep(200);
    // Every line it printed after the pause: the revocation comes before any tick as leader.
    const after = paused.stdout
      .split('\n')
      .filter((line) => Number(line.split(' ').at(-1)) > stoppedAt);
    expect(after[0]).toMatch(new RegExp(`^revoked ${first.term} (deadline|clock-jump|not-owner) `));
    const successor = eventsOf(outputs(workers)).find(
      (e) => e.what === 'elected' && e.worker !== first.worker,
    );
    expect(successor?.term).toBeGreaterThan(first.term);
    console.log(`SIGSTOP: ${after[0]}; successor term ${successor?.term} > ${first.term}`);
  });

  it('hands over within 100 ms of a graceful shutdown, by the release message', async () => {
    const lease = 20_000; // so long that only the release message can explain a quick take-over
    const workers = replicas('graceful', { LEASE: String(lease) });
    await ready(workers);
    await waitFor(() => eventsOf(outputs(workers)).some((e) => e.what === 'elected'), 10_000);
    await sleep(300); // the followers are waiting on the release channel
    const first = eventsOf(outputs(workers)).find((e) => e.what === 'elected')!;
    workers[first.worker]!.send('close');
    await workers[first.worker]!.waitForOutput(/^closed /m, 10_000);
    const next = () =>
      eventsOf(outputs(workers)).find((e) => e.what === 'elected' && e.term > first.term);
    await waitFor(() => next() !== undefined, 5_000);
    const resigned = eventsOf(outputs(workers)).find(
      (e) => e.what === 'revoked' && e.term === first.term,
    )!;
    expect(resigned.reason).toBe('resigned');
    const handOver = next()!.at - resigned.at;
    console.log(`graceful: next leader ${handOver.toFixed(1)} ms after the resignation`);
    expect(handOver).toBeLessThan(100);
  });

  it('shows the leader, its term and the followers waiting to inspectLeader and the CLI', async () => {
    const workers = replicas('shown', { LEASE: '5000' });
    await ready(workers);
    await waitFor(() => eventsOf(outputs(workers)).some((e) => e.what === 'elected'), 10_000);
    const first = eventsOf(outputs(workers)).find((e) => e.what === 'elected')!;
    const lines: string[] = [];
    const output = {
      out: (line: string) => lines.push(line),
      err: (line: string) => lines.push(line),
    };
    const cli = (...args: string[]) => runCli(args, { REDIS_URL: SHARED_REDIS_URL }, output);
    // The two followers subscribe to the release channel once their first try found it held.
    await waitFor(async () => {
      lines.length = 0;
      await cli('leader', 'shown', '--prefix', prefix, '--json');
      return (JSON.parse(lines[0]!) as { followers: number }).followers === 2;
    }, 5_000);
    expect(JSON.parse(lines[0]!)).toMatchObject({ role: 'shown', led: true, term: first.term });
    lines.length = 0;
    expect(await cli('leader', 'shown', '--prefix', prefix)).toBe(0);
    expect(lines.join('\n')).toMatch(/leader: +\S+ since .*\n.*\nterm: +\d+\nfollowers: 2/);
    lines.length = 0;
    expect(await cli('leader', 'nobody', '--prefix', prefix)).toBe(1);
    expect(lines.join('\n')).toContain('leader:    none');
  });
});
