import { Logger } from '@nestjs/common';
import type { Cluster } from 'ioredis';
import { messages } from '../errors/messages';
import { finalReplyErrorCode } from './reply-error';

/**
 * How release notifications travel: classic `PUBLISH`/`SUBSCRIBE`, or sharded
 * `SPUBLISH`/`SSUBSCRIBE` (Redis ≥ 7), which keeps a message on the lock's own shard.
 */
export type PubSubMode = 'classic' | 'sharded';

/** The command the release scripts publish with in `mode`. */
export function publishCommand(mode: PubSubMode): 'PUBLISH' | 'SPUBLISH' {
  return mode === 'sharded' ? 'SPUBLISH' : 'PUBLISH';
}

/** What one Cluster node said when asked whether it has `SPUBLISH`. */
export type NodeAnswer =
  | { node: string; sharded: boolean }
  /** An error reply (a refused `COMMAND`, say): the node's abilities are unknown. */
  | { node: string; refused: string }
  /** No answer in time (down, paused, unreachable): its abilities are unknown. */
  | { node: string; unreachable: true };

/**
 * One mode for the whole Cluster: a sharded message never reaches a classic subscriber, so every
 * process must publish and subscribe the same way on every node. Sharded only when every node has
 * it (a replica counts: a failover can make it the primary); classic, which every version has, as
 * soon as one lacks it or cannot say — a script that calls a command its server lacks fails after
 * its writes applied, while classic pub/sub only costs a broadcast. Throws when no node answered,
 * so the caller asks again later rather than settle on a guess.
 */
export function choosePubSubMode(answers: readonly NodeAnswer[]): {
  mode: PubSubMode;
  reason?: NodeAnswer;
} {
  const lacking = answers.find((answer) => 'sharded' in answer && !answer.sharded);
  if (lacking) return { mode: 'classic', reason: lacking };
  if (!answers.some((answer) => 'sharded' in answer || 'refused' in answer)) {
    throw new Error(messages.clusterPubSubNoAnswer());
  }
  const unknown = answers.find((answer) => !('sharded' in answer));
  return unknown ? { mode: 'classic', reason: unknown } : { mode: 'sharded' };
}

const logger = new Logger('RedisLock');

/**
 * Asks every node of `cluster` whether it knows `SPUBLISH`, and picks the mode: every primary and
 * every replica the client knows of (from `CLUSTER SLOTS`, where Redis 7 lists a replica once it
 * holds data). `COMMAND INFO` answers for the server's abilities, not its version string, so a fork
 * that reports an old version number is judged by what it can do.
 */
export async function detectClusterPubSubMode(
  cluster: Cluster,
  timeoutMs: number,
): Promise<PubSubMode> {
  // Through the Cluster client first: this waits until it is connected and knows its nodes. An
  // error reply is the node's answer, asked again below; anything else means "not connected".
  await bounded(cluster.call('COMMAND', 'INFO', 'SPUBLISH'), timeoutMs).catch((error: unknown) => {
    if (!finalReplyErrorCode(error)) throw error;
  });
  const answers = await Promise.all(
    cluster.nodes('all').map(async (node): Promise<NodeAnswer> => {
      const name = `${node.options.host}:${node.options.port}`;
      try {
        // Bounded: one paused node must not hold up every release in the Cluster.
        const reply = await bounded(node.call('COMMAND', 'INFO', 'SPUBLISH'), timeoutMs);
        return { node: name, sharded: Array.isArray(reply) && Array.isArray(reply[0]) };
      } catch (error) {
        const code = finalReplyErrorCode(error);
        return code ? { node: name, refused: code } : { node: name, unreachable: true };
      }
    }),
  );
  const { mode, reason } = choosePubSubMode(answers);
  if (reason && 'sharded' in reason) {
    logger.log(messages.classicPubSub(reason.node));
  } else if (reason) {
    const why =
      'refused' in reason
        ? `refused COMMAND INFO (${reason.refused})`
        : `did not answer COMMAND INFO within ${timeoutMs} ms`;
    logger.warn(messages.pubSubUnknown(reason.node, why));
  }
  return mode;
}

/** `promise`, or a rejection once `ms` passed. */
function bounded<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(messages.noAnswerWithin(ms))), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
