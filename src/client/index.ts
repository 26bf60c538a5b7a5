/**
 * The SDK of stream-coordinator (`stream-coordinator/client`): a client of the coordinator's
 * HTTP API, a consumer runtime and a producer for its sharded Redis streams.
 */
export {
  CoordinatorClient,
  type ChangeMeta,
  type CoordinatorClientOptions,
  type GroupRef,
  type HeartbeatHoldOptions,
  type HeartbeatReply,
  type HeartbeatRequest,
  type PasswordAuthOptions,
  type RequestOptions,
  type GroupLag,
  type RoutingMetadata,
  type ShardLag,
  type TokenAuthOptions,
} from './coordinator-client.js';
export {
  Consumer,
  type ConsumerEvents,
  type ConsumerOptions,
  type ConsumerStats,
  type ShardStats,
  type FencedEvent,
  type HeartbeatTransport,
  type PausedShardsEvent,
  type StreamsUnreachableEvent,
} from './consumer.js';
export {
  Producer,
  type ProducerEvents,
  type ProducerOptions,
  type RoutingSource,
  type SendOptions,
  type SendResult,
} from './producer.js';
export type {
  ConsumerMessage,
  DeadLetteredEvent,
  MessageHandler,
  ReplaySkippedEvent,
} from './shard-reader.js';
export type { RedisOption } from './redis-connection.js';
export {
  AuthenticationError,
  ConflictError,
  CoordinatorApiError,
  CoordinatorUnreachableError,
  InvalidRequestError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitedError,
  UnavailableError,
  type CoordinatorErrorCode,
} from './errors.js';
export type { RetryOptions } from './retry.js';
