import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { envName, SETTING_NAMES } from '../../src/config/load.js';

/** No Docker engine runs here: check what can be checked of docker-compose.yml without one. */
describe('docker-compose.yml', () => {
  const compose = parse(
    readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8'),
  ) as {
    services: Record<
      string,
      { command?: string[]; environment?: Record<string, string>; build?: string }
    >;
  };

  it('runs Redis with persistence on', () => {
    const command = compose.services.redis?.command ?? [];
    expect(command.join(' ')).toMatch(/--appendonly yes/);
    expect(command).toContain('--save');
  });

  it('configures the coordinator only with settings that exist, including a JWT secret', () => {
    const environment = compose.services.coordinator?.environment ?? {};
    const known = new Set(SETTING_NAMES.map(envName));
    for (const name of Object.keys(environment)) expect(known, name).toContain(name);
    expect(environment).toHaveProperty('COORDINATOR_SECURITY_JWT_SECRET');
    expect(environment.COORDINATOR_STORE_TYPE).toBe('redis');
  });

  it('builds the image from the Dockerfile that starts dist/main.js', () => {
    expect(compose.services.coordinator?.build).toBe('.');
    expect(readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8')).toMatch(
      /CMD \["node", "dist\/main.js"\]/,
    );
  });
});
