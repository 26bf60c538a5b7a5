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
      operation: ctx.operation ?? 'unknown',
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
