/** Base class of every error this library throws, so `catch (e) { if (e instanceof RedisLockError) … }` works. */
export class RedisLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    Error.captureStackTrace?.(this, new.target);
  }
}
