import type { Logger } from '@nestjs/common';
import { messages } from '../errors/messages';
import type { ConnectionWatch } from '../redis/connection-watch';
import { withTimeout } from '../util/with-timeout';

/**
 * Clean-up commands not yet answered — the release of a grant that came too late, a fair-mode
 * queue leave — run in the background, each bounded. close() waits for them before it closes the
 * connection, so a shutdown never strands a grant for its whole ttl.
 */
export class BackgroundCleanups {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly connections: ConnectionWatch,
    /** Each clean-up is bounded by twice this: room for the command it waits behind. */
    private readonly commandTimeout: number,
    private readonly logger: Logger,
  ) {}

  /** Runs `command` in the background; a failure is logged (as `what` failed) when `what` is given. */
  run(command: Promise<unknown>, what?: string): void {
    // Guarded: a command queued on a connection that never came up must not hold close() up;
    // if it runs later after all, the lock's TTL bounds what it leaves.
    const guarded = this.connections.guard(command);
    const done: Promise<void> = withTimeout(guarded, 2 * this.commandTimeout, 'clean-up')
      .then(
        () => undefined,
        (error: unknown) => {
          if (what) this.logger.warn(messages.cleanUpFailed(what, String(error)));
        },
      )
      .then(() => void this.pending.delete(done));
    this.pending.add(done);
  }

  /** Settles once every clean-up started so far has. */
  settled(): Promise<unknown> {
    return Promise.allSettled([...this.pending]);
  }
}
