import { readFileSync, readdirSync } from 'node:fs';

/** One Lua script of `src/store/lua/`, ready for ioredis `defineCommand`. */
export interface LuaScript {
  /** The verb the file is named after, e.g. `commitGroup`. */
  readonly name: string;
  /** Undefined for a script of any number of keys (`verbNoun-n.lua`): the caller passes it. */
  readonly numberOfKeys: number | undefined;
  /** Source with every `--- @include "x"` line replaced by `includes/x.lua`. */
  readonly lua: string;
}

/** Next to this module both in `src/` (vitest) and `dist/` (the build copies the folder). */
const LUA_DIR = new URL('./lua/', import.meta.url);
const INCLUDE = /^--- @include "([A-Za-z0-9_-]+)"\s*$/gm;
const SCRIPT_FILE = /^([A-Za-z]+)-(\d+|n)\.lua$/;

function readInclude(name: string): string {
  return readFileSync(new URL(`includes/${name}.lua`, LUA_DIR), 'utf8');
}

/**
 * Reads every `verbNoun-<numberOfKeys>.lua` script. Includes are expanded here rather than with
 * Lua `require` (which Redis does not offer) so shared checks are written once.
 */
export function loadLuaScripts(): LuaScript[] {
  return readdirSync(LUA_DIR)
    .map((file) => SCRIPT_FILE.exec(file))
    .filter((match): match is RegExpExecArray => match !== null)
    .map(([file, name = '', keys = '0']) => ({
      name,
      numberOfKeys: keys === 'n' ? undefined : Number(keys),
      lua: readFileSync(new URL(file, LUA_DIR), 'utf8').replace(INCLUDE, (_line, include: string) =>
        readInclude(include),
      ),
    }));
}

/** One script of `src/store/lua/` by its verb, e.g. `renewLeases`. */
export function luaScript(name: string): LuaScript {
  const script = loadLuaScripts().find((s) => s.name === name);
  if (!script) throw new Error(`no Lua script ${name} in src/store/lua`);
  return script;
}
