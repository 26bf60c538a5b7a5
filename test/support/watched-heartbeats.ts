import type { HeartbeatReply, HeartbeatTransport } from '../../src/client/index.js';

/**
 * A consumer's transport that sends through `client` and tells `seen` of each reply as it is
 * returned, with the call's arguments and when it was sent (Date.now()).
 */
export function watchedHeartbeats(
  client: HeartbeatTransport,
  seen: (
    reply: HeartbeatReply,
    args: Parameters<HeartbeatTransport['heartbeat']>,
    sentAt: number,
  ) => void,
): HeartbeatTransport {
  return {
    heartbeat: async (...args) => {
      const sentAt = Date.now();
      const reply = await client.heartbeat(...args);
      seen(reply, args, sentAt);
      return reply;
    },
  };
}
