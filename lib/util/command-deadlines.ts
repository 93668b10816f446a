import { performance } from 'node:perf_hooks';
import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/errors';
import { LinkedSet, type Linked } from './linked-set';
import { neutralScope } from './neutral-scope';

/** Turns a command's rejection (its timeout's included) into the error its caller reports. */
export type CommandFailure = (error: unknown, operation: string, subject: string) => unknown;

/**
 * What a command was about, for a failure's message (`lock "order:7"`): a string, or a function
 * that builds it, called only when the command fails — most never do.
 */
export type CommandSubject = string | (() => string);

/**
 * A command bounded by an engine's `commandTimeout` and mapped as `CommandDeadlines.bound` maps
 * it: the shape every layer that sends a command through the engine is given.
 */
export type Bounded = <T, R = T>(
  command: Promise<T>,
  operation: string,
  subject: CommandSubject,
  onValue?: (value: T) => R | PromiseLike<R>,
  onError?: (error: unknown) => R | PromiseLike<R>,
) => Promise<R>;

/** One command in flight: when it times out, and how its caller's promise settles. */
class InFlight<T, R> implements Linked<InFlight<never, never>> {
  linkedPrev: InFlight<never, never> | undefined = undefined;
  linkedNext: InFlight<never, never> | undefined = undefined;
  linkedIn: object | undefined = undefined;

  constructor(
    readonly due: number,
    readonly ms: number,
    readonly operation: string,
    readonly subject: CommandSubject,
    readonly failure: CommandFailure,
    readonly resolve: (value: R | PromiseLike<R>) => void,
    readonly reject: (error: unknown) => void,
    readonly onValue: ((value: T) => R | PromiseLike<R>) | undefined,
    readonly onError: ((error: unknown) => R | PromiseLike<R>) | undefined,
  ) {}

  /** The answer: passed through `onValue` in this same step (one layer for both). */
  answered(value: T): void {
    const { onValue } = this;
    if (!onValue) return this.resolve(value as unknown as R);
    try {
      this.resolve(onValue(value));
    } catch (error) {
      this.reject(error);
    }
  }

  /** A failure, mapped to the caller's error, then given to `onError` if there is one. */
  fail(error: unknown): void {
    const subject = typeof this.subject === 'string' ? this.subject : this.subject();
    const mapped = this.failure(error, this.operation, subject);
    const { onError } = this;
    if (!onError) return this.reject(mapped);
    try {
      this.resolve(onError(mapped));
    } catch (thrown) {
      this.reject(thrown);
    }
  }

  expire(): void {
    this.fail(new RedisUnavailableError(messages.redisUnavailable(this.operation, this.ms)));
  }
}

/**
 * Bounds the commands in flight of one engine behind one timer. A timer per command — two per
 * acquire + release — was the largest single cost of the bound on the client: each is an object,
 * a timer-list insertion and a removal. Here a command joins a list (`LinkedSet`: no allocation,
 * and no garbage kept past a scavenge as a `Set` with this churn keeps it) and leaves it when answered;
 * the one timer, armed for the earliest deadline, is left running when the set empties and
 * re-armed only for the commands still in flight when it fires, so a busy loop arms about one
 * timer per `commandTimeout`. It is unref'd: a command in flight keeps the process alive through
 * its connection (the socket, or the client's reconnect timer), not through its bound. Deadlines
 * are on the real clock the timer runs on, never the one tests may replace (`useClockSource`).
 */
export class CommandDeadlines {
  /** The commands in flight: neither answered nor expired. */
  private readonly pending = new LinkedSet<InFlight<never, never>>();
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Number.POSITIVE_INFINITY;

  constructor(private readonly failure: CommandFailure) {}

  /**
   * `command`, failing with `RedisUnavailableError` if it is not answered within `ms`. Any
   * rejection, the timeout's included, reaches the caller as `failure` maps it. `operation` and
   * `subject` name the command and what it was about (`'acquire'`, `lock "order:7"`) for the
   * error's message. `onValue` and `onError`, when given, map the answer and the (mapped) failure
   * in the same step: a caller's continuation costs no promise of its own, on the paths every
   * lock call takes.
   */
  bound<T, R = T>(
    command: Promise<T>,
    ms: number,
    operation: string,
    subject: CommandSubject,
    onValue?: (value: T) => R | PromiseLike<R>,
    onError?: (error: unknown) => R | PromiseLike<R>,
  ): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const due = performance.now() + ms;
      const call = new InFlight<T, R>(
        due,
        ms,
        operation,
        subject,
        this.failure,
        resolve,
        reject,
        onValue,
        onError,
      );
      const tracked = call as unknown as InFlight<never, never>;
      this.pending.add(tracked);
      if (due < this.armedFor) this.arm(due);
      command.then(
        (value) => {
          // Answered after its deadline failed it: the caller heard already.
          if (this.pending.delete(tracked)) call.answered(value);
        },
        (error: unknown) => {
          if (this.pending.delete(tracked)) call.fail(error);
        },
      );
    });
  }

  private arm(due: number): void {
    clearTimeout(this.timer);
    this.armedFor = due;
    // Armed in the neutral scope: a timeout's continuation runs outside every request's context,
    // never inside that of the call that happened to arm the timer.
    this.timer = neutralScope.runInAsyncScope(
      setTimeout,
      undefined,
      this.expireNow,
      Math.max(0, due - performance.now()),
    );
    this.timer.unref();
  }

  private readonly expireNow = (): void => this.expire();

  /** Fails the commands past their deadline, and re-arms for the earliest of the others. */
  private expire(): void {
    this.timer = undefined;
    this.armedFor = Number.POSITIVE_INFINITY;
    // A timer may fire up to a ms before the deadline it was armed for, as the clocks round.
    const now = performance.now() + 1;
    let next = Number.POSITIVE_INFINITY;
    for (const call of this.pending.toArray()) {
      if (call.due <= now) {
        this.pending.delete(call);
        call.expire();
      } else if (call.due < next) next = call.due;
    }
    if (next !== Number.POSITIVE_INFINITY) this.arm(next);
  }
}
