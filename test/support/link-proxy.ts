import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * A byte-for-byte TCP relay in front of one server, for links the RESP-aware `tcp-proxy` cannot
 * frame (a replica's sync carries an RDB payload): the replication link and the sentinels' links
 * to a primary. `blackhole()` is a partition: nothing flows either way, and a side that closes
 * meanwhile is not told to the other (its FIN is lost too) until `heal()`, which delivers what
 * was held back, in order, as TCP retransmission would.
 */
export interface LinkProxy {
  readonly port: number;
  blackhole(): void;
  heal(): void;
  close(): Promise<void>;
}

/** Starts a relay on a free 127.0.0.1 port in front of 127.0.0.1:`targetPort`. */
export async function startLinkProxy(targetPort: number): Promise<LinkProxy> {
  const relay = new Relay(targetPort);
  await relay.listen();
  return relay;
}

class Relay implements LinkProxy {
  private readonly server: Server;
  private readonly links = new Set<Link>();
  partitioned = false;

  constructor(private readonly targetPort: number) {
    this.server = createServer((client) => {
      const link = new Link(this, client, connect(this.targetPort, '127.0.0.1'));
      this.links.add(link);
    });
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
  }

  blackhole(): void {
    this.partitioned = true;
  }

  heal(): void {
    this.partitioned = false;
    for (const link of [...this.links]) link.flush();
  }

  forget(link: Link): void {
    this.links.delete(link);
  }

  async close(): Promise<void> {
    this.partitioned = false;
    for (const link of [...this.links]) link.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** One client connection and its connection to the server. */
class Link {
  private readonly held: { to: Socket; bytes: Buffer }[] = [];
  private closing = false;
  private closed = false;

  constructor(
    private readonly relay: Relay,
    private readonly client: Socket,
    private readonly upstream: Socket,
  ) {
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('data', (bytes: Buffer) => this.send(upstream, bytes));
    upstream.on('data', (bytes: Buffer) => this.send(client, bytes));
    for (const socket of [client, upstream]) {
      socket.on('error', () => this.end());
      socket.on('close', () => this.end());
    }
  }

  flush(): void {
    for (const { to, bytes } of this.held.splice(0)) if (!this.closed) to.write(bytes);
    if (this.closing) this.destroy();
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.client.destroy();
    this.upstream.destroy();
    this.relay.forget(this);
  }

  private send(to: Socket, bytes: Buffer): void {
    if (this.relay.partitioned) this.held.push({ to, bytes });
    else if (!this.closed) to.write(bytes);
  }

  /** One side closed: tell the other now, or once the partition heals. */
  private end(): void {
    if (this.relay.partitioned) this.closing = true;
    else this.destroy();
  }
}
