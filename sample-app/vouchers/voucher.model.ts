/** One order, as stored in Redis and returned by `POST /vouchers/:voucherId/orders`. */
export interface Order {
  orderId: string;
  voucherId: string;
  userId: string;
  /** The replica that took the order. */
  replica: string;
  createdAt: string;
}

/** `GET /vouchers/:voucherId` */
export interface VoucherView {
  voucherId: string;
  initialStock: number;
  /** Units left; `initialStock - orders.length` as long as nothing raced. */
  stock: number;
  /** Units the settlement job has booked so far (equals `orders.length` once it caught up). */
  settled: number;
  orders: Order[];
}
