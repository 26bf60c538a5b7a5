import { CoordinatorApiError } from '../client/index.js';
import { buildProgram, CliError } from './program.js';

try {
  await buildProgram().parseAsync(process.argv);
} catch (error) {
  const message =
    error instanceof CoordinatorApiError
      ? `${error.code} (HTTP ${error.status}): ${error.message}`
      : error instanceof Error
        ? error.message
        : String(error);
  process.stderr.write(`coordctl: ${message}\n`);
  process.exit(error instanceof CliError ? error.exitCode : 1);
}
