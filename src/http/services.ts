import type { Forwarder } from '../actors/ownership/forwarder.js';
import type { ReplicaView } from '../actors/ownership/replication.js';
import type { GroupRef } from '../machines/types.js';
import type { GroupCoordinator } from '../actors/types.js';
import type { Settings } from '../config/settings.js';
import type { Clock } from '../machines/clock.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RateLimitedLog } from '../observability/rate-limited-log.js';
import type { Store } from '../store/store.js';
import type { AuditLog } from './audit.js';
import type { LoginThrottle } from './auth/login-throttle.js';
import type { PasswordCheckGate } from './auth/password-check-gate.js';
import type { TokenService } from './auth/tokens.js';
import type { UserDirectory } from './auth/users.js';
import type { StoreOutageBound } from './store-outage.js';

/** The other replicas of the deployment (docs/architecture.md#replicas-leases-and-fences); absent with one replica. */
export interface ReplicaServices {
  readonly forwarder: Forwarder;
  /** Signs and checks forwarded requests (the shared JWT secret). */
  readonly secret: string;
  /** The replica id of the group's rendezvous owner; null while nobody is known. */
  ownerOf(ref: GroupRef): string | null;
  /** Changes whenever `ownerOf` may answer otherwise (the live replicas changed). */
  ownersVersion(): number;
  /** The advertised URL of a live replica, or null. */
  urlOf(replicaId: string): string | null;
  /** The live replicas, for `GET /coord/v1/monitoring/replicas`. */
  list(): Promise<ReplicaView[]>;
  /**
   * Whether this replica is in the replica registry as last read (readiness: until it is, the
   * others do not forward to it and it owns no group).
   */
  joined(): boolean;
}

/** Everything a route handler may use. */
export interface Services {
  readonly settings: Settings;
  readonly store: Store;
  readonly coordinator: GroupCoordinator;
  readonly tokens: TokenService;
  readonly users: UserDirectory;
  readonly throttle: LoginThrottle;
  /** Bounds the password checks running and waiting on this replica. */
  readonly passwordChecks: PasswordCheckGate;
  readonly audit: AuditLog;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** Warn lines for expected refusals, rate-limited. */
  readonly rateLimitedLog: RateLimitedLog;
  readonly clock: Clock;
  readonly replicaId: string;
  /** This replica's `coordinator.http.advertised-url` (the URL it was reached at, if unset). */
  readonly advertisedUrl?: string;
  readonly replicas?: ReplicaServices;
  /** Answers requests that wait on a store that is down; absent with the memory store. */
  readonly outage?: StoreOutageBound;
  readonly version: string;
}
