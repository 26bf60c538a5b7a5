import { describe, expect, it } from 'vitest';
import { parseMonitorLine } from '../support/redis-monitor.js';

// The tests that watch Redis through MONITOR compare what it printed with the scripts we send:
// a misread escape would hide a write (or invent one).
describe('reading a MONITOR line', () => {
  it('unescapes quotes, backslashes, newlines and bytes, and lower-cases the command', () => {
    const line =
      '1795770912.146772 [0 127.0.0.1:54912] "EVAL" "local a = \\"x\\\\y\\"\\nreturn a \\xe2\\x86\\x92" "1" "k:{sp:cg}"';
    expect(parseMonitorLine(line)).toEqual([
      'eval',
      'local a = "x\\y"\nreturn a →',
      '1',
      'k:{sp:cg}',
    ]);
  });

  it('reads a command run from a script', () => {
    expect(parseMonitorLine('1795770912.146849 [0 lua] "hmget" "key" "storeRevision"')).toEqual([
      'hmget',
      'key',
      'storeRevision',
    ]);
  });
});
