import { randomUUID } from 'node:crypto';
import { CoordinatorError } from '../errors.js';
import type { GroupContext } from '../machines/context.js';
import type { GroupEvent } from './group-entry.js';
import type { AdminCommand } from './types.js';

/** The machine event of an admin command at `now` (new migrations get their ids here). */
export function commandEvent(command: AdminCommand, now: number): GroupEvent {
  if (command.type === 'SCALE') return { ...command, now, migrationId: randomUUID() };
  if (command.type === 'ROLLBACK') return { ...command, now, newMigrationId: randomUUID() };
  return { ...command, now };
}

/** The machine's reply to the last event, or its refusal as a typed error. */
export function unwrap(context: GroupContext): unknown {
  const result = context.result;
  if (!result) throw new CoordinatorError('INTERNAL', 'the group actor gave no result');
  if (!result.ok) {
    throw new CoordinatorError(
      result.code,
      result.message,
      result.details ? { details: result.details } : {},
    );
  }
  return result.reply;
}
