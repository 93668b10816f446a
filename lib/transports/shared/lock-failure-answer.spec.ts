import { HttpException, type ArgumentsHost } from '@nestjs/common';
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  RedisCommandError,
  RedisUnavailableError,
} from '../../errors/errors';
import { failureStatus, handlerName, httpAnswer, publicMessage } from './lock-failure-answer';

const busy = new LockNotAcquiredError('order:alice@example.com', 0, 29_000);
const refused = new RedisCommandError('Redis refused acquire: WRONGPASS invalid', 'WRONGPASS');

describe('failureStatus', () => {
  it.each([
    ['busy', busy, 409],
    ['a bad key', new LockKeyError('Lock key template "a:<x>": …'), 400],
    ['Redis out of reach', new RedisUnavailableError('Redis did not answer'), 503],
    ['Redis refusing the command', refused, 503],
    ['a lock lost after the work ran', new LockLostError('job:1', 'not-owner'), 500],
  ])('%s', (_what, error, status) => {
    expect(failureStatus(error, 409)).toBe(status);
  });

  it('uses busyStatus for a busy lock', () => {
    expect(failureStatus(busy, 423)).toBe(423);
  });
});

describe('publicMessage', () => {
  it('names no key, no reply, and gives no advice', () => {
    for (const error of [busy, refused, new LockLostError('job:1', 'deadline')]) {
      expect(publicMessage(error)).not.toMatch(/alice|job:|WRONGPASS|wait|Redis|lock/i);
    }
  });
});

/** A filter's host as Nest builds it: no handler, only the arguments. */
function filterHost(request: object): ArgumentsHost {
  return {
    getType: () => 'http',
    switchToHttp: () => ({ getRequest: () => request }),
  } as unknown as ArgumentsHost;
}

describe('handlerName', () => {
  it('names Class.method when the host knows the handler', () => {
    class Orders {
      create(): void {}
    }
    const context = {
      getType: () => 'http',
      getClass: () => Orders,
      getHandler: () => Orders.prototype.create,
    } as unknown as ArgumentsHost;
    expect(handlerName(context)).toBe('Orders.create');
  });

  it('names the route pattern, never the URL with its values (Express, Fastify)', () => {
    const url = '/orders/alice@example.com';
    expect(handlerName(filterHost({ method: 'POST', url, route: { path: '/orders/:id' } }))).toBe(
      'POST /orders/:id',
    );
    expect(
      handlerName(filterHost({ method: 'GET', url, routeOptions: { url: '/orders/:id' } })),
    ).toBe('GET /orders/:id');
    expect(handlerName(filterHost({ method: 'GET', url }))).toBe('GET request');
  });
});

describe('httpAnswer', () => {
  it('is the status, or the error event of a started response', () => {
    expect(httpAnswer(new HttpException('x', 409))).toBe('409');
    expect(httpAnswer(new HttpException('x', 409), true)).toMatch(/error event/);
    expect(httpAnswer(new Error('not http'))).toMatch(/^500 /);
  });
});
