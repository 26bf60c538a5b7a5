/*
 * A process that keeps one core busy and does nothing else: no I/O, no Redis, no HTTP. The
 * joins benchmark runs group B's windows beside it to measure what any second core's worth of
 * work on the machine costs B's p99, apart from anything the coordinator does (the floor under
 * the flood's ratio). It stops on SIGTERM like any child.
 */

import { setImmediate } from 'node:timers';

process.stdout.write('LISTENING 0\n', () => {
  setImmediate(() => {
    for (;;) {
      // spin
    }
  });
});
