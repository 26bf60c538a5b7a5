import express, { type NextFunction, type Request, type Response } from 'express';
import { CoordinatorError } from '../errors.js';
import { authenticate, createPassport } from './auth/passport.js';
import { requestContext } from './request-context.js';
import { bodyMiddleware, requestIdMiddleware, send, sendError } from './pipeline.js';
import { validate, type RouteSpec } from './route.js';
import type { Services } from './services.js';

/**
 * The express app: request id → per route (identify → body → authenticate → authorise →
 * validate → handler) → response (audited on admin routes). Every error leaves as DESIGN.md §9's shape.
 */
export function createApp(
  services: Services,
  routes: readonly RouteSpec[],
  jwtSecret: string,
): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.set('query parser', 'simple');
  const passport = createPassport(jwtSecret);

  app.use(requestIdMiddleware(services));
  const body = bodyMiddleware(services.settings.limits['max-body-bytes']);

  for (const spec of routes) {
    // The route is known before the body is read, so even a request refused for its body
    // (413, 415, bad JSON) is audited with its operation and group.
    const identify = (req: Request, res: Response, next: NextFunction): void => {
      const ctx = requestContext(res);
      ctx.operation = spec.operation ?? null;
      const params = req.params as Record<string, string>;
      if (params.stream !== undefined) ctx.streamPrefix = params.stream.slice(0, 512);
      if (params.group !== undefined) ctx.consumerGroup = params.group.slice(0, 512);
      next();
    };
    app[spec.method](spec.path, identify, ...body, async (req: Request, res: Response) => {
      const ctx = requestContext(res);
      try {
        let principal = null;
        if (spec.roles) {
          principal = await authenticate(passport, req, res);
          ctx.principal = principal;
          const granted = principal.roles;
          if (!spec.roles.some((role) => granted.includes(role))) {
            throw new CoordinatorError(
              'FORBIDDEN',
              `this call needs one of the roles ${spec.roles.join(', ')}`,
            );
          }
        }
        const input = {
          params: spec.params ? validate(spec.params, req.params, 'path') : req.params,
          body: spec.body ? validate(spec.body, ctx.body ?? {}, 'body') : ctx.body,
          query: spec.query ? validate(spec.query, req.query, 'query') : req.query,
          principal,
          requestId: ctx.requestId,
          req,
          res,
          services,
        };
        if (ctx.audited && spec.method !== 'get') await services.coordinator.assertWritable();
        const result = await spec.handler(input);
        await send(services, req, res, result);
      } catch (error) {
        await sendError(services, req, res, error);
      }
    });
  }

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
