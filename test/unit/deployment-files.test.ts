import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { envName, loadSettings, SETTING_NAMES } from '../../src/config/load.js';
import { allRoutes } from '../../src/http/routes/index.js';
import { COORDINATOR_NODE_FLAGS } from '../../src/node-flags.js';

interface Service {
  image?: string;
  healthcheck?: { test?: string[] };
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  stop_grace_period?: string;
}

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** The paths the coordinator serves to GET without a token (what a probe can ask). */
const OPEN_PATHS = new Set(
  allRoutes(loadSettings({ env: {} }), 'test')
    .filter((route) => route.method === 'get' && route.roles === null)
    .map((route) => route.path),
);

/** The coordinator path a health check command fetches. */
function probedPath(command: string): string | undefined {
  return /fetch\('http:\/\/127\.0\.0\.1:8080(\/[^']*)'\)/.exec(command)?.[1];
}

/** No Docker engine runs here: check what can be checked of docker-compose.yml without one. */
describe('docker-compose.yml', () => {
  // Compose merges `<<: *anchor` keys; so does the yaml package with `merge`.
  const compose = parse(read('docker-compose.yml'), { merge: true }) as {
    services: Record<string, Service>;
  };
  const coordinators = Object.entries(compose.services).filter(([, s]) => s.build === '.');
  const known = new Set(SETTING_NAMES.map(envName));

  it('runs Redis with persistence on', () => {
    const command = compose.services.redis?.command ?? [];
    expect(command.join(' ')).toMatch(/--appendonly yes/);
    expect(command).toContain('--save');
  });

  it('runs three coordinator replicas', () => {
    expect(coordinators.map(([name]) => name)).toEqual([
      'coordinator-1',
      'coordinator-2',
      'coordinator-3',
    ]);
  });

  it.each(coordinators)(
    '%s is configured only with settings that exist, on the shared Redis, with a JWT secret',
    (_, service) => {
      const environment = service.environment ?? {};
      for (const name of Object.keys(environment)) expect(known, name).toContain(name);
      expect(environment).toHaveProperty('COORDINATOR_SECURITY_JWT_SECRET');
      expect(environment.COORDINATOR_STORE_TYPE).toBe('redis');
      expect(environment.COORDINATOR_STORE_URL).toBe('redis://redis:6379');
      expect(service.depends_on?.redis?.condition).toBe('service_healthy');
    },
  );

  it('each replica has its own id and advertises the URL the others reach it at', () => {
    for (const [name, service] of coordinators) {
      const environment = service.environment ?? {};
      expect(environment.COORDINATOR_REPLICA_ID, name).toBe(name);
      const port = environment.COORDINATOR_HTTP_PORT ?? '8080';
      expect(environment.COORDINATOR_HTTP_ADVERTISED_URL, name).toBe(`http://${name}:${port}`);
    }
  });

  it('the replicas share one store, key prefix, JWT secret and lease TTL', () => {
    const shared = [
      'COORDINATOR_STORE_URL',
      'COORDINATOR_STORE_KEY_PREFIX',
      'COORDINATOR_SECURITY_JWT_SECRET',
      'COORDINATOR_LEASE_TTL',
    ];
    for (const name of shared) {
      const values = new Set(coordinators.map(([, s]) => s.environment?.[name]));
      expect(values.size, name).toBe(1);
    }
  });

  it('a SIGTERMed replica has time to hand its groups over before it is killed', () => {
    for (const [name, service] of coordinators) {
      expect(Number.parseInt(service.stop_grace_period ?? '10s', 10), name).toBeGreaterThanOrEqual(
        20,
      );
    }
  });

  it('each replica’s health check is readiness, a path served without a token', () => {
    for (const [name, service] of coordinators) {
      const path = probedPath((service.healthcheck?.test ?? []).join(' '));
      expect(path, name).toBe('/coord/v1/monitoring/health/ready');
      expect(OPEN_PATHS, name).toContain(path);
    }
  });

  it('publishes one port, the proxy’s, whose configuration names the three replicas', () => {
    const published = Object.entries(compose.services).filter(([, s]) => s.ports?.length);
    expect(published.map(([name]) => name)).toEqual(['proxy']);
    const proxy = compose.services.proxy!;
    expect(proxy.ports).toEqual(['8080:8080']);
    const mount = proxy.volumes?.find((v) => v.endsWith(':/etc/nginx/nginx.conf:ro'));
    expect(mount).toBeDefined();
    const config = read(mount!.split(':')[0]!.replace(/^\.\//, ''));
    const upstreams = [...config.matchAll(/^\s*server\s+([\w.-]+):(\d+)/gm)].map(
      (m) => `${m[1]}:${m[2]}`,
    );
    expect(upstreams).toEqual(
      coordinators.map(([name, s]) => `${name}:${s.environment?.COORDINATOR_HTTP_PORT ?? '8080'}`),
    );
    expect(config).toMatch(/listen 8080;/);
    // Event streams and long polls pass through unbuffered and stay open.
    expect(config).toMatch(/proxy_buffering off;/);
    for (const [name] of coordinators) {
      expect(proxy.depends_on?.[name]?.condition, name).toBe('service_healthy');
    }
  });

  it('builds the image from the Dockerfile that starts dist/main.js with the coordinator’s V8 flags', () => {
    const cmd = ['node', ...COORDINATOR_NODE_FLAGS, 'dist/main.js'].map((arg) => `"${arg}"`);
    expect(read('Dockerfile')).toContain(`CMD [${cmd.join(', ')}]`);
  });

  it('the image’s HEALTHCHECK is liveness, a path served without a token', () => {
    const line = read('Dockerfile')
      .split('\n')
      .find((l) => l.startsWith('HEALTHCHECK '));
    const path = probedPath(line ?? '');
    expect(path).toBe('/coord/v1/monitoring/health/live');
    expect(OPEN_PATHS).toContain(path);
  });

  it('npm start runs dist/main.js with the same V8 flags as the image', () => {
    const { scripts } = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(scripts.start).toContain(`node ${COORDINATOR_NODE_FLAGS.join(' ')} dist/main.js`);
  });
});
