// The public API of `nestjs-redis-lock/testing`, named one by one. The main entry never imports
// this folder, so a production bundle never carries the in-memory backend.
export { RedisLockTestingModule, type RedisLockTestingOptions } from './redis-lock-testing.module';
export { heldLockKeys } from './held-lock-keys';
