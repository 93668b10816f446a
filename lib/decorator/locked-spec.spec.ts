import type { ExecutionContext } from '@nestjs/common';
import { LockKeyError } from '../errors/lock-key.error';
import {
  assertProviderPlaceholders,
  createLockedSpec,
  keyFromArguments,
  keyFromContext,
  type LockKeyFactory,
} from './locked-spec';

/** A stand-in ExecutionContext of one transport. */
function context(type: 'http' | 'rpc' | 'ws', payload: unknown): ExecutionContext {
  return {
    getType: () => type,
    switchToHttp: () => ({ getRequest: () => payload }),
    switchToRpc: () => ({ getData: () => payload }),
    switchToWs: () => ({ getData: () => payload }),
  } as unknown as ExecutionContext;
}

const routeSpec = (key: string | LockKeyFactory) =>
  createLockedSpec(key, {}, () => undefined, 'Ctrl.handler', false);

function providerSpec(key: string | LockKeyFactory, method: (...args: never[]) => unknown) {
  return createLockedSpec(key, {}, method, 'Svc.method', false);
}

describe('keys of route calls (keyFromContext)', () => {
  const request = {
    params: { id: 'P', shared: 'from-params' },
    query: { id: 'Q', shared: 'from-query', page: '2' },
    body: { id: 'B', shared: 'from-body', dto: { user: { id: 'U1' } } },
    headers: { 'x-tenant': 'acme' },
    user: { id: 'me', org: 'org-1' },
  };

  it('searches params, then query, then body, then user', () => {
    expect(keyFromContext(routeSpec('k:<shared>'), context('http', request))).toBe('k:from-params');
    expect(keyFromContext(routeSpec('k:<page>'), context('http', request))).toBe('k:2');
    expect(keyFromContext(routeSpec('k:<dto.user.id>'), context('http', request))).toBe('k:U1');
    expect(keyFromContext(routeSpec('k:<org>'), context('http', request))).toBe('k:org-1');
  });

  it('reads explicit sources, and header names case-insensitively', () => {
    const spec = routeSpec('<params.id>:<query.id>:<body.id>:<headers.X-Tenant>:<user.id>');
    expect(keyFromContext(spec, context('http', request))).toBe('P:Q:B:acme:me');
  });

  it('does not search headers implicitly (a client could pick the key)', () => {
    expect(() => keyFromContext(routeSpec('k:<x-tenant>'), context('http', request))).toThrow(
      LockKeyError,
    );
  });

  it('never reads request prototypes', () => {
    expect(() => keyFromContext(routeSpec('k:<constructor>'), context('http', request))).toThrow(
      LockKeyError,
    );
    expect(() => keyFromContext(routeSpec('k:<body.toString>'), context('http', request))).toThrow(
      LockKeyError,
    );
  });

  it('reads RPC and WebSocket payloads, with or without a data./payload. prefix', () => {
    const data = { orderId: 'o-1', user: { id: 'u-2' } };
    expect(keyFromContext(routeSpec('o:<orderId>'), context('rpc', data))).toBe('o:o-1');
    expect(keyFromContext(routeSpec('o:<data.orderId>'), context('rpc', data))).toBe('o:o-1');
    expect(keyFromContext(routeSpec('o:<payload.user.id>'), context('ws', data))).toBe('o:u-2');
    expect(() => keyFromContext(routeSpec('o:<missing>'), context('ws', data))).toThrow(
      LockKeyError,
    );
  });

  it('calls a key function with the context and checks its result', () => {
    const spec = routeSpec((ctx: ExecutionContext) => `fn:${ctx.getType()}`);
    expect(keyFromContext(spec, context('http', request))).toBe('fn:http');
    const bad = routeSpec((() => undefined) as unknown as LockKeyFactory);
    expect(() => keyFromContext(bad, context('http', request))).toThrow(
      /key function of @Locked\(\) on Ctrl.handler returned undefined/,
    );
  });
});

describe('keys of provider calls (keyFromArguments)', () => {
  it('resolves names, paths, indexes and rest parameters', () => {
    function method(userId: string, dto: { voucher: { id: string } }, ...tags: string[]) {
      return [userId, dto, tags];
    }
    expect(
      keyFromArguments(providerSpec('<userId>:<dto.voucher.id>', method), [
        'u',
        { voucher: { id: 'v' } },
      ]),
    ).toBe('u:v');
    expect(
      keyFromArguments(providerSpec('<1.voucher.id>', method), ['u', { voucher: { id: 'v' } }]),
    ).toBe('v');
    expect(keyFromArguments(providerSpec('<tags.1>', method), ['u', {}, 'a', 'b'])).toBe('b');
  });

  it('treats 42 and "42" as the same key', () => {
    const spec = providerSpec('order:<id>', (id: number | string) => id);
    expect(keyFromArguments(spec, [42])).toBe(keyFromArguments(spec, ['42']));
  });

  it('rejects an unknown placeholder, listing the parameters', () => {
    const spec = providerSpec('order:<userID>', (userId: string, voucherId: string) => [
      userId,
      voucherId,
    ]);
    expect(() => assertProviderPlaceholders(spec)).toThrow(
      /<userID> names no parameter \(parameters: userId, voucherId\)/,
    );
    expect(() => keyFromArguments(spec, ['u', 'v'])).toThrow(LockKeyError);
  });

  it('rejects a placeholder on a method with unreadable parameter names', () => {
    const bound = function (userId: string) {
      return userId;
    }.bind(null);
    expect(() => assertProviderPlaceholders(providerSpec('order:<userId>', bound))).toThrow(
      /Cannot read the parameter names of Svc.method/,
    );
    // Argument indexes need no names.
    expect(keyFromArguments(providerSpec('order:<0>', bound), ['u'])).toBe('order:u');
  });

  it('never reads argument prototypes through a parameter name', () => {
    const spec = providerSpec('<dto.constructor.name>', (dto: object) => dto);
    expect(() => keyFromArguments(spec, [{}])).toThrow(LockKeyError);
  });
});
