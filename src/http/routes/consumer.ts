import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import type { SteadyTicket } from '../../actors/types.js';
import { CoordinatorError, GroupMovedError } from '../../errors.js';
import { MAX_HEARTBEAT_WAIT_MS, type HeartbeatReply } from '../../machines/protocol.js';
import type { Principal } from '../auth/roles.js';
import { forwardTargetOf, whenAnsweredHere } from '../forwarding.js';
import { route } from '../route.js';
import { errorSchema, groupParamsSchema } from '../schemas.js';
import type { Services } from '../services.js';

const shard = z.number().int().min(0).max(1_000_000);

/** The heartbeat body (docs/protocol.md#request-body). */
export const heartbeatBodySchema = z.object({
  memberId: z
    .string()
    .regex(/^[\x21-\x7e]{1,128}$/, 'must be 1-128 printable ASCII characters without spaces')
    .refine((id) => id !== '__proto__', 'is reserved'),
  memberEpoch: z.number().int().min(-1),
  assignmentEpoch: z.number().int().min(0),
  metadataVersion: z.number().int().min(0),
  currentAssignments: z.array(shard).max(100_000),
  revokeProgress: z
    .array(z.object({ shard, state: z.enum(['DRAINING', 'DONE']) }))
    .max(100_000)
    .default([]),
  coordinationVersion: z.number().int().min(0).optional(),
  lifecycleId: z.string().max(128).optional(),
  clientId: z.string().max(256).optional(),
  sessionTimeoutMs: z.number().int().min(0).optional(),
  rebalanceTimeoutMs: z.number().int().min(0).optional(),
  /** Hold the reply while it would tell nothing new, up to this long (docs/protocol.md). */
  waitMs: z.number().int().min(0).max(MAX_HEARTBEAT_WAIT_MS).optional(),
});

export const heartbeatReplySchema = z.object({
  outcome: z.enum(['SYNC_METADATA', 'FENCED_MEMBER_EPOCH', 'REVOKE_PENDING', 'OK']),
  memberId: z.string(),
  memberEpoch: z.number().int(),
  assignmentEpoch: z.number().int(),
  metadataVersion: z.number().int(),
  lifecycleId: z.string(),
  shardCount: z.number().int(),
  assignedShards: z.array(z.number().int()),
  revokeShards: z.array(z.number().int()),
  retireShards: z.array(z.number().int()),
  pendingShards: z.array(z.number().int()),
  heartbeatIntervalMs: z.number().int(),
  layoutId: z.string(),
  layoutVersion: z.number().int(),
  startAt: z.enum(['earliest', 'latest']),
  initialShardCount: z.number().int(),
  createdAt: z.number().int(),
  startFromMs: z.number().int(),
  pausedShards: z.array(z.number().int()),
});

export const HEARTBEAT_PATH = '/coord/v1/consumer/streams/:stream/groups/:group/heartbeat';

/** Who may heartbeat. */
export const HEARTBEAT_ROLES = ['CONSUMER'] as const;

/**
 * What the heartbeat asks of a request (role, path and body schemas): the rules the express
 * route is mounted with and the heartbeat fast path checks, through `request-checks.ts`.
 */
export const HEARTBEAT_RULES = {
  roles: HEARTBEAT_ROLES,
  params: groupParamsSchema,
  body: heartbeatBodySchema,
} as const;

/**
 * The heartbeat itself, once the caller is authenticated and the request validated: the group
 * actor decides, metrics count it. The one implementation behind the express route and the
 * heartbeat fast path (`src/http/heartbeat-fast-path.ts`). The member is bound to the caller's
 * principal (docs/protocol.md#who-may-release-a-members-shards), which comes from the verified token, never from the body.
 *
 * A steady heartbeat the group can answer at once (`GroupCoordinator.steadyTicket`) is
 * answered synchronously with its ticket, without a promise; any other returns the promise of its answer.
 */
export function answerHeartbeat(
  services: Services,
  principal: Principal,
  params: z.infer<typeof groupParamsSchema>,
  body: z.infer<typeof heartbeatBodySchema>,
  res: ServerResponse,
): SteadyTicket | Promise<HeartbeatReply> {
  const { metrics, coordinator } = services;
  const startedAt = performance.now();
  const ref = { streamPrefix: params.stream, consumerGroup: params.group };
  if (body.waitMs) return heldHeartbeat(services, principal, ref, body, res, startedAt);
  const request = { ...body, principal: principal.name };
  let steady: SteadyTicket | null;
  try {
    steady = coordinator.steadyTicket(ref, request);
  } catch (error) {
    throw counted(services, res, secondsSince(startedAt), error);
  }
  if (steady !== null) {
    metrics.recordHeartbeat(steady.outcome, secondsSince(startedAt));
    return steady;
  }
  return coordinator.heartbeat(ref, request).then(
    (reply) => {
      metrics.recordHeartbeat(reply.outcome, secondsSince(startedAt));
      return reply;
    },
    (error: unknown) => {
      throw counted(services, res, secondsSince(startedAt), error);
    },
  );
}

