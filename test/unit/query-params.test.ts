import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { loadSettings } from '../../src/config/load.js';
import { CoordinatorError } from '../../src/errors.js';
import { validate } from '../../src/http/route.js';
import { allRoutes } from '../../src/http/routes/index.js';

/*
 * Every query parameter of the API is read one way (src/http/query-params.ts): given twice it is
 * refused naming it; a number is plain decimal digits in range.
 */

const routes = allRoutes(loadSettings({ env: {} }), 'test').filter((spec) => spec.query);

/** A value each parameter accepts, so that one parameter at a time can be spoilt. */
const GOOD: Record<string, string> = {
  limit: '5',
  cursor: 'abc',
  streamPrefix: 'orders',
  consumerGroup: 'billing',
  afterVersion: '5',
  waitMs: '5',
  shards: '5',
  keyField: 'key',
  force: 'true',
};

function refusal(schema: z.ZodType, query: Record<string, unknown>): string | null {
  try {
    validate(schema, query, 'query');
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(CoordinatorError);
    expect((error as CoordinatorError).code).toBe('VALIDATION_FAILED');
    return (error as CoordinatorError).message;
  }
}

/** The parameters of each route with a query, as [route, parameter, schema]. */
const parameters = routes.flatMap((spec) =>
  Object.keys((spec.query as z.ZodObject).shape).map(
    (name) => [`${spec.method.toUpperCase()} ${spec.path}`, name, spec.query!] as const,
  ),
);

describe('query parameters', () => {
  it('finds the routes that read a query', () => {
    expect(parameters.map(([, name]) => name).sort()).toEqual(
      [
        'afterVersion',
        'consumerGroup',
        'cursor',
        'force',
        'keyField',
        'limit',
        'limit',
        'limit',
        'shards',
        'streamPrefix',
        'waitMs',
      ].sort(),
    );
  });

  it.each(parameters)('%s: %s given twice is refused naming it', (_route, name, schema) => {
    const good = GOOD[name];
    expect(good, `a good value for ${name}`).toBeDefined();
    expect(refusal(schema, { [name]: good })).toBeNull();
    expect(refusal(schema, { [name]: [good, good] })).toBe(
      `query.${name}: given more than once: give it once`,
    );
  });

  const numeric = parameters.filter(([, name, schema]) => {
    const parsed = schema.safeParse({ [name]: '5' });
    const read = parsed.success ? (parsed.data as Record<string, unknown>)[name] : undefined;
    return read === 5 || (Array.isArray(read) && read[0] === 5);
  });

  it('knows which are numbers', () => {
    expect(numeric.map(([, name]) => name).sort()).toEqual(
      ['afterVersion', 'limit', 'limit', 'limit', 'shards', 'waitMs'].sort(),
    );
  });

  const spellings = [
    '0x5',
    '5e0',
    '0b101',
    '0o5',
    ' 5',
    '5 ',
    '\t5',
    '5\n',
    '+5',
    '-0',
    '5.0',
    '5.',
    '',
    '٥',
    '５',
    'Infinity',
    '1_0',
    '99999999999999999999',
  ];
  it.each(numeric)('%s: %s is plain decimal digits only', (_route, name, schema) => {
    for (const spelling of spellings) {
      expect(refusal(schema, { [name]: spelling }), JSON.stringify(spelling)).toMatch(
        new RegExp(`^query\\.${name}: `),
      );
    }
  });

  it('reads the numbers it accepts, in range only', () => {
    const [, , groups] = parameters.find(([route]) => route === 'GET /coord/v1/monitoring/groups')!;
    expect(groups.parse({ limit: '0010' })).toMatchObject({ limit: 10 });
    expect(refusal(groups, { limit: '0' })).toMatch(/^query\.limit: /);
    expect(refusal(groups, { limit: '1001' })).toMatch(/^query\.limit: /);
    const [, , routing] = parameters.find(([, name]) => name === 'afterVersion')!;
    expect(routing.parse({ afterVersion: '0' })).toMatchObject({ afterVersion: 0, waitMs: 0 });
    expect(refusal(routing, { afterVersion: '9007199254740992' })).toMatch(
      /^query\.afterVersion: /,
    );
    const [, , deadLetters] = parameters.find(([, name]) => name === 'shards')!;
    expect(deadLetters.parse({ shards: '0,2,3' })).toMatchObject({ shards: [0, 2, 3] });
    expect(refusal(deadLetters, { shards: '0,,3' })).toMatch(/^query\.shards: /);
    expect(refusal(deadLetters, { shards: '0, 3' })).toMatch(/^query\.shards: /);
  });
});
