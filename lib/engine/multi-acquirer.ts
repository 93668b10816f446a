import { oneSlot } from '../backends/acquire-all';
import type { LockBackend } from '../backends/lock-backend';
import { monotonicNow } from '../util/clock';
import { settled } from '../util/settled';
import type { AcquireContext } from './acquire-context';
import type { AcquireOutcome, AcquireRequest } from './acquire-request';
import { acquireAllAtOnce, type AllAtOnceCommands, type KeyEntry } from './all-at-once';
import type { HeldLock } from './held-lock';
import type { MultiAcquireOutcome, MultiAcquireRequest } from './multi-acquire-request';
import { MultiLock } from './multi-lock';

/**
 * Multi-key locks: all keys or none, and never a deadlock. Every call sorts its keys by Redis name
 * — one global order. Where one script can reach every key (one Redis, or a Cluster whose keys
 * share a slot) each try takes all of them atomically (`acquireAllAtOnce`). Elsewhere (a Cluster
 * with keys on several slots, Redlock, fair mode's queues, `replicaAck`) the keys are taken one
 * by one in that order, each waiting like a single-key call, and what was taken is released when
 * a later key cannot be had: since everyone climbs the same order, no two callers can each hold
 * a key the other waits for.
 */
export class MultiAcquirer {
  /** The commands of an all-at-once try, where the backend has them. */
  private readonly allAtOnce?: AllAtOnceCommands;

  constructor(
    private readonly context: AcquireContext,
    private readonly backend: LockBackend,
    /** A single-key acquire call of the engine (waiting, fair mode, events included). */
    private readonly acquireOne: (request: AcquireRequest) => Promise<AcquireOutcome>,
    /** Fair mode: each key queues in its own line, so keys are taken in order. */
    private readonly fair: boolean,
  ) {
    const { acquireAll } = backend;
    if (acquireAll) {
      this.allAtOnce = {
        acquireAll: acquireAll.bind(backend),
        release: backend.release.bind(backend),
      };
    }
  }

  /** Whether `keys` are taken in one atomic step (rather than one by one in order). */
  atOnce(keys: readonly string[]): boolean {
    const { acquireAll } = this.backend.capabilities;
    if (this.fair || !this.backend.acquireAll || acquireAll === 'never') return false;
    return acquireAll === 'any-keys' || oneSlot(keys.map((key) => this.context.keysOf(key)));
  }

  acquire(request: MultiAcquireRequest): Promise<MultiAcquireOutcome> {
    // No async layer: an all-at-once call answers in its first try's step.
    return settled(() => {
      request.signal?.throwIfAborted();
      const started = monotonicNow();
      const entries: KeyEntry[] = request.keys
        .map((key) => ({ key, redisKeys: this.context.keysOf(key) }))
        .sort((a, b) => (a.redisKeys.lock < b.redisKeys.lock ? -1 : 1));
      if (this.allAtOnce && this.atOnce(request.keys)) {
        return acquireAllAtOnce(this.context, this.allAtOnce, request, entries, started);
      }
      return this.inOrder(request, entries, started);
    });
  }

  /** One key after another in lock order, within the call's one budget; all or none. */
  private async inOrder(
    request: MultiAcquireRequest,
    entries: readonly KeyEntry[],
    started: number,
  ): Promise<MultiAcquireOutcome> {
    const taken: HeldLock[] = [];
    const rollBack = () => Promise.allSettled(taken.map((lock) => lock.release()));
    try {
      for (const { key } of entries) {
        const wait = Math.max(0, started + request.wait - monotonicNow());
        const outcome = await this.acquireOne({ ...request, key, wait });
        if (!('lock' in outcome)) {
          await rollBack();
          const waited = monotonicNow() - started;
          const keys = entries.map((entry) => entry.key);
          return { retryAfterMs: outcome.retryAfterMs, waited, busyKey: key, keys };
        }
        taken.push(outcome.lock);
      }
    } catch (error) {
      await rollBack();
      throw error;
    }
    const lost = taken.find((lock) => !lock.isHeld);
    if (lost) {
      // A key taken early ran out while a later one was awaited: the set was never whole.
      await rollBack();
      throw lost.lost;
    }
    return { lock: new MultiLock(taken as [HeldLock, ...HeldLock[]]) };
  }
}
