import type {
  Attributes,
  Counter,
  Histogram,
  MeterProvider,
  UpDownCounter,
} from '@opentelemetry/api';
import type { LockMode } from './lock-mode';
import { registeredGlobal, type OtelApiModule } from './otel-api';

/** The instrumentation scope: the meter's and the tracer's name. */
export const SCOPE_NAME = 'nestjs-redis-lock';

/** Bucket bounds (s) for waits: from a round trip to a long queue. */
const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Bucket bounds (s) for holds: from a quick critical section to a long job. */
const HOLD_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];

/** The instruments, created from one meter provider. */
interface Instruments {
  readonly provider: MeterProvider;
  readonly acquireDuration: Histogram;
  readonly holdDuration: Histogram;
  readonly acquired: Counter;
  readonly busy: Counter;
  readonly lost: Counter;
  readonly renewalFailures: Counter;
  readonly held: UpDownCounter;
  readonly waiting: UpDownCounter;
  readonly leader: UpDownCounter;
}

/**
 * The lock metrics of one LockService. Each recording first looks up the global meter provider
 * (one property read): with none registered it stops there, building no attributes; when it
 * changed (an SDK registered after the service was created), the instruments are created anew
 * from it. Attribute sets are built once per outcome, not per call.
 */
export class LockMetrics {
  private instruments?: Instruments;
  /** The provider last found to give no-op meters (none registered). */
  private noop?: MeterProvider;
  private readonly mode: Attributes;
  private readonly outcomes: Record<'acquired' | 'busy' | 'released' | 'lost', Attributes>;
  private readonly reasons = new Map<string, Attributes>();
  private readonly roles = new Map<string, Attributes>();

  constructor(
    private readonly api: OtelApiModule,
    private readonly version: string,
    mode: LockMode,
  ) {
    this.mode = { 'lock.mode': mode };
    const outcome = (name: string): Attributes => ({ 'lock.mode': mode, 'lock.outcome': name });
    this.outcomes = {
      acquired: outcome('acquired'),
      busy: outcome('busy'),
      released: outcome('released'),
      lost: outcome('lost'),
    };
  }

  acquired(waitedMs: number): void {
    const on = this.current();
    if (!on) return;
    on.acquireDuration.record(waitedMs / 1000, this.outcomes.acquired);
    on.acquired.add(1, this.mode);
  }

  busy(waitedMs: number): void {
    const on = this.current();
    if (!on) return;
    on.acquireDuration.record(waitedMs / 1000, this.outcomes.busy);
    on.busy.add(1, this.mode);
  }

  /** An acquire call that failed (Redis out of reach, cancelled, shut down). */
  acquireFailed(waitedMs: number, error: unknown): void {
    const on = this.current();
    if (!on) return;
    on.acquireDuration.record(waitedMs / 1000, {
      ...this.mode,
      'lock.outcome': 'error',
      'error.type': errorType(error),
    });
  }

  /** A lock stopped being held: released while ours, or lost. */
  holdEnded(heldMs: number, outcome: 'released' | 'lost'): void {
    this.current()?.holdDuration.record(heldMs / 1000, this.outcomes[outcome]);
  }

  lost(reason: string): void {
    const on = this.current();
    if (!on) return;
    let attributes = this.reasons.get(reason);
    if (!attributes) {
      attributes = { ...this.mode, 'lock.lost.reason': reason };
      this.reasons.set(reason, attributes);
    }
    on.lost.add(1, attributes);
  }

  renewalFailed(locks: number): void {
    this.current()?.renewalFailures.add(locks, this.mode);
  }

  held(delta: 1 | -1): void {
    this.current()?.held.add(delta, this.mode);
  }

  waiting(delta: 1 | -1): void {
    this.current()?.waiting.add(delta, this.mode);
  }

  /**
   * The "is leader" gauge of `role`: 1 while this process leads it, 0 otherwise. Roles name jobs,
   * not request data, so they are attributes as they are (never hashed).
   */
  leader(role: string, delta: 1 | -1): void {
    const on = this.current();
    if (!on) return;
    let attributes = this.roles.get(role);
    if (!attributes) {
      attributes = { ...this.mode, 'lock.leader.role': role };
      this.roles.set(role, attributes);
    }
    on.leader.add(delta, attributes);
  }

  /** The instruments of the registered meter provider, or undefined when none is registered. */
  /**
   * Whether anything records now (an SDK's meter provider is registered): a caller that would read
   * the clock only for a recording asks first.
   */
  get recording(): boolean {
    return this.current() !== undefined;
  }

  private current(): Instruments | undefined {
    if (!registeredGlobal('metrics')) return undefined;
    const provider = this.api.metrics.getMeterProvider();
    const { instruments } = this;
    if (instruments?.provider === provider) return instruments;
    if (provider === this.noop) return undefined;
    const meter = provider.getMeter(SCOPE_NAME, this.version);
    if (meter === this.api.createNoopMeter()) {
      this.noop = provider;
      this.instruments = undefined;
      return undefined;
    }
    this.instruments = createInstruments(provider, meter);
    return this.instruments;
  }
}

function createInstruments(
  provider: MeterProvider,
  meter: ReturnType<MeterProvider['getMeter']>,
): Instruments {
  return {
    provider,
    acquireDuration: meter.createHistogram('lock.acquire.duration', {
      unit: 's',
      description: 'Duration of lock acquire calls, waiting included, by outcome.',
      advice: { explicitBucketBoundaries: WAIT_BUCKETS },
    }),
    holdDuration: meter.createHistogram('lock.hold.duration', {
      unit: 's',
      description: 'How long locks were held, from grant to release or loss.',
      advice: { explicitBucketBoundaries: HOLD_BUCKETS },
    }),
    acquired: meter.createCounter('lock.acquired', {
      unit: '{lock}',
      description: 'Locks acquired.',
    }),
    busy: meter.createCounter('lock.busy', {
      unit: '{call}',
      description: 'Acquire calls that found the lock busy until their wait budget ran out.',
    }),
    lost: meter.createCounter('lock.lost', {
      unit: '{lock}',
      description: 'Held locks lost, by reason.',
    }),
    renewalFailures: meter.createCounter('lock.renewal.failures', {
      unit: '{lock}',
      description: 'Lock renewals that failed (Redis out of reach, a timeout); retried.',
    }),
    held: meter.createUpDownCounter('lock.held', {
      unit: '{lock}',
      description: 'Locks held by this process.',
    }),
    waiting: meter.createUpDownCounter('lock.waiting', {
      unit: '{call}',
      description: 'Acquire calls waiting for a busy lock.',
    }),
    leader: meter.createUpDownCounter('lock.leader', {
      unit: '{role}',
      description: 'Whether this process leads the role (1) or not (0), by role.',
    }),
  };
}

/**
 * The `error.type` attribute: the error's class name, as OpenTelemetry's conventions name it.
 * Read from `name`, not by `instanceof Error`: an abort's DOMException may come from another realm.
 */
export function errorType(error: unknown): string {
  const name = (error as { name?: unknown } | null | undefined)?.name;
  return typeof name === 'string' && name.length > 0 ? name : '_OTHER';
}
