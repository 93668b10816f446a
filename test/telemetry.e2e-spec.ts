/**
 * OpenTelemetry metrics and spans, on the real Redis, read back through the SDK's in-memory
 * exporters: a scripted scenario of one lock acquired, one call busy and one lock lost gives
 * exactly these metric names, units, values and attributes; spans nest under the caller's; lock
 * keys reach spans only as the `telemetry.keys` option says, and never metrics.
 */
import { createHash } from 'node:crypto';
import { context, createNoopMeter, metrics, trace, ProxyTracerProvider } from '@opentelemetry/api';
import { LockNotAcquiredError, type LockService } from 'nestjs-redis-lock';
import { DataPointType } from '@opentelemetry/sdk-metrics';
import { installOtelSdk, pointsOf } from './support/otel-sdk';
import { onSharedRedis } from './support/lock-services';
import { now, sleep } from './support/time';

const { redis, services, keyOf } = onSharedRedis('telemetry');
const mode = { 'lock.mode': 'default' };
/**
 * The busy call's wait budget: the test reads the gauges while it waits, so a stalled loop must
 * not outlast it first (300 ms did, on a loaded machine, after a 100 ms sleep).
 */
const BUSY_WAIT = 2_000;

/** Every attribute value of every span and data point, as text. */
function allAttributeValues(sdk: ReturnType<typeof installOtelSdk>, metricList: unknown[]) {
  const values = sdk.spans().flatMap((span) => Object.values(span.attributes).map(String));
  return [...values, JSON.stringify(metricList)];
}

/** Resolves the reason of the next `'lost'` event of `locks`. */
function nextLoss(locks: LockService): Promise<string> {
  return new Promise((resolve) => {
    const listener = (error: { reason: string }): void => {
      locks.off('lost', listener);
      resolve(error.reason);
    };
    locks.on('lost', listener);
  });
}

