import { parse } from 'yaml';
import { z } from 'zod';
import { MAX_SHARD_COUNT_LIMIT } from '../../config/settings.js';
import { consumerGroupSchema, streamPrefixSchema } from '../../http/schemas.js';

/**
 * The GitOps desired-state file: the groups that should exist, with their shard counts, and
 * the `requestedBy`/`reason` every change made from it is audited with.
 */
export const desiredStateSchema = z
  .object({
    // Blank is missing: the coordinator refuses a change whose requestedBy or reason is blank.
    requestedBy: z.string().trim().min(1).max(200),
    reason: z.string().trim().min(1).max(1000),
    // Required, `[]` included: a file that lost its list (or never had one) would otherwise ask
    // `apply --prune` to delete every group.
    groups: z.array(
      z
        .object({
          streamPrefix: streamPrefixSchema,
          consumerGroup: consumerGroupSchema,
          // No coordinator takes more (its limits.max-shard-count is at most this): a count
          // above it is an error in the file, found before anything is sent.
          shardCount: z
            .number()
            .int()
            .min(1)
            .max(
              MAX_SHARD_COUNT_LIMIT,
              `must be at most ${MAX_SHARD_COUNT_LIMIT} (no coordinator takes more)`,
            ),
          /** Where a group the file creates starts reading (docs/protocol.md#start-position). */
          startAt: z.enum(['earliest', 'latest']).optional(),
        })
        .strict(),
    ),
  })
  .strict()
  .superRefine((state, ctx) => {
    const seen = new Set<string>();
    // Every group on a stream prefix reads the same shards (docs/protocol.md#one-shard-layout-per-stream-prefix).
    const prefixCount = new Map<string, { count: number; group: string }>();
    for (const [i, g] of state.groups.entries()) {
      const key = `${g.streamPrefix}:${g.consumerGroup}`;
      if (seen.has(key))
        ctx.addIssue({ code: 'custom', path: ['groups', i], message: `${key} is listed twice` });
      seen.add(key);
      const first = prefixCount.get(g.streamPrefix);
      if (!first) prefixCount.set(g.streamPrefix, { count: g.shardCount, group: key });
      else if (first.count !== g.shardCount) {
        ctx.addIssue({
          code: 'custom',
          path: ['groups', i, 'shardCount'],
          message: `${g.shardCount} differs from ${first.group} (${first.count}): every group on stream prefix ${g.streamPrefix} has the same shard count`,
        });
      }
    }
  });

export type DesiredState = z.infer<typeof desiredStateSchema>;
export type DesiredGroup = DesiredState['groups'][number];

/** Parses the file's text (YAML or JSON); the error names every problem with its path. */
export function parseDesiredState(text: string, source: string): DesiredState {
  let value: unknown;
  try {
    value = parse(text);
  } catch (error) {
    throw new Error(`${source} is not valid YAML: ${(error as Error).message}`, { cause: error });
  }
  const result = desiredStateSchema.safeParse(value);
  if (!result.success) {
    const problems = result.error.issues.map(
      (issue) => `${issue.path.length ? issue.path.join('.') : '(top level)'}: ${issue.message}`,
    );
    throw new Error(`${source} is not a valid desired-state file:\n  ${problems.join('\n  ')}`);
  }
  return result.data;
}
