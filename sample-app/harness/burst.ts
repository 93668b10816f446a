import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';

/** One order attempt of the burst and how it ended. */
export interface Attempt {
  userId: string;
  /** Index of the replica it was sent to. */
  replica: number;
  /** HTTP status, or 0 when the request failed without a response. */
  status: number;
  body: unknown;
  retryAfter: string | null;
  latencyMs: number;
}

export interface BurstPlan {
  urls: readonly string[];
  voucherId: string;
  users: number;
  attemptsPerUser: number;
  /**
   * First fire the same burst at a throw-away voucher (`<voucherId>-warm-up`), so the replicas'
   * code is JIT-compiled and the client's keep-alive connections are open: the measured burst then
   * really arrives at once, and its latencies are not start-up costs.
   * @default true
   */
  warmUp?: boolean;
  /** Runs between the warm-up and the measured burst (the demo clears the replicas' lock stats). */
  afterWarmUp?: () => Promise<void>;
}

/**
 * Fires `users × attemptsPerUser` order requests at once. Attempt `a` of user `u` goes to replica
 * `(u + a) mod n`, so every user hits every replica and every replica sees every user.
 */
export async function fireBurst(plan: BurstPlan): Promise<Attempt[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  try {
    if (plan.warmUp ?? true) {
      const voucherId = `${plan.voucherId}-warm-up`;
      await resetVoucher(plan.urls[0]!, voucherId, plan.users * plan.attemptsPerUser);
      await fire(agent, { ...plan, voucherId });
    }
    await plan.afterWarmUp?.();
    return await fire(agent, plan);
  } finally {
    agent.destroy();
  }
}

function fire(agent: Agent, plan: BurstPlan): Promise<Attempt[]> {
  const attempts: Promise<Attempt>[] = [];
  for (let attempt = 0; attempt < plan.attemptsPerUser; attempt++) {
    for (let user = 0; user < plan.users; user++) {
      const replica = (user + attempt) % plan.urls.length;
      attempts.push(order(agent, plan.urls[replica]!, plan.voucherId, userName(user), replica));
    }
  }
  return Promise.all(attempts);
}

export function userName(index: number): string {
  return `user-${String(index + 1).padStart(3, '0')}`;
}

async function order(
  agent: Agent,
  baseUrl: string,
  voucherId: string,
  userId: string,
  replica: number,
): Promise<Attempt> {
  const started = performance.now();
  try {
    const response = await send(
      'POST',
      `${baseUrl}/vouchers/${voucherId}/orders`,
      { userId },
      agent,
    );
    return {
      userId,
      replica,
      status: response.status,
      body: response.body,
      retryAfter: response.retryAfter,
      latencyMs: performance.now() - started,
    };
  } catch (error) {
    return {
      userId,
      replica,
      status: 0,
      body: String(error),
      retryAfter: null,
      latencyMs: performance.now() - started,
    };
  }
}

interface Response {
  status: number;
  body: unknown;
  retryAfter: string | null;
}

/** One HTTP request with a JSON body (node:http: far less client CPU per request than fetch). */
function send(method: string, url: string, json?: unknown, agent?: Agent): Promise<Response> {
  return new Promise((resolve, reject) => {
    const payload = json === undefined ? undefined : JSON.stringify(json);
    const req = request(
      url,
      {
        method,
        agent,
        headers: payload ? { 'content-type': 'application/json' } : {},
        timeout: 30_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('error', reject);
        res.on('end', () => {
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            // not JSON: keep the text
          }
          const retryAfter = res.headers['retry-after'];
          resolve({ status: res.statusCode ?? 0, body, retryAfter: retryAfter ?? null });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${url} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** What the voucher looks like in Redis after the burst (`GET /vouchers/:voucherId`). */
export interface VoucherState {
  initialStock: number;
  stock: number;
  settled: number;
  orders: { userId: string; replica: string }[];
}

export async function readVoucher(baseUrl: string, voucherId: string): Promise<VoucherState> {
  const response = await send('GET', `${baseUrl}/vouchers/${voucherId}`);
  if (response.status !== 200) throw new Error(`GET /vouchers/${voucherId}: ${response.status}`);
  return response.body as VoucherState;
}

/** Creates (or resets) the voucher through the shop's own endpoint. */
export async function resetVoucher(baseUrl: string, voucherId: string, stock: number) {
  const response = await send('PUT', `${baseUrl}/vouchers/${voucherId}`, { stock });
  if (response.status !== 200) throw new Error(`PUT /vouchers/${voucherId}: ${response.status}`);
}

/** The numbers the demo prints and the e2e test asserts on. */
export interface BurstSummary {
  requests: number;
  users: number;
  initialStock: number;
  /** Orders stored in Redis. */
  orders: number;
  /** Users holding at least one order. */
  usersWithOrder: number;
  /** Most orders one user got (1 is correct). */
  maxOrdersPerUser: number;
  /** Orders beyond the first of each user. */
  duplicates: number;
  /** Units sold beyond the stock: `orders - initialStock` when positive. */
  oversold: number;
  /** Stock left in Redis; what the naive writes left there, whatever was sold. */
  stockLeft: number;
  /** Responses by HTTP status (0 = no response). */
  byStatus: Record<number, number>;
  /** 409/410/4xx responses by the `reason` field of their body. */
  byReason: Record<string, number>;
  /** 201 responses by replica index: the work was spread. */
  createdByReplica: number[];
  p50Ms: number;
  p99Ms: number;
}

export function summarize(
  attempts: readonly Attempt[],
  voucher: VoucherState,
  replicas: number,
): BurstSummary {
  const perUser = new Map<string, number>();
  for (const order of voucher.orders)
    perUser.set(order.userId, (perUser.get(order.userId) ?? 0) + 1);
  const byStatus: Record<number, number> = {};
  const byReason: Record<string, number> = {};
  const createdByReplica = new Array<number>(replicas).fill(0);
  for (const attempt of attempts) {
    byStatus[attempt.status] = (byStatus[attempt.status] ?? 0) + 1;
    if (attempt.status === 201) createdByReplica[attempt.replica]!++;
    const reason = (attempt.body as { reason?: unknown } | null)?.reason;
    if (attempt.status >= 400 && typeof reason === 'string') {
      byReason[reason] = (byReason[reason] ?? 0) + 1;
    }
  }
  const latencies = attempts.map((a) => a.latencyMs).sort((a, b) => a - b);
  return {
    requests: attempts.length,
    users: new Set(attempts.map((a) => a.userId)).size,
    initialStock: voucher.initialStock,
    orders: voucher.orders.length,
    usersWithOrder: perUser.size,
    maxOrdersPerUser: Math.max(0, ...perUser.values()),
    duplicates: voucher.orders.length - perUser.size,
    oversold: Math.max(0, voucher.orders.length - voucher.initialStock),
    stockLeft: voucher.stock,
    byStatus,
    byReason,
    createdByReplica,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
  };
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: readonly number[], p: number): number {
  const rank = Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1);
  return sorted[Math.max(0, rank)] ?? 0;
}