describe('telemetry with an OpenTelemetry SDK registered', () => {
  let sdk: ReturnType<typeof installOtelSdk>;
  beforeEach(() => (sdk = installOtelSdk()));
  afterEach(() => sdk.uninstall());

  it('records 1 acquired, 1 busy and 1 lost: exact names, units, values and attributes', async () => {
    // Renewed every 500 ms: the holder outlives the busy call's wait on a loaded machine too.
    const locks = services.create({ ttl: 1_500 });
    const lost = nextLoss(locks);
    const started = now();
    const lock = await locks.acquire('order:7');
    const acquireTook = (now() - started) / 1000;
    const busyStarted = now();
    let busyTook = Infinity;
    const busy = locks.acquire('order:7', { wait: BUSY_WAIT }).catch((error: unknown) => {
      busyTook = (now() - busyStarted) / 1000;
      return error;
    });
    // Read while the busy call waits: as soon as it counts as waiting, long before its budget ends.
    let during = await sdk.metrics();
    while (
      pointsOf(during.get('lock.waiting'))[0]?.value !== 1 &&
      now() - busyStarted < BUSY_WAIT
    ) {
      await sleep(10);
      during = await sdk.metrics();
    }
    expect(pointsOf(during.get('lock.held'))).toEqual([{ attributes: mode, value: 1 }]);
    expect(pointsOf(during.get('lock.waiting'))).toEqual([{ attributes: mode, value: 1 }]);

    expect(await busy).toBeInstanceOf(LockNotAcquiredError);
    // Someone else deletes the key: the next renewal (every ttl / 3) finds it gone.
    await redis.del(keyOf('order:7'));
    expect(await lost).toBe('not-owner');
    const heldAtMost = (now() - started) / 1000;
    expect(await lock.release()).toBe(false);

    const after = await sdk.metrics();
    /** The instrument type (as the data says it) and unit of `name`. */
    const kindOf = (name: string) => {
      const metric = after.get(name);
      if (!metric) return undefined;
      const { unit } = metric.descriptor;
      if (metric.dataPointType === DataPointType.HISTOGRAM) return { type: 'histogram', unit };
      if (metric.dataPointType !== DataPointType.SUM) return { type: 'other', unit };
      return { type: metric.isMonotonic ? 'counter' : 'up-down counter', unit };
    };
    expect(kindOf('lock.acquire.duration')).toEqual({ type: 'histogram', unit: 's' });
    expect(kindOf('lock.hold.duration')).toEqual({ type: 'histogram', unit: 's' });
    expect(kindOf('lock.acquired')).toEqual({ type: 'counter', unit: '{lock}' });
    expect(kindOf('lock.busy')).toEqual({ type: 'counter', unit: '{call}' });
    expect(kindOf('lock.lost')).toEqual({ type: 'counter', unit: '{lock}' });
    expect(kindOf('lock.held')).toEqual({ type: 'up-down counter', unit: '{lock}' });
    expect(kindOf('lock.waiting')).toEqual({ type: 'up-down counter', unit: '{call}' });

    expect(pointsOf(after.get('lock.acquired'))).toEqual([{ attributes: mode, value: 1 }]);
    expect(pointsOf(after.get('lock.busy'))).toEqual([{ attributes: mode, value: 1 }]);
    expect(pointsOf(after.get('lock.lost'))).toEqual([
      { attributes: { ...mode, 'lock.lost.reason': 'not-owner' }, value: 1 },
    ]);
    expect(pointsOf(after.get('lock.held'))).toEqual([{ attributes: mode, value: 0 }]);
    expect(pointsOf(after.get('lock.waiting'))).toEqual([{ attributes: mode, value: 0 }]);
    expect(pointsOf(after.get('lock.renewal.failures'))).toEqual([]);

    const seconds = (name: string, outcome: string) => {
      const point = after
        .get(name)
        ?.dataPoints.find((p) => p.attributes['lock.outcome'] === outcome);
      return point?.value as { count: number; sum: number } | undefined;
    };
    expect(after.get('lock.acquire.duration')?.dataPoints).toHaveLength(2);
    expect(seconds('lock.acquire.duration', 'acquired')).toMatchObject({ count: 1 });
    // Seconds, not ms: within what the caller measured around each call.
    expect(seconds('lock.acquire.duration', 'acquired')!.sum).toBeGreaterThan(0);
    expect(seconds('lock.acquire.duration', 'acquired')!.sum).toBeLessThanOrEqual(acquireTook);
    expect(seconds('lock.acquire.duration', 'busy')).toMatchObject({ count: 1 });
    expect(seconds('lock.acquire.duration', 'busy')!.sum).toBeGreaterThanOrEqual(
      BUSY_WAIT / 1000 - 0.01,
    );
    expect(seconds('lock.acquire.duration', 'busy')!.sum).toBeLessThanOrEqual(busyTook);
    expect(after.get('lock.hold.duration')?.dataPoints).toHaveLength(1);
    expect(seconds('lock.hold.duration', 'lost')).toMatchObject({ count: 1 });
    expect(seconds('lock.hold.duration', 'lost')!.sum).toBeGreaterThanOrEqual(0.3);
    expect(seconds('lock.hold.duration', 'lost')!.sum).toBeLessThanOrEqual(heldAtMost);

    const acquires = sdk.spans().filter((span) => span.name === 'lock.acquire');
    expect(acquires.map((span) => span.attributes)).toEqual([
      { ...mode, 'lock.outcome': 'acquired', 'lock.fence': lock.fence },
      { ...mode, 'lock.outcome': 'busy', 'lock.retry_after_ms': expect.any(Number) },
    ]);
    // Keys hold user data: by default none reaches a span or a metric.
    const metricList = [...after.values()];
    expect(allAttributeValues(sdk, metricList).join('\n')).not.toContain('order:7');
  });

  it('nests the acquire and the locked section under the caller, and the work under the section', async () => {
    const locks = services.create();
    const tracer = trace.getTracer('test');
    let fence = 0;
    await tracer.startActiveSpan('request', async (request) => {
      await locks.withLock('report:1', async (lock) => {
        fence = lock.fence;
        await sleep(5);
        tracer.startSpan('work').end();
      });
      request.end();
    });
    const spans = new Map(sdk.spans().map((span) => [span.name, span]));
    const idOf = (name: string) => spans.get(name)?.spanContext().spanId;
    const parentOf = (name: string) => spans.get(name)?.parentSpanContext?.spanId;
    expect(idOf('request')).toBeDefined();
    expect(parentOf('lock.acquire')).toBe(idOf('request'));
    expect(parentOf('lock.hold')).toBe(idOf('request'));
    expect(parentOf('work')).toBe(idOf('lock.hold'));
    expect(spans.get('lock.hold')?.attributes).toEqual({
      ...mode,
      'lock.fence': fence,
      'lock.reentrant': false,
      'lock.outcome': 'released',
    });
    const released = (await sdk.metrics()).get('lock.hold.duration')?.dataPoints;
    expect(released?.map((point) => point.attributes)).toEqual([
      { ...mode, 'lock.outcome': 'released' },
    ]);
  });

  it('marks a section whose work threw, and an acquire that failed, as errors (class name only)', async () => {
    const locks = services.create();
    await expect(
      locks.withLock('fails:1', () => Promise.reject(new TypeError('secret detail'))),
    ).rejects.toThrow(TypeError);
    const abort = new AbortController();
    const holder = await locks.acquire('fails:2');
    const cancelled = locks.acquire('fails:2', { wait: 5_000, signal: abort.signal });
    setTimeout(() => abort.abort(), 50);
    await expect(cancelled).rejects.toThrow();
    await holder.release();

    const hold = sdk.spans().find((span) => span.name === 'lock.hold');
    expect(hold?.status).toEqual({ code: 2, message: 'TypeError' });
    expect(hold?.attributes['error.type']).toBe('TypeError');
    const failed = sdk
      .spans()
      .find((span) => span.name === 'lock.acquire' && span.attributes['lock.outcome'] === 'error');
    expect(failed?.attributes['error.type']).toBe('AbortError');
    const points = (await sdk.metrics()).get('lock.acquire.duration')?.dataPoints ?? [];
    expect(points.map((point) => point.attributes)).toContainEqual({
      ...mode,
      'lock.outcome': 'error',
      'error.type': 'AbortError',
    });
    expect(JSON.stringify(sdk.spans().map((span) => span.events))).not.toContain('secret');
  });

  it("puts the key's SHA-256 prefix on spans with keys: 'hashed', the key with 'plain', never on metrics", async () => {
    const hashed = services.create({ telemetry: { keys: 'hashed' } });
    const plain = services.create({ telemetry: { keys: 'plain' } });
    await hashed.withLock('user:alice@example.com', () => undefined);
    await plain.withLock('user:bob@example.com', () => undefined);
    const digest = createHash('sha256').update('user:alice@example.com').digest('hex');

    const byKey = sdk.spans().map((span) => [span.name, span.attributes] as const);
    expect(byKey).toEqual([
      ['lock.acquire', expect.objectContaining({ 'lock.key.hash': digest.slice(0, 16) })],
      ['lock.hold', expect.objectContaining({ 'lock.key.hash': digest.slice(0, 16) })],
      ['lock.acquire', expect.objectContaining({ 'lock.key': 'user:bob@example.com' })],
      ['lock.hold', expect.objectContaining({ 'lock.key': 'user:bob@example.com' })],
    ]);
    expect(JSON.stringify(sdk.spans().map((span) => span.attributes))).not.toContain('alice');
    const metricList = [...(await sdk.metrics()).values()];
    expect(JSON.stringify(metricList)).not.toMatch(/alice|bob|key/);
  });

  it('starts recording for a service created before the SDK was registered', async () => {
    await sdk.uninstall();
    const locks = services.create();
    await (await locks.acquire('late:1')).release();
    sdk = installOtelSdk();
    await (await locks.acquire('late:1')).release();
    expect(pointsOf((await sdk.metrics()).get('lock.acquired'))).toEqual([
      { attributes: mode, value: 1 },
    ]);
    expect(sdk.spans().map((span) => span.name)).toEqual(['lock.acquire']);
  });
});

