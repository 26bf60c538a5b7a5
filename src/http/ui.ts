import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type Express } from 'express';

/** Where the web UI is served from. */
export const UI_PATH = '/coord/ui';

/** The web UI's files: `dist/ui` after `npm run build`, `src/ui` when running from source. */
const UI_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', 'ui');

/**
 * mermaid: copied into `dist/ui/vendor` by the build, or taken from node_modules when running
 * from source (tests, tsx). Looked up on first request, so a missing file is a 404 for the
 * diagram, not a failed start.
 */
function mermaidFile(): string {
  const bundled = join(UI_ROOT, 'vendor', 'mermaid.min.js');
  return existsSync(bundled)
    ? bundled
    : createRequire(import.meta.url).resolve('mermaid/dist/mermaid.min.js');
}

/**
 * Mounts the static web UI at `/coord/ui/`. The files hold no data: every figure they show is
 * fetched from the API with the operator's token, so they need no token themselves.
 */
export function mountUi(app: Express): void {
  const headers = (res: express.Response) => {
    // Mermaid styles its SVG inline; nothing else is allowed from anywhere but here.
    res.setHeader(
      'Content-Security-Policy',
      "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
    );
    res.setHeader('X-Content-Type-Options', 'nosniff');
  };
  app.get(UI_PATH, (req, res, next) => {
    // Without `strict routing` this also matches `/coord/ui/`, which must not redirect to itself.
    if (req.originalUrl.split('?')[0] !== UI_PATH) return next();
    res.redirect(301, `${UI_PATH}/`);
  });
  let mermaid: string | null = null;
  app.get(`${UI_PATH}/vendor/mermaid.min.js`, (_req, res, next) => {
    try {
      mermaid ??= mermaidFile();
    } catch {
      return next(); // not installed: the 404 handler answers
    }
    headers(res);
    res.sendFile(mermaid, { maxAge: '1h' });
  });
  app.use(
    UI_PATH,
    express.static(UI_ROOT, {
      index: 'index.html',
      redirect: false,
      setHeaders: headers,
      fallthrough: true,
    }),
  );
}
