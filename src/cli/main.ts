import { buildProgram, CliError } from './program.js';

try {
  await buildProgram().parseAsync(process.argv);
} catch (error) {
  process.stderr.write(`coordctl: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof CliError ? error.exitCode : 1);
}
