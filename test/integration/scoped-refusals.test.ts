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

  it('MIGRATION_IN_PROGRESS of another group: refused, without its name', async () => {
    // The other group scales in; with no member to read its retiring shard, it stays migrating.
    const scaled = await c.call('POST', `/coord/v1/admin/streams/shared/groups/${THEIRS}/scale`, {
      user: 'writer',
      body: { shardCount: 2, ...CHANGE },
    });
    expect(scaled.status).toBe(202);

    const create = await c.call('POST', '/coord/v1/admin/groups', {
      headers: MINE,
      body: { streamPrefix: 'shared', consumerGroup: 'mine', ...CHANGE },
    });
    expect(create.status).toBe(409);
    const text = await create.text();
    expect(text).not.toContain(THEIRS);
    const { error } = JSON.parse(text) as ErrorBody;
    expect(error.code).toBe('MIGRATION_IN_PROGRESS');
    expect(error.message).toMatch(/another group on stream prefix shared/);
    expect(error.details).not.toHaveProperty('consumerGroup');
  });
});

/*
 * A scale or rollback moves the prefix's layout, so every group on the prefix migrates with it
 * (docs/protocol.md#one-shard-layout-per-stream-prefix): it is a change to each of them.
 */
describe('a scoped token that does not reach every group on its prefix', () => {
  let c: TestCoordinator;
  useCoordinator({ store: 'memory' }, (coordinator) => (c = coordinator));
  const SPLIT = bearer(['split:mine']);
  const WHOLE = bearer(['split:*']);

  beforeAll(async () => {
    const theirs = await c.call('POST', '/coord/v1/admin/groups', {
      user: 'writer',
      body: { streamPrefix: 'split', consumerGroup: THEIRS, shardCount: 4, ...CHANGE },
    });
    expect(theirs.status).toBe(201);
    const mine = await c.call('POST', '/coord/v1/admin/groups', {
      headers: SPLIT,
      body: { streamPrefix: 'split', consumerGroup: 'mine', ...CHANGE },
    });
    expect(mine.status).toBe(201);
  });

  const shardCountOf = async (group: string) => {
    const res = await c.call('GET', `/coord/v1/monitoring/streams/split/groups/${group}`, {
      user: 'reader',
    });
    return ((await res.json()) as { shardCount: number }).shardCount;
  };

  it('may not scale the prefix (which would move the other groups): 403, nothing moves', async () => {
    const scale = await c.call('POST', '/coord/v1/admin/streams/split/groups/mine/scale', {
      headers: SPLIT,
      body: { shardCount: 8, ...CHANGE },
    });
    expect(scale.status).toBe(403);
    const text = await scale.text();
    expect(text).not.toContain(THEIRS);
    expect((JSON.parse(text) as ErrorBody).error.code).toBe('GROUP_NOT_PERMITTED');

    const put = await c.call('PUT', '/coord/v1/admin/streams/split/groups/mine', {
      headers: SPLIT,
      body: { shardCount: 8, ...CHANGE },
    });
    expect(put.status).toBe(403);
    const rollback = await c.call(
      'POST',
      '/coord/v1/admin/streams/split/groups/mine/migrations/current/rollback',
      { headers: SPLIT, body: CHANGE },
    );
    expect(rollback.status).toBe(403);
    expect(await shardCountOf(THEIRS)).toBe(4);
    expect(await shardCountOf('mine')).toBe(4);

    // Leaving the count as it is stays allowed.
    const same = await c.call('PUT', '/coord/v1/admin/streams/split/groups/mine', {
      headers: SPLIT,
      body: { shardCount: 4, ...CHANGE },
    });
    expect(same.status).toBe(200);
  });

  it('a token that reaches every group on the prefix scales it', async () => {
    const scale = await c.call('POST', '/coord/v1/admin/streams/split/groups/mine/scale', {
      headers: WHOLE,
      body: { shardCount: 8, ...CHANGE },
    });
    expect(scale.status).toBe(202);
    expect(await shardCountOf('mine')).toBe(8);
  });
});
