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
  /** No answer (down, unreachable): it says nothing either way. */
  | { node: string; unreachable: true };

/**
 * One mode for the whole Cluster: a sharded message never reaches a classic subscriber, so every
 * process must publish and subscribe the same way on every node. Sharded only when every node
 * that answered has it (a replica counts: a failover can make it the primary); classic, which
 * every version has, as soon as one lacks it or cannot say. Throws when no node answered, so the
 * caller asks again later rather than settle on a guess.
 */
export function choosePubSubMode(answers: readonly NodeAnswer[]): {
  mode: PubSubMode;
  reason?: NodeAnswer;
} {
  const lacking = answers.find((answer) => 'sharded' in answer && !answer.sharded);
  if (lacking) return { mode: 'classic', reason: lacking };
  const refused = answers.find((answer) => 'refused' in answer);
  if (refused) return { mode: 'classic', reason: refused };
  if (!answers.some((answer) => 'sharded' in answer)) {
    throw new Error('No Redis Cluster node answered COMMAND INFO SPUBLISH');
  }
  return { mode: 'sharded' };
}

const logger = new Logger('RedisLock');

/**
 * Asks every node of `cluster` (primaries and replicas) whether it knows `SPUBLISH`, and picks
 * the mode. `COMMAND INFO` answers for the server's abilities, not its version string, so a fork
 * that reports an old version number is judged by what it can do.
 */
export async function detectClusterPubSubMode(cluster: Cluster): Promise<PubSubMode> {
  // Through the Cluster client first: this waits until it is connected and knows its nodes. An
  // error reply is the node's answer, asked again below; anything else means "not connected".
  await cluster.call('COMMAND', 'INFO', 'SPUBLISH').catch((error: unknown) => {
    if (!finalReplyErrorCode(error)) throw error;
  });
  const answers = await Promise.all(
    cluster.nodes('all').map(async (node): Promise<NodeAnswer> => {
      const name = `${node.options.host}:${node.options.port}`;
      try {
        const reply = await node.call('COMMAND', 'INFO', 'SPUBLISH');
        return { node: name, sharded: Array.isArray(reply) && Array.isArray(reply[0]) };
      } catch (error) {
        const code = finalReplyErrorCode(error);
        return code ? { node: name, refused: code } : { node: name, unreachable: true };
      }
    }),
  );
  const { mode, reason } = choosePubSubMode(answers);
  if (reason && 'refused' in reason) {
    logger.warn(messages.pubSubUnknown(reason.node, reason.refused));
  } else if (reason) {
    logger.log(messages.classicPubSub(reason.node));
  }
  return mode;
}
