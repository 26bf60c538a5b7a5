import { describe, expect, it } from 'vitest';
import { Mailbox, STALE } from '../../../src/actors/mailbox.js';

/** A promise the test settles by hand. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

describe('mailbox: work on a group runs one at a time, in arrival order', () => {
  it('starts the next piece of work only when the one before has finished', async () => {
    const mailbox = new Mailbox();
    const order: string[] = [];
    const first = gate();
    const a = mailbox.run(
      () => true,
      async () => {
        order.push('a start');
        await first.opened;
        order.push('a end');
        return 'a';
      },
    );
    const b = mailbox.run(
      () => true,
      async () => {
        order.push('b');
        return 'b';
      },
    );
    await Promise.resolve();
    await Promise.resolve();
    expect(order).toEqual(['a start']);
    first.open();
    expect(await Promise.all([a, b])).toEqual(['a', 'b']);
    expect(order).toEqual(['a start', 'a end', 'b']);
  });

  it('a failure is its caller’s: the work queued behind it still runs', async () => {
    const mailbox = new Mailbox();
    const failing = mailbox.run(
      () => true,
      () => Promise.reject(new Error('boom')),
    );
    const next = mailbox.run(
      () => true,
      () => Promise.resolve('ran'),
    );
    await expect(failing).rejects.toThrow('boom');
    expect(await next).toBe('ran');
  });

  it('work that reaches a dropped entry is not run: it goes back to its caller as STALE', async () => {
    const mailbox = new Mailbox();
    let current = true;
    const first = gate();
    const a = mailbox.run(
      () => current,
      async () => {
        await first.opened;
        current = false; // dropped while a was running (lease lost, group deleted)
      },
    );
    let ran = false;
    const b = mailbox.run(
      () => current,
      async () => {
        ran = true;
      },
    );
    first.open();
    await a;
    expect(await b).toBe(STALE);
    expect(ran).toBe(false);
  });

  it('idle() resolves once everything queued so far has run', async () => {
    const mailbox = new Mailbox();
    const first = gate();
    let done = false;
    void mailbox.run(
      () => true,
      async () => {
        await first.opened;
        done = true;
      },
    );
    const idle = mailbox.idle();
    first.open();
    await idle;
    expect(done).toBe(true);
  });

  it('isIdle() is true only while nothing is queued or running, failures included', async () => {
    const mailbox = new Mailbox();
    expect(mailbox.isIdle()).toBe(true);
    const first = gate();
    const a = mailbox.run(
      () => true,
      async () => {
        await first.opened;
        throw new Error('boom');
      },
    );
    const b = mailbox.run(
      () => true,
      () => Promise.resolve('b'),
    );
    expect(mailbox.isIdle()).toBe(false);
    first.open();
    await expect(a).rejects.toThrow('boom');
    expect(await b).toBe('b');
    await mailbox.idle();
    expect(mailbox.isIdle()).toBe(true);
    // Work that finds its entry gone settles too.
    const stale = mailbox.run(
      () => false,
      () => Promise.resolve('never'),
    );
    expect(mailbox.isIdle()).toBe(false);
    expect(await stale).toBe(STALE);
    await mailbox.idle();
    expect(mailbox.isIdle()).toBe(true);
  });
});
