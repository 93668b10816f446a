import type { WithLockOptions } from '../options/lock-call-options';
import type { OnBusyPolicy } from '../options/redis-lock-options';

/** Options shared by `withLock`, `@Locked` on providers and `@Locked` on routes. */
export interface RunLockedOptions extends WithLockOptions {
  onBusy?: OnBusyPolicy;
}
