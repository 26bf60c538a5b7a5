import express, { type NextFunction, type Request, type Response } from 'express';
import { CoordinatorError } from '../errors.js';
import { isAdminPath } from './admin-path.js';
import { authenticate, createPassport } from './auth/passport.js';
import { withinScope } from './auth/scoped-errors.js';
import { requestContext } from './request-context.js';
import { forwardMoved, setOwnerHeader } from './forwarding.js';
import { auditOnce, bodyMiddleware, requestIdMiddleware, send, sendError } from './pipeline.js';
import { checkRequest } from './request-checks.js';
import type { RouteSpec } from './route.js';
import { requestedWaitMs } from './store-outage.js';
import type { Services } from './services.js';
import { mountUi } from './ui.js';

/**
 * The express app: request id → per route (identify → body → authenticate → role → validate →
 * group scope, `request-checks.ts` → handler) → response (audited on admin routes). Every error leaves in the API's one shape (README.md#api-at-a-glance).
 */
export function createApp(services: Services, routes: readonly RouteSpec[]): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.set('query parser', 'simple');
  // One spelling per route (docs/decisions.md#one-spelling-per-path): `/COORD/…` and `…/groups/` match nothing.
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  // The token verifier of the heartbeat fast path too: one verifier, one verified-token cache.
  const passport = createPassport(services.tokens);

  app.use(requestIdMiddleware(services));
  const body = bodyMiddleware(services.settings.limits['max-body-bytes']);

  for (const spec of routes) {
    // The route is known before the body is read, so even a request refused for its body
    // (413, 415, bad JSON) is audited with its operation and group.
    const adminRoute = isAdminPath(spec.path);
    const identify = (req: Request, res: Response, next: NextFunction): void => {
      const ctx = requestContext(res);
      ctx.operation = spec.operation ?? null;
      // Belt and braces: a request an admin route serves is audited whatever its path said.
      if (adminRoute && !ctx.forwarded) ctx.audited = true;
      const params = req.params as Record<string, string>;
      if (params.stream !== undefined) ctx.streamPrefix = params.stream.slice(0, 512);
      if (params.group !== undefined) ctx.consumerGroup = params.group.slice(0, 512);
      next();
    };
    app[spec.method](spec.path, identify, ...body, async (req: Request, res: Response) => {
      const ctx = requestContext(res);
      // Answered 503 STORE_UNAVAILABLE if it waits too long on a store that is down.
      const watch = services.outage?.watch(
        (error) => {
          sendError(services, req, res, error).catch(() => undefined);
        },
        0,
        ctx.forwarded,
      );
      try {
        let principal = null;
        if (spec.roles) {
          principal = await authenticate(passport, req, res);
          ctx.principal = principal;
        }
        const checked = checkRequest(spec, principal, {
          params: req.params,
          body: ctx.body,
          query: req.query,
        });
        const input = { ...checked, principal, requestId: ctx.requestId, req, res, services };
        // Once the caller is admitted, before the handler: an event stream writes its head itself.
        const params = req.params as Record<string, string>;
        setOwnerHeader(services, res, params.stream, params.group);
        watch?.wait(requestedWaitMs(input));
        if (ctx.audited && spec.method !== 'get') await services.coordinator.assertWritable();
        const result = await spec.handler(input);
        await send(services, req, res, result);
      } catch (error) {
        // From here the forwarder answers, within its own limits, or the error is.
        watch?.done();
        // Another replica owns the group: its answer is passed on (audited here, once).
        const forwarded = await forwardMoved(services, req, res, error, {
          requestId: ctx.requestId,
          body: ctx.rawBody,
          beforeResponse: (status) => auditOnce(services, req, res, status),
        });
        // A scoped caller is not told the names of groups outside its token.
        if (!forwarded) await sendError(services, req, res, withinScope(error, ctx.principal));
      } finally {
        watch?.done();
      }
    });
  }

  mountUi(app);

  app.use(async (req: Request, res: Response) => {
    await sendError(
      services,
      req,
      res,
      new CoordinatorError('NOT_FOUND', `no route for ${req.method} ${req.path}`),
    );
  });
  app.use(async (error: unknown, req: Request, res: Response, _next: NextFunction) => {
    await sendError(services, req, res, error);
  });
  return app;
}
