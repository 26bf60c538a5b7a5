/**
 * How long `work` takes to settle, in milliseconds; fails (rejects) once `limitMs` passed
 * without it, so a hang fails the test at once and says what hung.
 */
export async function timed(
  work: Promise<unknown>,
  limitMs: number,
  what: string,
): Promise<number> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not finish within ${limitMs} ms`)),
      limitMs,
    );
  });
  try {
    await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
  return Date.now() - started;
}
