#!/usr/bin/env node
// Thin shim: the CLI lives in src/cli and is compiled to dist/ by `npm run build` (run by npm install).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('coordctl: not built yet; run `npm run build` first\n');
  process.exit(1);
}
await import(entry.href);
