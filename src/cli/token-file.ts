import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/**
 * Where `coordctl login` keeps the token: `--token-file`, else `COORDCTL_TOKEN_FILE`, else
 * `$XDG_CONFIG_HOME/stream-coordinator/token` (XDG_CONFIG_HOME defaults to `~/.config`).
 */
export function tokenFilePath(
  override: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string {
  if (override) return override;
  if (env.COORDCTL_TOKEN_FILE) return env.COORDCTL_TOKEN_FILE;
  const config = env.XDG_CONFIG_HOME || join(homedir(), '.config');
  return join(config, 'stream-coordinator', 'token');
}

/**
 * Writes the token readable by its owner only (0600, directory 0700). The token goes to a new
 * file that is renamed over the old one, so it never sits in a file with wider permissions.
 */
export async function saveToken(path: string, token: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(temporary, `${token}\n`, { mode: 0o600, flag: 'wx' });
    await chmod(temporary, 0o600);
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/** The saved token, or null when there is none. Throws if others may read the file. */
export async function loadToken(path: string): Promise<string | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const { mode } = await stat(path);
  if ((mode & 0o077) !== 0 && process.platform !== 'win32') {
    throw new Error(
      `the token file ${path} may be read by others (mode ${(mode & 0o777).toString(8)}); run \`chmod 600 ${path}\` or log in again`,
    );
  }
  return text.trim() || null;
}

/** Deletes the saved token; true if there was one. */
export async function removeToken(path: string): Promise<boolean> {
  try {
    await rm(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}
