import type { AuditQuery, AuditRecord } from './store.js';

/** Whether a record passes the filters of `queryAudit`; both stores filter with it. */
export function matchesAuditQuery(record: AuditRecord, query: AuditQuery): boolean {
  return (
    (query.streamPrefix === undefined || record.streamPrefix === query.streamPrefix) &&
    (query.consumerGroup === undefined || record.consumerGroup === query.consumerGroup) &&
    (query.permits === undefined ||
      (record.streamPrefix !== null &&
        record.consumerGroup !== null &&
        query.permits(record.streamPrefix, record.consumerGroup)))
  );
}
