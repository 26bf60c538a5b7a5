import { Option, type Command } from 'commander';
import type { ChangeMeta } from '../client/index.js';

/** Adds the audited `--requested-by` and `--reason` every change needs. */
export function changeOptions(command: Command): Command {
  return command
    .addOption(
      new Option('--requested-by <who>', 'recorded in the audit log')
        .env('COORDCTL_REQUESTED_BY')
        .makeOptionMandatory(),
    )
    .addOption(new Option('--reason <why>', 'recorded in the audit log').makeOptionMandatory());
}

/** `requestedBy` and `reason` from the flags. */
export function changeOf(flags: { requestedBy: string; reason: string }): ChangeMeta {
  return { requestedBy: flags.requestedBy, reason: flags.reason };
}
