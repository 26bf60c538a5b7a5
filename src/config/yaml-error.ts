import { YAMLError } from 'yaml';

/**
 * Why a YAML file could not be read, without the lines of it that the parser quotes: a config
 * or users file holds the JWT secret and password hashes, which never reach a log
 * (docs/operations.md#logs). A parse error keeps its reason and position
 * (`… at line 6, column 1`); any other error (a file not found) its message.
 */
export function yamlErrorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (!(error instanceof YAMLError)) return error.message;
  const reason = error.message.split('\n')[0]?.replace(/:$/, '') ?? error.code;
  const at = error.linePos?.[0];
  return at && !reason.includes(' at line ')
    ? `${reason} at line ${at.line}, column ${at.col}`
    : reason;
}
