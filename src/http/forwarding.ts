import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BeforeResponse } from '../actors/ownership/forwarder.js';
import {
  FORWARD_SIGNATURE_HEADER,
  FORWARDED_BY_HEADER,
  isTrustedForward,
  OWNER_HEADER,
} from '../actors/ownership/forwarder.js';
import { GroupMovedError } from '../errors.js';
import type { Services } from './services.js';

/**
 * Whether `req` came from another replica of this deployment (DESIGN.md §8): its forwarded-by
 * header carries a valid signature under the shared secret. A forwarded-by header without a
 * valid signature is removed, so the request is treated (audited, forwarded) like any other.
 */
export function acceptForwarded(services: Services, req: IncomingMessage): boolean {
  const replicas = services.replicas;
  if (req.headers[FORWARDED_BY_HEADER] === undefined) return false;
  if (replicas && isTrustedForward(req, replicas.secret)) return true;
  delete req.headers[FORWARDED_BY_HEADER];
  delete req.headers[FORWARD_SIGNATURE_HEADER];
  return false;
}

/** The group's owner as this replica sees it (`X-Coord-Owner`); null while it moves. */
export function groupOwnerOf(
  services: Services,
  streamPrefix: string,
  consumerGroup: string,
): string | null {
  return services.replicas
    ? services.replicas.ownerOf({ streamPrefix, consumerGroup })
    : services.replicaId;
}

/** Sets `X-Coord-Owner` to the group's owner as this replica sees it (none while it moves). */
export function setOwnerHeader(
  services: Services,
  res: ServerResponse,
  streamPrefix: string | null | undefined,
  consumerGroup: string | null | undefined,
): void {
  if (!streamPrefix || !consumerGroup || res.headersSent) return;
  const owner = groupOwnerOf(services, streamPrefix, consumerGroup);
  if (owner === null) res.removeHeader(OWNER_HEADER);
  else res.setHeader(OWNER_HEADER, owner);
}

/**
 * Forwards a request whose group another replica owns to that replica (one hop: a request
 * that was forwarded already is refused by the forwarder with 503 `OWNER_MOVING`). False when
 * it cannot be forwarded (no replicas, the owner not known or not live): the caller answers
 * the `GROUP_MOVED` error itself (503 with `Retry-After`).
 */
export async function forwardMoved(
  services: Services,
  req: IncomingMessage,
  res: ServerResponse,
  error: unknown,
  request: { requestId: string; body: Buffer | null; beforeResponse?: BeforeResponse },
): Promise<boolean> {
  const replicas = services.replicas;
  if (!(error instanceof GroupMovedError) || !replicas || res.headersSent) return false;
  if (error.owner === null || error.owner === services.replicaId) return false;
  const url = replicas.urlOf(error.owner);
  if (url === null) return false;
  // The owner answers under the same request id (and the signature covers it).
  req.headers['x-request-id'] = request.requestId;
  let body: Buffer | undefined;
  if (request.body !== null || req.readableEnded) {
    // Read already (and inflated, if it was encoded): sent as the bytes it is now.
    body = request.body ?? Buffer.alloc(0);
    delete req.headers['content-encoding'];
    delete req.headers['transfer-encoding'];
    req.headers['content-length'] = String(body.length);
  }
  await replicas.forwarder.forward(
    req,
    res,
    { id: error.owner, url },
    body,
    request.beforeResponse,
  );
  return true;
}