describe('telemetry without an SDK', () => {
  it('creates no instrument and starts no span, not even a no-op one', async () => {
    const noopMeter = createNoopMeter();
    const histograms = jest.spyOn(noopMeter, 'createHistogram');
    const counters = jest.spyOn(noopMeter, 'createCounter');
    const noopTracers = new ProxyTracerProvider().getDelegate();
    const tracers = jest.spyOn(noopTracers, 'getTracer');
    const active = jest.spyOn(context, 'active');
    try {
      const locks = services.create();
      await locks.withLock('quiet:1', () => undefined);
      const lock = await locks.tryAcquire('quiet:1');
      expect(lock).not.toBeNull();
      await lock?.release();
      expect(metrics.getMeterProvider().getMeter('x')).toBe(noopMeter);
      expect(histograms).not.toHaveBeenCalled();
      expect(counters).not.toHaveBeenCalled();
      expect(tracers).not.toHaveBeenCalled();
      expect(active).not.toHaveBeenCalled();
    } finally {
      jest.restoreAllMocks();
    }
  });
});

describe('telemetry that throws', () => {
  // An SDK whose span processor throws out of `end()`: no lock may be left behind for it.
  const throwingSpans = (): void => {
    const span: Record<string, unknown> = new Proxy(
      {},
      {
        get: (_target, name) =>
          name === 'end'
            ? () => {
                throw new Error('span exporter failed');
              }
            : () => span,
      },
    );
    trace.setGlobalTracerProvider({
      getTracer: () => ({ startSpan: () => span }) as unknown as ReturnType<typeof trace.getTracer>,
    });
  };
  afterEach(() => trace.disable());

  it.each([
    ['default', false],
    ['fair', true],
  ])(
    'ends a %s-mode call once when its grant cannot be reported: close() drains',
    async (_mode, fair) => {
      throwingSpans();
      const locks = services.create({ fair });
      await expect(locks.acquire('throwing-span:1')).rejects.toThrow('span exporter failed');
      trace.disable();
      // Counted once in, once out: close() waits for nothing, and the lock is not left held.
      const closed = await Promise.race([
        locks.close().then(() => 'closed'),
        sleep(2_000).then(() => 'still waiting'),
      ]);
      expect(closed).toBe('closed');
      expect(await redis.exists(keyOf('throwing-span:1'))).toBe(0);
    },
  );
});
