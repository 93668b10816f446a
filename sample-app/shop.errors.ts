import { HttpException, HttpStatus } from '@nestjs/common';

/**
 * Every refusal the shop sends has the same JSON shape, so a client can branch on `reason`:
 * `{ statusCode, error, reason, message, ... }`.
 */
export type ShopRefusalReason =
  | 'already-ordered'
  | 'busy'
  | 'sold-out'
  | 'insufficient-credit'
  | 'unknown-voucher'
  | 'invalid-request'
  | 'lock-lost'
  | 'redis-unavailable';

export class ShopRefusal extends HttpException {
  constructor(
    status: number,
    error: string,
    readonly reason: ShopRefusalReason,
    message: string,
    extra: Record<string, unknown> = {},
  ) {
    super({ statusCode: status, error, reason, message, ...extra }, status);
  }
}

/** 409: this user already has an order for this voucher. */
export class AlreadyOrderedException extends ShopRefusal {
  constructor(userId: string, voucherId: string) {
    super(
      HttpStatus.CONFLICT,
      'Conflict',
      'already-ordered',
      `User "${userId}" already ordered voucher "${voucherId}"; each user may order it once.`,
    );
  }
}

/** 410: no stock left. Gone rather than 409: retrying will not help, the sale is over. */
export class SoldOutException extends ShopRefusal {
  constructor(voucherId: string) {
    super(HttpStatus.GONE, 'Gone', 'sold-out', `Voucher "${voucherId}" is sold out.`);
  }
}

/** 404 */
export class UnknownVoucherException extends ShopRefusal {
  constructor(voucherId: string) {
    super(
      HttpStatus.NOT_FOUND,
      'Not Found',
      'unknown-voucher',
      `There is no voucher "${voucherId}". Create it with PUT /vouchers/${voucherId} { "stock": n }.`,
    );
  }
}

/** 400 */
export class InvalidRequestException extends ShopRefusal {
  constructor(message: string) {
    super(HttpStatus.BAD_REQUEST, 'Bad Request', 'invalid-request', message);
  }
}

/** 503: the stock lock was lost before the write, and the fenced write was refused. Retry. */
export class StaleWriteException extends ShopRefusal {
  constructor(voucherId: string) {
    super(
      HttpStatus.SERVICE_UNAVAILABLE,
      'Service Unavailable',
      'lock-lost',
      `The stock lock of voucher "${voucherId}" was lost before the order was written; ` +
        'the write was refused and nothing was sold. Retry the order.',
    );
  }
}

/** 409: the sender has less credit than the transfer moves. */
export class InsufficientCreditException extends ShopRefusal {
  constructor(userId: string, credit: number, amount: number) {
    super(
      HttpStatus.CONFLICT,
      'Conflict',
      'insufficient-credit',
      `User "${userId}" has ${credit} credit, less than the ${amount} to transfer.`,
    );
  }
}
