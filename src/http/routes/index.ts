import type { Settings } from '../../config/settings.js';
import type { RouteSpec } from '../route.js';
import { adminRoutes } from './admin.js';
import { authRoutes } from './auth.js';
import { consumerRoutes } from './consumer.js';
import { consumptionRoutes } from './consumption.js';
import { deadLetterRoutes } from './dead-letters.js';
import { lagRoutes } from './lag.js';
import { metaRoutes } from './meta.js';
import { monitoringRoutes } from './monitoring.js';
import { routingRoutes } from './routing.js';

/** Every route of the API, in mounting order. */
export function allRoutes(settings: Settings, version: string): RouteSpec[] {
  const routes: RouteSpec[] = [];
  routes.push(
    ...authRoutes,
    ...monitoringRoutes,
    ...lagRoutes,
    ...routingRoutes,
    ...consumerRoutes,
    ...adminRoutes(settings),
    ...deadLetterRoutes,
    ...consumptionRoutes(settings),
    ...metaRoutes(() => routes, version),
  );
  return routes;
}
