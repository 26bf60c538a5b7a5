import { createHash } from 'node:crypto';
import type { Request } from 'express';
import type { Clock } from '../machines/clock.js';
import type { AuditOutcome, AuditRecord, Store } from '../store/store.js';
import type { RequestContext } from './request-context.js';

const MAX_TEXT = 512;

function text(value: unknown): string | null {
  return typeof value === 'string' ? value.slice(0, MAX_TEXT) : null;
}

export function outcomeOf(status: number): AuditOutcome {
  if (status < 400) return 'SUCCEEDED';
  if (status === 401 || status === 403) return 'DENIED';
  if (status < 500) return 'REJECTED';
  return 'FAILED';
}

/**
 * The operation an admin request is audited and counted as: its route's, but for the plan of a
 * position reset (`dryRun`, the default), which changes nothing: `planPositions`, a read of
 * intent, told apart from a reset that found nothing to change (docs/operations.md#replay-or-skip).
 */
export function auditedOperation(ctx: RequestContext): string {
  const operation = ctx.operation ?? 'unknown';
  if (operation !== 'resetPositions') return operation;
  const body = ctx.body;
  const run =
    typeof body === 'object' && body !== null && 'dryRun' in body && body.dryRun === false;
  return run ? operation : 'planPositions';
}

/** Builds and writes the one audit record of an admin request (README.md#api-at-a-glance). */
export class AuditLog {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  build(req: Request, ctx: RequestContext, status: number): AuditRecord {
    const body = (ctx.body ?? {}) as Record<string, unknown>;
    return {
      timestamp: new Date(this.clock.now()).toISOString(),
      method: req.method,
      path: req.originalUrl.slice(0, 2048),
      // Set by the matched route; an admin path no route matches is 'unknown'.
      operation: auditedOperation(ctx),
      outcome: outcomeOf(status),
      status,
      principal: ctx.principal?.name ?? null,
      roles: ctx.principal?.roles ?? [],
      requestId: ctx.requestId,
      bodySha256: ctx.rawBody ? createHash('sha256').update(ctx.rawBody).digest('hex') : null,
      clientAddress: req.socket.remoteAddress ?? null,
      durationMs: Math.max(0, this.clock.now() - ctx.startedAt),
      streamPrefix: ctx.streamPrefix ?? text(body.streamPrefix),
      consumerGroup: ctx.consumerGroup ?? text(body.consumerGroup),
      requestedBy: text(body.requestedBy),
      reason: text(body.reason),
    };
  }

  async write(record: AuditRecord): Promise<void> {
    await this.store.appendAudit(record);
  }
}

/** The answer a request cut off before it was wholly received gets (408 REQUEST_TIMEOUT). */
export interface CutOffAnswer {
  readonly status: number;
  readonly code: string;
  readonly message: string;
}

/** How the audit record of a request is written should it be cut off, by response. */
const cutOffAudits = new WeakMap<object, (answer: CutOffAnswer) => Promise<void>>();

/**
 * Keeps, for the request of `res`, how its audit record is written should the connection
 * deadlines cut it off (408) before its body is in: they answer and close the socket only once
 * it is written (see {@link auditCutOff}), as every other refusal is audited before it is sent.
 */
export function onCutOff(res: object, audit: (answer: CutOffAnswer) => Promise<void>): void {
  cutOffAudits.set(res, audit);
}

/**
 * Writes the audit record of the request of `res`, cut off with `answer`: settles once it is
 * written (or could not be); null when nothing is kept for it (not an express request). At most
 * once per response.
 */
export function auditCutOff(res: object, answer: CutOffAnswer): Promise<void> | null {
  const audit = cutOffAudits.get(res);
  if (audit === undefined) return null;
  cutOffAudits.delete(res);
  return Promise.resolve()
    .then(() => audit(answer))
    .then(
      () => undefined,
      () => undefined,
    );
}
