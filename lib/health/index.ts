// The `nestjs-redis-lock/health` entry point: the only part of the library that loads
// @nestjs/terminus, kept out of the main entry so apps without terminus never require it.
export { LockHealthIndicator } from './lock-health.indicator';
export type { LockHealthOptions } from './lock-health-options';
export type { LockHealthDetails } from './lock-health-verdict';
