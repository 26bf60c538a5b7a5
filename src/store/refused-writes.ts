/**
 * Redis answers that refuse a write while the server itself answers
 * (docs/operations.md#when-the-store-is-down): a read-only replica (`READONLY`), memory full
 * (`OOM`), an ACL that denies the command or key (`NOPERM`), a failed RDB save with
 * `stop-writes-on-bgsave-error` (`MISCONF`), too few replicas for `min-replicas-to-write`
 * (`NOREPLICAS`). PING and reads still succeed then, so the store is unavailable for writes
 * rather than unreachable.
 */
const REFUSALS = new Set(['READONLY', 'OOM', 'NOPERM', 'MISCONF', 'NOREPLICAS']);

/**
 * The first word of a Redis error that refuses a write (`READONLY`, `OOM`, ...), or null for
 * any other error. A refusal raised inside a script may come wrapped (`ERR ... READONLY ...`),
 * and one inside `MULTI` comes as the transaction's `EXECABORT`.
 */
export function writeRefusalOf(error: unknown): string | null {
  const e = error as { message?: unknown; previousErrors?: unknown } | null;
  // A transaction discarded (`EXECABORT`) for the refusals of the commands queued in it.
  if (Array.isArray(e?.previousErrors)) {
    for (const queued of e.previousErrors as unknown[]) {
      const refused = writeRefusalOf(queued);
      if (refused !== null) return refused;
    }
  }
  const message = e?.message;
  if (typeof message !== 'string') return null;
  const first = message.split(/\s/, 1)[0] ?? '';
  if (REFUSALS.has(first)) return first;
  if (first !== 'ERR') return null;
  for (const word of message.match(/[A-Z]{3,}/g) ?? []) if (REFUSALS.has(word)) return word;
  return null;
}
