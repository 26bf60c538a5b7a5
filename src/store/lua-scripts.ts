import { readFileSync, readdirSync } from 'node:fs';

/** One Lua script of `src/store/lua/`, ready for ioredis `defineCommand`. */
export interface LuaScript {
  /** The verb the file is named after, e.g. `commitGroup`. */
  readonly name: string;
  /** Undefined for a script of any number of keys (`verbNoun-n.lua`): the caller passes it. */
  readonly numberOfKeys: number | undefined;
  /** Source with every `--- @include "x"` line replaced by `includes/x.lua` (see {@link readLua}). */
  readonly lua: string;
}

/** Next to this module both in `src/` (vitest) and `dist/` (the build copies the folder). */
const LUA_DIR = new URL('./lua/', import.meta.url);
const INCLUDE = /^--- @include "([A-Za-z0-9_-]+)"\s*$/gm;
const SCRIPT_FILE = /^([A-Za-z]+)-(\d+|n)\.lua$/;

/**
 * The source of the Lua script `file` with every `--- @include "x"` line replaced by
 * `includes/x.lua` of the script's own folder: for the store's scripts (`src/store/lua/`) and
 * the streams' (`src/streams/lua/`) alike. Expanded here rather than with Lua `require` (which
 * Redis does not offer) so shared code is written once.
 */
export function readLua(file: URL): string {
  return readFileSync(file, 'utf8').replace(INCLUDE, (_line, include: string) =>
    readFileSync(new URL(`includes/${include}.lua`, file), 'utf8'),
  );
}

/** Reads every `verbNoun-<numberOfKeys>.lua` script of `src/store/lua/`, includes expanded. */
export function loadLuaScripts(): LuaScript[] {
  return readdirSync(LUA_DIR)
    .map((file) => SCRIPT_FILE.exec(file))
    .filter((match): match is RegExpExecArray => match !== null)
    .map(([file, name = '', keys = '0']) => ({
      name,
      numberOfKeys: keys === 'n' ? undefined : Number(keys),
      lua: readLua(new URL(file, LUA_DIR)),
    }));
}

/** One script of `src/store/lua/` by its verb, e.g. `renewLeases`. */
export function luaScript(name: string): LuaScript {
  const script = loadLuaScripts().find((s) => s.name === name);
  if (!script) throw new Error(`no Lua script ${name} in src/store/lua`);
  return script;
}
