import { performance } from 'node:perf_hooks';
import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/errors';

/** Turns a command's rejection (its timeout's included) into the error its caller reports. */
export type CommandFailure = (error: unknown, operation: string, subject: string) => unknown;

/** One command in flight: when it times out, and how its caller's promise settles. */
class InFlight<T> {
  constructor(
    readonly due: number,
    readonly ms: number,
    readonly operation: string,
    readonly subject: string,
    readonly failure: CommandFailure,
    readonly resolve: (value: T) => void,
    readonly reject: (error: unknown) => void,
  ) {}

  fail(error: unknown): void {
    this.reject(this.failure(error, this.operation, this.subject));
  }

  expire(): void {
    this.fail(new RedisUnavailableError(messages.redisUnavailable(this.operation, this.ms)));
  }
}

/**
 * Bounds the commands in flight of one engine behind one timer. A timer per command — two per
 * acquire + release — was the largest single cost of the bound on the client: each is an object,
 * a timer-list insertion and a removal. Here a command joins a set and leaves it when answered;
 * the one timer, armed for the earliest deadline, is left running when the set empties and
 * re-armed only for the commands still in flight when it fires, so a busy loop arms about one
 * timer per `commandTimeout`. It is unref'd: a command in flight keeps the process alive through
 * its connection (the socket, or the client's reconnect timer), not through its bound. Deadlines
 * are on the real clock the timer runs on, never the one tests may replace (`useClockSource`).
 */
export class CommandDeadlines {
  private readonly pending = new Set<InFlight<never>>();
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Number.POSITIVE_INFINITY;

  constructor(private readonly failure: CommandFailure) {}

  /**
   * `command`, failing with `RedisUnavailableError` if it is not answered within `ms`. Any
   * rejection, the timeout's included, reaches the caller as `failure` maps it, in the same step.
   * `operation` and `subject` name the command and what it was about (`'acquire'`,
   * `lock "order:7"`) for the error's message.
   */
  bound<T>(command: Promise<T>, ms: number, operation: string, subject: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const due = performance.now() + ms;
      const call = new InFlight(due, ms, operation, subject, this.failure, resolve, reject);
      this.pending.add(call);
      if (due < this.armedFor) this.arm(due);
      command.then(
        (value) => {
          this.pending.delete(call);
          resolve(value);
        },
        (error: unknown) => {
          this.pending.delete(call);
          call.fail(error);
        },
      );
    });
  }

  private arm(due: number): void {
    clearTimeout(this.timer);
    this.armedFor = due;
    this.timer = setTimeout(() => this.expire(), Math.max(0, due - performance.now()));
    this.timer.unref();
  }

  /** Fails the commands past their deadline, and re-arms for the earliest of the others. */
  private expire(): void {
    this.timer = undefined;
    this.armedFor = Number.POSITIVE_INFINITY;
    // A timer may fire up to a ms before the deadline it was armed for, as the clocks round.
    const now = performance.now() + 1;
    let next = Number.POSITIVE_INFINITY;
    for (const call of this.pending) {
      if (call.due <= now) {
        this.pending.delete(call);
        call.expire();
      } else if (call.due < next) next = call.due;
    }
    if (next !== Number.POSITIVE_INFINITY) this.arm(next);
  }
}
