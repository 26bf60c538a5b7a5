import type { GroupCoordinator } from '../actors/types.js';
import type { Settings } from '../config/settings.js';
import type { Clock } from '../machines/clock.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/store.js';
import type { AuditLog } from './audit.js';
import type { LoginThrottle } from './auth/login-throttle.js';
import type { TokenService } from './auth/tokens.js';
import type { UserDirectory } from './auth/users.js';

/** Everything a route handler may use. */
export interface Services {
  readonly settings: Settings;
  readonly store: Store;
  readonly coordinator: GroupCoordinator;
  readonly tokens: TokenService;
  readonly users: UserDirectory;
  readonly throttle: LoginThrottle;
  readonly audit: AuditLog;
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly replicaId: string;
  readonly version: string;
}
