import type { HeldLock, LockHandle } from '../engine/lock-handle';

/**
 * The lock as one subscription's work sees it (`currentLock()` inside an Observable): the same
 * lock, with a signal that also aborts when the subscription's hold ends (teardown), so work that
 * checks it stops before the key is released. The signal is only built when someone reads it.
 */
export class ScopedLock implements LockHandle {
  private scope?: AbortController;
  private combined?: AbortSignal;
  private endedWith?: unknown;

  constructor(private readonly lock: HeldLock) {}

  get key(): string {
    return this.lock.key;
  }
  get token(): string {
    return this.lock.token;
  }
  get fence(): number {
    return this.lock.fence;
  }
  get validUntil(): number {
    return this.lock.validUntil;
  }
  get isHeld(): boolean {
    return this.endedWith === undefined && this.lock.isHeld;
  }
  /** The engine that owns the lock, for re-entrancy checks. */
  get owner(): object {
    return this.lock.owner;
  }

  /** Aborts with the lock's `LockLostError` on loss, or with the end reason at teardown. */
  get signal(): AbortSignal {
    if (!this.combined) {
      this.scope = new AbortController();
      if (this.endedWith !== undefined) this.scope.abort(this.endedWith);
      this.combined = AbortSignal.any([this.lock.signal, this.scope.signal]);
    }
    return this.combined;
  }

  extend(ms?: number): Promise<void> {
    return this.lock.extend(ms);
  }

  release(): Promise<boolean> {
    return this.lock.release();
  }

  /** The hold ended (before the release): aborts the signal with `reason`. */
  end(reason: unknown): void {
    if (this.endedWith !== undefined) return;
    this.endedWith = reason;
    this.scope?.abort(reason);
  }
}
