import jwt from 'jsonwebtoken';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROLES } from '../../src/http/auth/roles.js';
import {
  CHANGE,
  TEST_SECRET,
  useCoordinator,
  type TestCoordinator,
} from '../support/coordinator.js';

/*
 * A token scoped to one group of a stream prefix is refused for what the other groups on the
 * prefix are (docs/protocol.md#one-shard-layout-per-stream-prefix); the refusal keeps its code
 * and status, but does not name those groups (README.md#tokens-roles-and-group-scopes).
 */

const now = () => Math.floor(Date.now() / 1000);
function bearer(groups?: string[]): Record<string, string> {
  const token = jwt.sign(
    {
      sub: 'team-mine',
      roles: [...ROLES],
      iat: now(),
      exp: now() + 600,
      ...(groups ? { groups } : {}),
    },
    TEST_SECRET,
    { algorithm: 'HS256', issuer: 'stream-coordinator' },
  );
  return { authorization: `Bearer ${token}` };
}
const MINE = bearer(['shared:mine']);
const EVERY = bearer();
/** The group outside the scoped token, named so that its name cannot appear by chance. */
const THEIRS = 'theirs-hidden-name';

interface ErrorBody {
  error: { code: string; message: string; details?: Record<string, unknown> };
}

describe('refusals caused by other groups on the prefix, to a scoped token', () => {
  let c: TestCoordinator;
  useCoordinator({ store: 'memory' }, (coordinator) => (c = coordinator));

  beforeAll(async () => {
    const res = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'shared', consumerGroup: THEIRS, shardCount: 4, ...CHANGE },
    });
    expect(res.status).toBe(201);
  });

  it('SHARD_COUNT_MISMATCH: the prefix count, without the names of groups outside the token', async () => {
    const create = (headers: Record<string, string>) =>
      c.call('POST', '/coord/v1/admin/groups', {
        headers,
        body: { streamPrefix: 'shared', consumerGroup: 'mine', shardCount: 7, ...CHANGE },
      });
    const scoped = await create(MINE);
    expect(scoped.status).toBe(409);
    const text = await scoped.text();
    expect(text).not.toContain(THEIRS);
    const { error } = JSON.parse(text) as ErrorBody;
    expect(error.code).toBe('SHARD_COUNT_MISMATCH');
    expect(error.message).toContain('has 4 shards');
    expect(error.details).toMatchObject({ streamPrefix: 'shared', shardCount: 4, groups: [] });

    // A token that reaches every group is told which groups hold the count, as before.
    const unscoped = (await (await create(EVERY)).json()) as ErrorBody;
    expect(unscoped.error.details?.groups).toEqual([THEIRS]);
  });

  it('GROUP_FROZEN of another group: refused, without its name', async () => {
    const created = await c.call('POST', '/coord/v1/admin/groups', {
      headers: MINE,
      body: { streamPrefix: 'shared', consumerGroup: 'mine', ...CHANGE },
    });
    expect(created.status).toBe(201);
    const frozen = await c.call('POST', `/coord/v1/admin/streams/shared/groups/${THEIRS}/freeze`, {
      user: 'writer',
      body: CHANGE,
    });
    expect(frozen.status).toBe(200);

    const scale = await c.call('POST', '/coord/v1/admin/streams/shared/groups/mine/scale', {
      headers: MINE,
      body: { shardCount: 8, ...CHANGE },
    });
    expect(scale.status).toBe(409);
    const text = await scale.text();
    expect(text).not.toContain(THEIRS);
    const { error } = JSON.parse(text) as ErrorBody;
    expect(error.code).toBe('GROUP_FROZEN');
    expect(error.message).toMatch(/another group on stream prefix shared/);
    expect(error.details).toEqual({ streamPrefix: 'shared' });
  });
});
