import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { isEmbedded, settingsSchema, type Settings } from './settings.js';
import { yamlErrorText } from './yaml-error.js';

/** A setting is missing or bad: startup stops with this message, naming the setting. */
export class SettingsError extends Error {
  override readonly name = 'SettingsError';
}

/** Every leaf setting as its dotted name below `coordinator.`, read from the schema. */
function leafNames(schema: z.ZodType, prefix = ''): string[] {
  let inner: z.ZodType = schema;
  // Unwrap defaults, prefaults, optionals and pipes to find the object shapes.
  for (;;) {
    const def = (
      inner as unknown as { _zod: { def: { type: string; innerType?: z.ZodType; in?: z.ZodType } } }
    )._zod.def;
    if (def.innerType) inner = def.innerType;
    else if (def.type === 'pipe' && def.in) inner = def.in;
    else break;
  }
  if (inner instanceof z.ZodObject) {
    return Object.entries(inner.shape as Record<string, z.ZodType>).flatMap(([key, child]) =>
      leafNames(child, prefix ? `${prefix}.${key}` : key),
    );
  }
  return [prefix];
}

/** `coordinator.store.key-prefix` → `COORDINATOR_STORE_KEY_PREFIX`. */
export function envName(setting: string): string {
  return `coordinator.${setting}`.toUpperCase().replace(/[.-]/g, '_');
}

function setPath(target: Record<string, unknown>, dotted: string, value: unknown): void {
  const parts = dotted.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== 'object' || next === null) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts[parts.length - 1] as string] = value;
}

export interface LoadOptions {
  /** YAML file; default from `COORDINATOR_CONFIG`. */
  readonly configFile?: string | undefined;
  readonly env?: NodeJS.ProcessEnv;
  /** Highest precedence, used by tests and the CLI. */
  readonly overrides?: Readonly<Record<string, unknown>>;
}

/** The names of every setting, dotted below `coordinator.` (for docs and the settings table). */
export const SETTING_NAMES: readonly string[] = leafNames(settingsSchema);

/**
 * Loads settings: defaults < YAML file < environment < overrides. A bad value throws a
 * `SettingsError` naming the setting; outside embedded mode a missing JWT secret does too.
 */
export function loadSettings(options: LoadOptions = {}): Settings {
  const env = options.env ?? process.env;
  const raw: Record<string, unknown> = {};
  const file = options.configFile ?? env.COORDINATOR_CONFIG;
  if (file) {
    let doc: unknown;
    try {
      doc = parseYaml(readFileSync(file, 'utf8'));
    } catch (error) {
      throw new SettingsError(`cannot read config file ${file}: ${yamlErrorText(error)}`, {
        cause: error,
      });
    }
    const root = (doc as { coordinator?: unknown } | null)?.coordinator ?? doc ?? {};
    if (typeof root !== 'object')
      throw new SettingsError(`config file ${file}: expected a mapping under "coordinator"`);
    Object.assign(raw, structuredClone(root));
  }
  for (const name of SETTING_NAMES) {
    const value = env[envName(name)];
    if (value !== undefined && value !== '') setPath(raw, name, value);
  }
  for (const [name, value] of Object.entries(options.overrides ?? {})) {
    setPath(raw, name.replace(/^coordinator\./, ''), value);
  }
  const parsed = settingsSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map(
      (issue) => `coordinator.${issue.path.join('.')}: ${issue.message}`,
    );
    throw new SettingsError(`invalid settings:\n  ${lines.join('\n  ')}`);
  }
  const settings = parsed.data;
  if (!isEmbedded(settings) && !settings.security['jwt-secret']) {
    throw new SettingsError(
      `coordinator.security.jwt-secret is required when coordinator.store.type is ${settings.store.type} ` +
        `(set ${envName('security.jwt-secret')} to a random string of at least 32 characters)`,
    );
  }
  if (settings['coordination-version'].min > settings['coordination-version'].max) {
    throw new SettingsError(
      'coordinator.coordination-version.min must not exceed coordinator.coordination-version.max',
    );
  }
  return settings;
}
