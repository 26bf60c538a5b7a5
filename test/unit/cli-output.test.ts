import { CommanderError } from 'commander';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CoordinatorApiError,
  CoordinatorClient,
  CoordinatorUnreachableError,
} from '../../src/client/index.js';
import { CALL_TIMEOUT_MS, CliApi } from '../../src/cli/api.js';
import { CliError } from '../../src/cli/cli-error.js';
import { explainError } from '../../src/cli/explain-error.js';
import { formatSeconds } from '../../src/cli/lag.js';
import { renderFields, renderTable } from '../../src/cli/output.js';
import { readReplicas, replicasTable } from '../../src/cli/replicas.js';
import { RequestError } from '../../src/cli/request-error.js';
import { statechartTable } from '../../src/cli/statechart.js';

describe('tables', () => {
  it('aligns columns, upper-cases headers, prints - for nothing and joins lists', () => {
    expect(
      renderTable(
        ['shard', 'owner', 'shards'],
        [
          [0, 'm1', [1, 2]],
          [10, null, []],
        ],
      ),
    ).toBe('SHARD  OWNER  SHARDS\n0      m1     1,2\n10     -      -\n');
  });
  it('a value a client chose cannot reach the terminal as control characters', () => {
    // A consumer's clientId with an escape sequence (clear the screen), a newline and a
    // right-to-left override: printed escaped, on one line.
    const table = renderTable(['member', 'client'], [['m1', 'app\u001b[2J\nfake\u202eevil']]);
    expect(table).toBe('MEMBER  CLIENT\nm1      app\\u001b[2J\\u000afake\\u202eevil\n');
    expect(renderFields([['client', '\u0007bell']])).toBe('client:  \\u0007bell\n');
  });
  it('fields align their values', () => {
    expect(
      renderFields([
        ['status', 'ACTIVE'],
        ['shard count', 4],
      ]),
    ).toBe('status:       ACTIVE\nshard count:  4\n');
  });
  it('the statechart shows each region and, when reported, each member', () => {
    expect(
      statechartTable({
        value: { lifecycle: 'active', membership: { rebalancing: 'revoking' }, migration: 'idle' },
        mermaid: '',
        members: [{ memberId: 'm1', value: 'revoking' }],
      }),
    ).toBe(
      'REGION      STATE\nlifecycle   active\nmembership  rebalancing.revoking\nmigration   idle\n\nMEMBER  STATE\nm1      revoking\n',
    );
  });
  it('replicas: id, URL, groups owned, oldest lease', () => {
    expect(
      replicasTable({
        replicas: [
          {
            replicaId: 'r1',
            advertisedUrl: 'http://a:8080',
            groupsOwned: ['x:g', 'y:g'],
            leases: [{ ageMs: 1500 }, { ageMs: 4200 }],
          },
        ],
      }),
    ).toMatch(
      /^REPLICA\s+URL\s+GROUPS OWNED\s+OLDEST LEASE\s+LAST SEEN\nr1\s+http:\/\/a:8080\s+2\s+4s\s+-\n$/,
    );
  });
});