/**
 * A steady heartbeat answered before, answered again (`GroupCoordinator.steadyAgain`): true,
 * counted in the metrics as {@link answerHeartbeat} counts it, when `ticket.reply` is the
 * answer; false when the heartbeat must be decided anew. The caller authenticated and validated
 * the request, which is the very one the ticket answered.
 */
export function answerAgain(services: Services, ticket: SteadyTicket): boolean {
  const startedAt = performance.now();
  if (!services.coordinator.steadyAgain(ticket)) return false;
  services.metrics.recordHeartbeat(ticket.outcome, secondsSince(startedAt));
  services.metrics.recordRepeated();
  return true;
}

const secondsSince = (startedAt: number) => (performance.now() - startedAt) / 1000;

/**
 * Counts a heartbeat that failed under its error code once it is answered here; returns the
 * error to throw. A refusal the error path forwards (`GROUP_MOVED` naming an owner, when the
 * group moved after the request was routed) is not counted here: the owner counts its answer,
 * and a forwarded heartbeat is counted once (`whenAnsweredHere`).
 */
function counted(
  services: Services,
  res: ServerResponse,
  seconds: number,
  error: unknown,
): unknown {
  const outcome = (error as { code?: string }).code ?? 'ERROR';
  whenAnsweredHere(res, () => services.metrics.recordHeartbeat(outcome, seconds));
  return error;
}

/**
 * A heartbeat asking to be held (`waitMs`, docs/protocol.md "Held heartbeats"): always through
 * `GroupCoordinator.heartbeat`, and timed until it is held (the wait is not the coordinator's
 * work).
 */
function heldHeartbeat(
  services: Services,
  principal: Principal,
  ref: { streamPrefix: string; consumerGroup: string },
  body: z.infer<typeof heartbeatBodySchema>,
  res: ServerResponse,
  startedAt: number,
): Promise<HeartbeatReply> {
  const { metrics, coordinator } = services;
  const { waitMs = 0, ...fields } = body;
  let heldAfter: number | null = null;
  const onHeld = () => {
    heldAfter = secondsSince(startedAt);
  };
  return coordinator
    .heartbeat(
      ref,
      { ...fields, principal: principal.name },
      { waitMs, signal: closedSignal(res), onHeld },
    )
    .then(
      (reply) => {
        metrics.recordHeartbeat(reply.outcome, heldAfter ?? secondsSince(startedAt));
        return reply;
      },
      (error: unknown) => {
        throw counted(services, res, heldAfter ?? secondsSince(startedAt), error);
      },
    );
}

/** Aborted when the client goes away before its response was sent (a held heartbeat ends). */
function closedSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

export const consumerRoutes = [
  route({
    method: 'post',
    path: HEARTBEAT_PATH,
    summary: 'Consumer heartbeat: join (epoch 0), report progress, leave (epoch -1)',
    tag: 'consumer',
    ...HEARTBEAT_RULES,
    responses: {
      200: { description: 'Instructions for the member', schema: heartbeatReplySchema },
      400: {
        description: 'Invalid request or unsupported coordination version',
        schema: errorSchema,
      },
      403: {
        description: 'Missing role, or the member id is in use by another principal',
        schema: errorSchema,
      },
      404: { description: 'Unknown group', schema: errorSchema },
      409: { description: 'A join beyond the member cap (GROUP_FULL)', schema: errorSchema },
      503: { description: 'Store down or group failed closed', schema: errorSchema },
    },
    async handler({ params, body, principal, services, res }) {
      // The role check has run, so there is a principal; the guard is for the type only.
      if (!principal) throw new CoordinatorError('UNAUTHENTICATED', 'no access token');
      // Another replica serves the group: forwarded there (the route's error path), and counted
      // there, not here as a refused heartbeat (docs/architecture.md#the-request-pipeline).
      const elsewhere = forwardTargetOf(services, params.stream, params.group);
      if (elsewhere !== null) throw new GroupMovedError(elsewhere);
      const answered = answerHeartbeat(services, principal, params, body, res);
      return { status: 200, body: answered instanceof Promise ? await answered : answered.reply };
    },
  }),
];
