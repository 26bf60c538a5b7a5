import { explainError } from './explain-error.js';
import { buildProgram } from './program.js';

try {
  await buildProgram().parseAsync(process.argv);
} catch (error) {
  const { message, exitCode } = explainError(error);
  if (message) process.stderr.write(`coordctl: ${message}\n`);
  process.exit(exitCode);
}
