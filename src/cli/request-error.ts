/** A request of the CLI that failed: which one, and why (`cause`). */
export class RequestError extends Error {
  override readonly name = 'RequestError';
  constructor(
    readonly method: string,
    readonly url: string,
    override readonly cause: unknown,
  ) {
    super(`${method} ${url} failed`, { cause });
  }
}
