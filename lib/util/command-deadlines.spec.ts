import { AsyncLocalStorage } from 'node:async_hooks';
import { RedisUnavailableError } from '../errors/errors';
import { CommandDeadlines } from './command-deadlines';

/** A command that never answers, or answers when told. */
function pendingCommand<T>(): { promise: Promise<T>; answer: (value: T) => void } {
  let answer!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (answer = resolve));
  return { promise, answer };
}

const passThrough = (error: unknown): unknown => error;

describe('CommandDeadlines', () => {
  it('fails a command that is not answered in time, and passes an answer through', async () => {
    const deadlines = new CommandDeadlines(passThrough);
    const hung = deadlines.bound(pendingCommand<number>().promise, 20, 'acquire', 'lock "a"');
    const answered = pendingCommand<number>();
    const quick = deadlines.bound(answered.promise, 1_000, 'release', 'lock "b"');
    answered.answer(7);

    await expect(quick).resolves.toBe(7);
    await expect(hung).rejects.toBeInstanceOf(RedisUnavailableError);
    await expect(hung).rejects.toThrow(/within 20 ms/);
  });

  it("never runs a timed-out command's continuation in another caller's async context", async () => {
    const deadlines = new CommandDeadlines(passThrough);
    const requests = new AsyncLocalStorage<string>();
    const seen: (string | undefined)[] = [];
    // Two callers, each in its own request's context; neither command is ever answered.
    const call = (request: string, ms: number) =>
      requests.run(request, () =>
        deadlines.bound(pendingCommand().promise, ms, 'acquire', 's', undefined, () => {
          seen.push(requests.getStore());
        }),
      );
    await Promise.all([call('A', 10), call('B', 20)]);
    expect(seen).toHaveLength(2);
    expect(seen[1]).not.toBe('A'); // the timer armed by A's call must not carry A into B's
    expect(seen.every((store) => store === undefined)).toBe(true);
  });

  it('re-arms for a shorter deadline added later, and for those still in flight', async () => {
    const deadlines = new CommandDeadlines(passThrough);
    const order: string[] = [];
    const track = (name: string, promise: Promise<unknown>): Promise<void> =>
      promise.then(
        () => void order.push(`${name} answered`),
        () => void order.push(`${name} timed out`),
      );
    const long = track('long', deadlines.bound(pendingCommand().promise, 120, 'a', 's'));
    const short = track('short', deadlines.bound(pendingCommand().promise, 10, 'b', 's'));
    const late = pendingCommand<number>();
    const answered = track('answered', deadlines.bound(late.promise, 60, 'c', 's'));
    setTimeout(() => late.answer(1), 30);

    await Promise.all([long, short, answered]);
    expect(order).toEqual(['short timed out', 'answered answered', 'long timed out']);
  });

  it("maps every rejection, the command's own included, through the failure", async () => {
    const deadlines = new CommandDeadlines(
      (error, operation, subject) => new Error(`${operation} ${subject}: ${String(error)}`),
    );
    const refused = deadlines.bound(Promise.reject(new Error('NOPERM')), 1_000, 'acquire', 'x');
    await expect(refused).rejects.toThrow('acquire x: Error: NOPERM');
  });

  it('maps the answer and the failure in the step they come in, and builds a subject only to fail', async () => {
    const deadlines = new CommandDeadlines(
      (error, operation, subject) => new Error(`${operation} ${subject}: ${String(error)}`),
    );
    let built = 0;
    const subject = (): string => `lock "${++built}"`;
    const mapped = deadlines.bound(Promise.resolve(2), 1_000, 'acquire', subject, (n) => n * 10);
    await expect(mapped).resolves.toBe(20);
    expect(built).toBe(0); // answered: no message was ever needed

    const recovered = deadlines.bound(
      Promise.reject(new Error('NOPERM')),
      1_000,
      'release',
      subject,
      undefined,
      (error) => `recovered from ${(error as Error).message}`,
    );
    await expect(recovered).resolves.toBe('recovered from release lock "1": Error: NOPERM');
    // A continuation that throws rejects the caller's promise with what it threw.
    const thrown = deadlines.bound(Promise.resolve(1), 1_000, 'a', 's', () => {
      throw new Error('busy');
    });
    await expect(thrown).rejects.toThrow('busy');
  });

  it('never runs the continuation of a command answered after its deadline failed it', async () => {
    const deadlines = new CommandDeadlines(passThrough);
    const late = pendingCommand<number>();
    const seen: number[] = [];
    const bounded = deadlines.bound(late.promise, 10, 'a', 's', (n) => void seen.push(n));
    await expect(bounded).rejects.toBeInstanceOf(RedisUnavailableError);
    late.answer(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual([]);
  });
});
