import {
  randomBytes,
  scrypt as scryptCallback,
  timingSafeEqual,
  type ScryptOptions,
} from 'node:crypto';

const PARAMS = { N: 16384, r: 8, p: 1, keylen: 64 };
const SALT_BYTES = 16;
const MAXMEM = 64 * 1024 * 1024;

/** Derives a key (`node:crypto`'s scrypt as a promise); replaceable to watch what is run. */
export type ScryptFunction = (
  password: string,
  salt: Buffer,
  keylen: number,
  options: ScryptOptions,
) => Promise<Buffer>;

export const scrypt: ScryptFunction = (password, salt, keylen, options) =>
  new Promise((resolve, reject) => {
    scryptCallback(password, salt, keylen, { ...options, maxmem: MAXMEM }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });

/** A stored hash taken apart: its cost parameters, salt and key. */
export interface ParsedHash {
  readonly N: number;
  readonly r: number;
  readonly p: number;
  readonly salt: Buffer;
  readonly key: Buffer;
}

/** `scrypt$N$r$p$<salt b64>$<hash b64>`: self-describing, so parameters can be raised later. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await scrypt(password, salt, PARAMS.keylen, PARAMS);
  return formatHash({ ...PARAMS, salt, key });
}

function formatHash(hash: ParsedHash): string {
  return [
    'scrypt',
    hash.N,
    hash.r,
    hash.p,
    hash.salt.toString('base64'),
    hash.key.toString('base64'),
  ].join('$');
}

/** The parts of a `hashPassword` result, or null when it is not one. */
export function parseHash(encoded: string): ParsedHash | null {
  const parts = encoded.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null;
  const [, n, r, p, saltB64, hashB64] = parts as [string, string, string, string, string, string];
  const [N, R, P] = [n, r, p].map((text) => (/^\d{1,10}$/.test(text) ? Number(text) : NaN)) as [
    number,
    number,
    number,
  ];
  const key = Buffer.from(hashB64, 'base64');
  if (!(N > 1 && R > 0 && P > 0) || key.length === 0) return null;
  return { N, r: R, p: P, salt: Buffer.from(saltB64, 'base64'), key };
}

/** Whether scrypt accepts the parameters of `hash` (N a power of two, within its memory limit). */
export function usableParams(hash: Pick<ParsedHash, 'N' | 'r' | 'p'>): boolean {
  const { N, r, p } = hash;
  return (
    Number.isSafeInteger(N) &&
    (N & (N - 1)) === 0 &&
    r * p < 2 ** 30 &&
    128 * N * r + 128 * r * p <= MAXMEM
  );
}

/**
 * A hash no password matches, with the cost of `like` (the default parameters when absent): a
 * check against it does the work of a check against a real hash with those parameters.
 */
export function decoyHash(like?: Pick<ParsedHash, 'N' | 'r' | 'p' | 'salt' | 'key'>): ParsedHash {
  return {
    N: like?.N ?? PARAMS.N,
    r: like?.r ?? PARAMS.r,
    p: like?.p ?? PARAMS.p,
    salt: randomBytes(like?.salt.length ?? SALT_BYTES),
    key: randomBytes(like?.key.length ?? PARAMS.keylen),
  };
}

/**
 * Constant-time check of a password against a parsed hash: true or false, or null when its
 * parameters cannot be used (scrypt refused them, so no work was done).
 */
export async function checkPassword(
  password: string,
  hash: ParsedHash,
  derive: ScryptFunction = scrypt,
): Promise<boolean | null> {
  let key: Buffer;
  try {
    key = await derive(password, hash.salt, hash.key.length, { N: hash.N, r: hash.r, p: hash.p });
  } catch {
    return null;
  }
  return timingSafeEqual(key, hash.key);
}

/** Constant-time check of a password against a `hashPassword` result; false for malformed hashes. */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const hash = parseHash(encoded);
  return hash !== null && (await checkPassword(password, hash)) === true;
}
