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

/** Operation names of admin routes, for records of requests rejected before routing. */
const OPERATIONS: ReadonlyArray<readonly [string, RegExp, string]> = [
  ['POST', /^\/coord\/v1\/admin\/groups$/, 'createGroup'],
  ['PUT', /^\/coord\/v1\/admin\/streams\/[^/]+\/groups\/[^/]+$/, 'putGroup'],
  ['DELETE', /^\/coord\/v1\/admin\/streams\/[^/]+\/groups\/[^/]+$/, 'deleteGroup'],
  ['POST', /\/freeze$/, 'freeze'],
  ['POST', /\/unfreeze$/, 'unfreeze'],
  ['POST', /\/scale$/, 'scale'],
  ['POST', /\/rollback$/, 'rollback'],
  ['POST', /\/recovery$/, 'recovery'],
  ['POST', /\/producers\/pause$/, 'pauseProducers'],
  ['POST', /\/producers\/resume$/, 'resumeProducers'],
];

export function operationOf(method: string, path: string): string {
  for (const [m, pattern, name] of OPERATIONS) if (m === method && pattern.test(path)) return name;
  return 'unknown';
}

function pathGroup(path: string): { streamPrefix: string | null; consumerGroup: string | null } {
  const match = /^\/coord\/v1\/admin\/streams\/([^/]+)\/groups\/([^/]+)/.exec(path);
  if (!match) return { streamPrefix: null, consumerGroup: null };
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s).slice(0, MAX_TEXT);
    } catch {
      return s.slice(0, MAX_TEXT);
    }
  };
  return { streamPrefix: decode(match[1] as string), consumerGroup: decode(match[2] as string) };
}

/** Builds and writes the one audit record of an admin request (DESIGN.md §9). */
export class AuditLog {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  build(req: Request, ctx: RequestContext, status: number): AuditRecord {
    const path = req.originalUrl.split('?')[0] ?? req.originalUrl;
    const body = (ctx.body ?? {}) as Record<string, unknown>;
    const fromPath = pathGroup(path);
    return {
      timestamp: new Date(this.clock.now()).toISOString(),
      method: req.method,
      path: req.originalUrl.slice(0, 2048),
      operation: ctx.operation ?? operationOf(req.method, path),
      outcome: outcomeOf(status),
      status,
      principal: ctx.principal?.name ?? null,
      roles: ctx.principal?.roles ?? [],
      requestId: ctx.requestId,
      bodySha256: ctx.rawBody ? createHash('sha256').update(ctx.rawBody).digest('hex') : null,
      clientAddress: req.socket.remoteAddress ?? null,
      durationMs: Math.max(0, this.clock.now() - ctx.startedAt),
      streamPrefix: ctx.streamPrefix ?? fromPath.streamPrefix ?? text(body.streamPrefix),
      consumerGroup: ctx.consumerGroup ?? fromPath.consumerGroup ?? text(body.consumerGroup),
      requestedBy: text(body.requestedBy),
      reason: text(body.reason),
    };
  }

  async write(record: AuditRecord): Promise<void> {
    await this.store.appendAudit(record);
  }
}
