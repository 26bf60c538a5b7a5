import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { envName, loadSettings, SettingsError } from '../../src/config/load.js';
import { parseDuration } from '../../src/config/duration.js';

describe('settings: defaults < YAML file < environment', () => {
  it('has the documented defaults', () => {
    const s = loadSettings({ env: {} });
    expect(s.http.port).toBe(8080);
    expect(s.store).toMatchObject({
      type: 'memory',
      'key-prefix': 'redis-stream:coord',
      'verify-interval': 5000,
    });
    expect(s.security['token-ttl']).toBe(7 * 24 * 3600 * 1000);
    expect(s.limits['max-shard-count']).toBe(1024);
    expect(s.limits['max-members-per-group']).toBe(10_000);
    expect(s.fairness['busy-share']).toBe(0.15);
  });

  it('reads a YAML file and lets the environment win over it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'coord-settings-'));
    const file = join(dir, 'c.yaml');
    writeFileSync(
      file,
      'coordinator:\n  http:\n    port: 9000\n  store:\n    key-prefix: from-file\n  membership:\n    session-timeout: 20s\n',
    );
    const s = loadSettings({
      configFile: file,
      env: { [envName('store.key-prefix')]: 'from-env' },
    });
    expect(s.http.port).toBe(9000);
    expect(s.store['key-prefix']).toBe('from-env');
    expect(s.membership['session-timeout']).toBe(20_000);
  });

  it('maps dotted names to env names', () => {
    expect(envName('store.key-prefix')).toBe('COORDINATOR_STORE_KEY_PREFIX');
    expect(envName('coordination-version.min')).toBe('COORDINATOR_COORDINATION_VERSION_MIN');
  });

  it.each([
    ['http.port', 'abc'],
    ['store.type', 'mongodb'],
    ['membership.session-timeout', 'soon'],
    ['store.key-prefix', 'bad prefix'],
    ['limits.max-shard-count', '0'],
    ['limits.max-members-per-group', '0'],
    ['fairness.busy-share', '0'],
    ['fairness.busy-share', '0.01'],
    ['fairness.busy-share', '1.5'],
    ['fairness.busy-share', 'half'],
  ])('a bad %s stops startup with a message naming it', (name, value) => {
    expect(() => loadSettings({ env: { [envName(name)]: value } })).toThrow(
      new RegExp(`coordinator\\.${name.replace('.', '\\.')}`),
    );
  });

  it('reads the slow-client timeouts from the environment, with defaults', () => {
    expect(loadSettings({ env: {} }).http).toMatchObject({
      'headers-timeout': 10_000,
      'request-timeout': 30_000,
      'keep-alive-timeout': 5_000,
    });
    const s = loadSettings({
      env: {
        COORDINATOR_HTTP_HEADERS_TIMEOUT: '2s',
        COORDINATOR_HTTP_REQUEST_TIMEOUT: '1m',
        COORDINATOR_HTTP_KEEP_ALIVE_TIMEOUT: '750ms',
      },
    });
    expect(s.http).toMatchObject({
      'headers-timeout': 2_000,
      'request-timeout': 60_000,
      'keep-alive-timeout': 750,
    });
  });

  it('refuses a headers timeout longer than the request timeout, naming both', () => {
    expect(() =>
      loadSettings({
        env: { COORDINATOR_HTTP_HEADERS_TIMEOUT: '1m', COORDINATOR_HTTP_REQUEST_TIMEOUT: '30s' },
      }),
    ).toThrow(
      /coordinator\.http\.headers-timeout: must not exceed coordinator\.http\.request-timeout/,
    );
  });

  it('requires a JWT secret outside embedded mode, and names the setting', () => {
    expect(() => loadSettings({ env: { COORDINATOR_STORE_TYPE: 'redis' } })).toThrow(SettingsError);
    expect(() => loadSettings({ env: { COORDINATOR_STORE_TYPE: 'redis' } })).toThrow(
      /coordinator\.security\.jwt-secret/,
    );
    expect(() =>
      loadSettings({
        env: { COORDINATOR_STORE_TYPE: 'redis', COORDINATOR_SECURITY_JWT_SECRET: 'x'.repeat(32) },
      }),
    ).not.toThrow();
  });

  it('reports an unreadable config file', () => {
    expect(() => loadSettings({ configFile: '/nonexistent/coord.yaml', env: {} })).toThrow(
      /cannot read config file/,
    );
  });
});

describe('durations', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['7d', 604_800_000],
    ['250', 250],
    [1000, 1000],
  ])('%s is %i ms', (input, ms) => expect(parseDuration(input)).toBe(ms));
  it.each(['', 'soon', '5 minutes', '-1s', '1y'])('%j is not a duration', (input) =>
    expect(parseDuration(input)).toBeNull(),
  );
});
