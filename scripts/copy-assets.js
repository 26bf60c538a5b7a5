// Copies non-TypeScript runtime assets (Lua scripts, the web UI) next to the compiled code.
import { cpSync, existsSync, writeFileSync } from 'node:fs';

const assets = [
  ['src/store/lua', 'dist/store/lua'],
  ['src/streams/lua', 'dist/streams/lua'],
  ['src/ui', 'dist/ui'],
  ['node_modules/mermaid/dist/mermaid.min.js', 'dist/ui/vendor/mermaid.min.js'],
];
for (const [from, to] of assets) {
  if (existsSync(from)) cpSync(from, to, { recursive: true });
}

// Marks when this build finished: the test setup rebuilds only when a file in src/ is newer.
writeFileSync('dist/.built-at', `${new Date().toISOString()}\n`);
