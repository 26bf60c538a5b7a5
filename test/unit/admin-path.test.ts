import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isAdminPath } from '../../src/http/admin-path.js';

/** Strings made of the characters that matter here, plus a few that should not. */
const pathLike = fc
  .array(fc.constantFrom(...'%2fF5/\\.adminAcorv1é\u0000 ?#'.split('')), { maxLength: 60 })
  .map((chars) => chars.join(''));

describe('a path under /coord/v1/admin/ is recognised however it is spelt', () => {
  it.each([
    '/coord/v1/admin/groups',
    '/coord/v1/admin',
    '/coord/v1/admin/',
    '/COORD/V1/ADMIN/GROUPS',
    '/coord/v1/Admin/groups',
    '/coord/v1/admin/groups/',
    '//coord/v1/admin/groups',
    '/coord/v1//admin///groups',
    '/coord/v1/%61dmin/groups',
    '/coord/v1/%41DMIN/groups',
    '/coord%2Fv1%2fadmin/groups',
    '/coord/v1/%2561dmin/groups',
    '/coord\\v1\\admin\\groups',
    '/coord/v1/./admin/groups',
    '/coord/v1/monitoring/../admin/groups',
    '/coord/v1/admin/../monitoring/groups',
  ])('%s is an admin path', (path) => {
    expect(isAdminPath(path)).toBe(true);
  });

  it.each([
    '/coord/v1/monitoring/groups',
    '/coord/v1/administer/groups',
    '/coord/v1/adminx',
    '/coord/v2/admin/groups',
    '/coord/admin/groups',
    '/metrics',
    '/',
    '',
    '/coord/v1/consumer/streams/admin/groups/admin/heartbeat',
  ])('%s is not an admin path', (path) => {
    expect(isAdminPath(path)).toBe(false);
  });

  it('never throws, also on malformed percent-encoding', () => {
    for (const path of ['/coord/v1/%E0%A4%A/admin', '/%', '/%zz/admin', '/%%%']) {
      expect(() => isAdminPath(path)).not.toThrow();
    }
    fc.assert(
      fc.property(pathLike, (path) => {
        expect(typeof isAdminPath(path)).toBe('boolean');
      }),
    );
  });

  it('any letter case and percent-encoding of the prefix is recognised', () => {
    const prefix = '/coord/v1/admin/';
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('keep', 'upper', 'percent'), {
          minLength: prefix.length,
          maxLength: prefix.length,
        }),
        fc.string(),
        (hows, rest) => {
          const spelt = [...prefix]
            .map((char, i) =>
              hows[i] === 'upper'
                ? char.toUpperCase()
                : hows[i] === 'percent' && i > 0
                  ? `%${char.charCodeAt(0).toString(16)}`
                  : char,
            )
            .join('');
          expect(isAdminPath(spelt + rest)).toBe(true);
        },
      ),
    );
  });
});
