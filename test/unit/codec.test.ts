/**
 * The metadata hash encoding (docs/architecture.md#the-metadata-hash), as far as it must stay
 * readable across versions.
 */
import { describe, expect, it } from 'vitest';
import type { GroupState, MemberRecord, ShardRecord } from '../../src/machines/types.js';
import { PersistentMap } from '../../src/collections/persistent-map.js';
import {
  decodeGroup,
  diffFields,
  diffGroups,
  encodeGroup,
  isEmptyPatch,
  type FieldPatch,
} from '../../src/store/codec.js';
import { makeGroupState } from '../support/fixtures.js';

describe('a member record keeps the principal that joined it', () => {
  it('round-trips the principal, bound or not', () => {
    const state = makeGroupState();
    const decoded = decodeGroup(encodeGroup(state));
    expect(decoded.members.get('m-1')?.principal).toBe('billing-service');
    expect(decoded.members.get('m-2')?.principal).toBeNull();
    expect(decoded).toEqual(state);
  });

  it('loads a member record written before members were bound, as bound to nobody', () => {
    const fields = encodeGroup(makeGroupState());
    const old = JSON.parse(fields['member:m-1'] ?? '{}') as Record<string, unknown>;
    delete old.principal;
    const decoded = decodeGroup({ ...fields, 'member:m-1': JSON.stringify(old) });
    expect(decoded.members.get('m-1')).toMatchObject({ memberId: 'm-1', memberEpoch: 11 });
    expect(decoded.members.get('m-1')?.principal).toBeNull();
  });
});

describe('a write patch encodes only the records whose object changed, and equals the full diff', () => {
  const before = makeGroupState();
  const full = (after: GroupState) => diffFields(encodeGroup(before), encodeGroup(after));
  const sorted = (patch: FieldPatch) => ({ set: patch.set, del: [...patch.del].sort() });

  it('is empty for the same group, and for records copied without a change', () => {
    expect(diffGroups(before, before)).toEqual({ set: {}, del: [] });
    const copied = {
      ...before,
      shards: Object.fromEntries(Object.entries(before.shards).map(([k, r]) => [k, { ...r }])),
      members: PersistentMap.from(
        before.members.entries().map(([k, m]): [string, MemberRecord] => [k, { ...m }]),
      ),
    };
    expect(isEmptyPatch(diffGroups(before, copied))).toBe(true);
  });

  it('compares records field by field: the same values in another key order are no change', () => {
    const reordered = {
      ...before,
      shards: Object.fromEntries(
        Object.entries(before.shards).map(([k, r]) => [
          k,
          Object.fromEntries(Object.entries(r).reverse()) as unknown as ShardRecord,
        ]),
      ),
    };
    expect(encodeGroup(reordered)).not.toEqual(encodeGroup(before));
    expect(isEmptyPatch(diffGroups(before, reordered))).toBe(true);
    // A record whose keys changed is compared by its encoding, even when it has as many keys.
    const { target: _target, ...untargeted } = before.shards[1]!;
    const rekeyed = { ...untargeted, note: undefined } as unknown as ShardRecord;
    const rekeyedPatch = diffGroups(before, {
      ...before,
      shards: { ...before.shards, 1: rekeyed },
    });
    expect(rekeyedPatch.set).toHaveProperty('shard:1');
    const moved = { ...reordered.shards[0]!, target: 'someone-else' };
    expect(
      diffGroups(before, { ...reordered, shards: { ...reordered.shards, 0: moved } }).set,
    ).toEqual({
      'shard:0': JSON.stringify({ ...moved, shard: undefined }),
    });
  });

  it('sets changed and added records and deletes removed ones, as the full diff does', () => {
    const members = before.members
      .delete('m-2')
      .set('m-3', { ...before.members.get('m-1')!, memberId: 'm-3', principal: null })
      .set('m-1', { ...before.members.get('m-1')!, memberEpoch: 99 });
    const shards = { ...before.shards };
    delete shards[3];
    shards[0] = { ...before.shards[0]!, owner: 'm-3', ownerEpoch: 99 };
    const after: GroupState = {
      ...before,
      metadataVersion: before.metadataVersion + 1,
      activeMigration: null,
      shards,
      members,
    };
    const patch = diffGroups(before, after);
    expect(sorted(patch)).toEqual(sorted(full(after)));
    expect(Object.keys(patch.set)).toEqual(
      expect.arrayContaining(['metadataVersion', 'shard:0', 'member:m-1', 'member:m-3']),
    );
  });
});
