import { createHash } from 'node:crypto';
import type { Request } from 'express';
import type { Clock } from '../machines/clock.js';
import type { AuditOutcome, AuditRecord, Store } from '../store/store.js';
import type { RequestContext } from './request-context.js';

const MAX_TEXT = 512;
/** Longest `path` of a record; a longer one is cut, and its length kept in `pathLength`. */
export const MAX_AUDIT_PATH = 1024;
const MINUTE_MS = 60_000;

/** The path as sent, cut to {@link MAX_AUDIT_PATH} characters (the cut one ends in `…`). */
function boundedPath(path: string): { path: string; pathLength?: number } {
  if (path.length <= MAX_AUDIT_PATH) return { path };
  return { path: `${path.slice(0, MAX_AUDIT_PATH - 1)}…`, pathLength: path.length };
}

/**
 * Whether a record is of a denied request: a 401 or 403, or any refusal of a caller without a
 * valid token. Anyone can cause these at will, so they are written within a budget
 * (docs/operations.md#the-audit-log); a change that was made, and a refusal of a caller known by
 * its token other than 401/403, always are.
 */
export function isDenied(record: Pick<AuditRecord, 'status' | 'principal'>): boolean {
  return (
    record.status === 401 ||
    record.status === 403 ||
    (record.status >= 400 && record.principal === null)
  );
}

/**
 * How many records of denied requests a replica writes: at most `perMinute` in each minute
 * (counted from the first of it); those past it are dropped and counted, and the count is
 * handed to the next record written, whatever it is of.
 */
export class DeniedAuditBudget {
  private windowStart = Number.NEGATIVE_INFINITY;
  private written = 0;
  private dropped = 0;

  constructor(
    private readonly perMinute: number,
    private readonly clock: Clock,
  ) {}

  /** Whether a denied record may be written now; counts it as dropped if not. */
  admit(): boolean {
    const now = this.clock.now();
    // A clock set back starts a minute too, rather than stretch the one under way.
    if (now - this.windowStart >= MINUTE_MS || now < this.windowStart) {
      this.windowStart = now;
      this.written = 0;
    }
    if (this.written >= this.perMinute) {
      this.dropped++;
      return false;
    }
    this.written++;
    return true;
  }

  /** The records dropped since the last call (given to the record about to be written). */
  takeDropped(): number {
    const dropped = this.dropped;
    this.dropped = 0;
    return dropped;
  }

  /** Gives back a count {@link takeDropped} handed to a record that could not be written. */
  giveBack(dropped: number): void {
    this.dropped += dropped;
  }
}

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
  private readonly denied: DeniedAuditBudget;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** `coordinator.audit.denied-per-minute`. */
    deniedPerMinute = 10,
  ) {
    this.denied = new DeniedAuditBudget(deniedPerMinute, clock);
  }

  build(req: Request, ctx: RequestContext, status: number): AuditRecord {
    const body = (ctx.body ?? {}) as Record<string, unknown>;
    return {
      timestamp: new Date(this.clock.now()).toISOString(),
      method: req.method,
      ...boundedPath(req.originalUrl),
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

  /**
   * Writes `record`, carrying how many denied records were dropped before it; resolves false,
   * writing nothing, for a denied record past this minute's budget (see {@link isDenied}).
   */
  async write(record: AuditRecord): Promise<boolean> {
    if (isDenied(record) && !this.denied.admit()) return false;
    const dropped = this.denied.takeDropped();
    try {
      await this.store.appendAudit(dropped > 0 ? { ...record, deniedDropped: dropped } : record);
    } catch (error) {
      this.denied.giveBack(dropped);
      throw error;
    }
    return true;
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
