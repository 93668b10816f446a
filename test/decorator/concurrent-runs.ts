import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
  RequestTimeoutException,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import {
  catchError,
  finalize,
  from,
  mergeMap,
  type Observable,
  throwError,
  timeout,
  TimeoutError,
} from 'rxjs';
import { LockService } from 'nestjs-redis-lock';
import { Gate, sleep } from '../support/time';

/**
 * Counts the runs of the work for each key: how many started, and the most that ran at once. Work
 * for one key must never overlap itself; `maxConcurrent(key) > 1` is the bug.
 */
export class ConcurrentRuns {
  private readonly active = new Map<string, number>();
  private readonly most = new Map<string, number>();
  private readonly starts = new Map<string, number>();
  private readonly gates = new Map<string, Gate>();

  enter(key: string): void {
    const now = (this.active.get(key) ?? 0) + 1;
    this.active.set(key, now);
    this.most.set(key, Math.max(now, this.most.get(key) ?? 0));
    this.starts.set(key, (this.starts.get(key) ?? 0) + 1);
  }

  leave(key: string): void {
    this.active.set(key, (this.active.get(key) ?? 1) - 1);
  }

  started(key: string): number {
    return this.starts.get(key) ?? 0;
  }

  maxConcurrent(key: string): number {
    return this.most.get(key) ?? 0;
  }

  /**
   * Starts a call for `key` while its first run is still going, and reports how it ended: its
   * answer, or 'ran' as soon as its run started beside the first (the overlap), or 'neither' after
   * `ms`. Polls, and stops polling either way.
   */
  async answeredOrRan<T>(
    key: string,
    start: () => Promise<T>,
    ms = 3_000,
  ): Promise<T | 'ran' | 'neither'> {
    const before = this.started(key);
    let answer: { value: T } | undefined;
    void start().then((value) => (answer = { value }));
    const deadline = performance.now() + ms;
    while (performance.now() < deadline) {
      if (answer) return answer.value;
      if (this.started(key) > before) return 'ran';
      await sleep(5);
    }
    return 'neither';
  }

  /** The work of one call: counted, and held until the test opens the key's gate. */
  async work(key: string): Promise<{ done: string }> {
    this.enter(key);
    try {
      await this.gate(key);
      return { done: key };
    } finally {
      this.leave(key);
    }
  }

  /** Resolves when the test opens the gate of `key`: the work holds until then. */
  gate(key: string): Promise<void> {
    let gate = this.gates.get(key);
    if (!gate) this.gates.set(key, (gate = new Gate()));
    return gate.opened;
  }

  open(key: string): void {
    this.gates.get(key)?.release();
  }

  openAll(): void {
    for (const gate of this.gates.values()) gate.release();
  }

  /** Opens every gate and forgets every count: a suite run again on another server starts at 0. */
  reset(): void {
    this.openAll();
    for (const counts of [this.active, this.most, this.starts, this.gates]) counts.clear();
  }
}

/** Route metadata: after how many ms `TimeoutInterceptor` gives up on the handler. */
export const TIMEOUT_MS = 'test:timeout-ms';

/**
 * The timeout interceptor the NestJS docs teach, registered as `APP_INTERCEPTOR` (so it runs
 * outside `@Locked`'s): it unsubscribes from the handler after `ms` and answers 408.
 */
@Injectable()
export class TimeoutInterceptor implements NestInterceptor {
  constructor(private readonly reflector: Reflector) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const ms = this.reflector.get<number | undefined>(TIMEOUT_MS, context.getHandler());
    if (!ms) return next.handle();
    return next.handle().pipe(
      timeout(ms),
      catchError((error: unknown) =>
        throwError(() => (error instanceof TimeoutError ? new RequestTimeoutException() : error)),
      ),
    );
  }
}

/**
 * The CONTROL: a lock that is released when the handler returns (acquire, `next.handle()`, release
 * on finalize), keyed `control:<userId>` (HTTP) or `control:<seatId>` (WebSocket). Tests run the
 * same handler under it to show the overlap that `@Locked` must prevent — so they can fail.
 */
@Injectable()
export class ReleaseOnReturnInterceptor implements NestInterceptor {
  constructor(private readonly locks: LockService) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const key =
      context.getType() === 'ws'
        ? `control:${context.switchToWs().getData<{ seatId: string }>().seatId}`
        : `control:${context.switchToHttp().getRequest<{ params: { userId: string } }>().params.userId}`;
    return from(this.locks.acquire(key)).pipe(
      mergeMap((lock) => next.handle().pipe(finalize(() => void lock.release()))),
    );
  }
}