describe('errors say what failed and what to do', () => {
  const url = 'http://coord:8080/coord/v1/admin/streams/orders/groups/billing/scale';
  const api = (status: number, code: string) =>
    new RequestError('POST', url, new CoordinatorApiError(status, code, 'refused', 'req-1'));

  it('an API error: method, URL, status, code, message, request id, and advice naming the group', () => {
    expect(explainError(api(409, 'MIGRATION_IN_PROGRESS'))).toEqual({
      exitCode: 1,
      message: `POST ${url} failed: 409 MIGRATION_IN_PROGRESS: refused (request id req-1)\n  what to do: wait for it (\`coordctl migrations orders:billing\`) or roll it back (\`coordctl rollback orders:billing\`)`,
    });
  });
  it('a code without its own advice gets advice by status', () => {
    expect(explainError(api(503, 'SOMETHING_NEW')).message).toMatch(
      /what to do: .*try again shortly/,
    );
  });
  it('a refused connection names the URL, the cause and the setting to check', () => {
    const cause = new TypeError('fetch failed', {
      cause: Object.assign(new Error('x'), { code: 'ECONNREFUSED' }),
    });
    const url = 'http://h:1/coord/v1/monitoring/groups';
    const unreachable = CoordinatorUnreachableError.fromFetchError(url, cause, 30_000);
    expect(explainError(new RequestError('GET', url, unreachable)).message).toBe(
      `cannot reach the coordinator at ${url}: ECONNREFUSED\n  what to do: check that the coordinator runs and that --coordinator (or COORDCTL_URL) points at it`,
    );
  });
  it('exit codes: CliError carries its own; commander usage errors keep theirs and print nothing more', () => {
    expect(explainError(new CliError('x', 3))).toEqual({ message: 'x', exitCode: 3 });
    expect(
      explainError(new CommanderError(1, 'commander.missingMandatoryOptionValue', 'e')),
    ).toEqual({
      message: null,
      exitCode: 1,
    });
  });
  it('replicas on a coordinator without the listing (404) says so and what to do', async () => {
    const cliApi = new CliApi(new CoordinatorClient({ url: 'http://h:1' }), 'http://h:1/');
    cliApi.get = () =>
      Promise.reject(
        new RequestError(
          'GET',
          'http://h:1/coord/v1/monitoring/replicas',
          new CoordinatorApiError(404, 'NOT_FOUND', 'no route', null),
        ),
      );
    await expect(readReplicas(cliApi)).rejects.toThrow(
      /GET http:\/\/h:1\/coord\/v1\/monitoring\/replicas answered 404: this coordinator has no replica listing[\s\S]*what to do: upgrade the coordinator/,
    );
  });
});

describe('durations in lag tables', () => {
  it('rounds before choosing the unit: just under a minute reads as a minute', () => {
    expect(formatSeconds(null)).toBe('-');
    expect(formatSeconds(0)).toBe('0s');
    expect(formatSeconds(12.34)).toBe('12.3s');
    expect(formatSeconds(59.94)).toBe('59.9s');
    expect(formatSeconds(59.96)).toBe('1m0s');
    expect(formatSeconds(61.4)).toBe('1m1s');
    expect(formatSeconds(3599.6)).toBe('1h0m');
    expect(formatSeconds(7322)).toBe('2h2m');
  });
});

describe('a change sent again under its request id', () => {
  afterEach(() => vi.restoreAllMocks());

  it('shares one call timeout over its attempts: a replica that never answers is waited for once', async () => {
    const client = new CoordinatorClient({ url: 'http://h:1' });
    let now = 1_000_000;
    vi.spyOn(Date, 'now').mockImplementation(() => now);
    const waits: number[] = [];
    // Each attempt waits out its whole timeout, as against a replica that took the connection.
    client.request = (_m: string, _p: string, _b: unknown, options?: { timeoutMs?: number }) => {
      const waited = options?.timeoutMs ?? CALL_TIMEOUT_MS;
      waits.push(waited);
      now += waited;
      return Promise.reject(new CoordinatorUnreachableError('http://h:1/', 'no answer'));
    };
    const cliApi = new CliApi(client, 'http://h:1/');
    await expect(
      cliApi.adminOnce({ streamPrefix: 'sp', consumerGroup: 'cg' }, '/positions', {}, 'r-1'),
    ).rejects.toBeInstanceOf(RequestError);
    expect(waits.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(CALL_TIMEOUT_MS);
  });

  it('is sent again after no answer while time is left', async () => {
    const client = new CoordinatorClient({ url: 'http://h:1' });
    let calls = 0;
    client.request = (() => {
      calls++;
      return calls < 2
        ? Promise.reject(new CoordinatorUnreachableError('http://h:1/', 'ECONNREFUSED'))
        : Promise.resolve({ ok: true });
    }) as typeof client.request;
    const cliApi = new CliApi(client, 'http://h:1/');
    expect(
      await cliApi.adminOnce({ streamPrefix: 'sp', consumerGroup: 'cg' }, '/positions', {}, 'r-1', {
        pauseMs: 1,
      }),
    ).toEqual({ ok: true });
    expect(calls).toBe(2);
  });
});
