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

describe('mailbox: items that queue up together run as one batch', () => {
  const HEARTBEATS = {};
  const echo = (seen: string[][]) => async (items: readonly string[]) => {
    seen.push([...items]);
    return items.map((item) => ({ ok: true as const, value: `${item}!` }));
  };

  it('items arriving while other work runs wait in one batch, answered each in order', async () => {
    const mailbox = new Mailbox();
    const first = gate();
    const seen: string[][] = [];
    const busy = mailbox.run(
      () => true,
      () => first.opened,
    );
    const replies = ['a', 'b', 'c'].map((item) =>
      mailbox.batch(HEARTBEATS, () => true, item, echo(seen)),
    );
    first.open();
    await busy;
    expect(await Promise.all(replies)).toEqual(['a!', 'b!', 'c!']);
    expect(seen).toEqual([['a', 'b', 'c']]);
  });

  it('a batch takes no item once it started or once other work queued behind it', async () => {
    const mailbox = new Mailbox();
    const first = gate();
    const seen: string[][] = [];
    const order: string[] = [];
    const busy = mailbox.run(
      () => true,
      () => first.opened,
    );
    const a = mailbox.batch(HEARTBEATS, () => true, 'a', echo(seen));
    const admin = mailbox.run(
      () => true,
      async () => {
        order.push('admin');
        // Started meanwhile: this batch is closed, a new item starts the next one.
        await Promise.resolve();
      },
    );
    const b = mailbox.batch(
      HEARTBEATS,
      () => true,
      'b',
      async (items) => {
        order.push(`batch ${items.join()}`);
        return echo(seen)(items);
      },
    );
    first.open();
    await Promise.all([busy, a, admin, b]);
    expect(seen).toEqual([['a'], ['b']]);
    expect(order).toEqual(['admin', 'batch b']);
  });

  it('each item gets its own result or error; a batch that throws fails every item', async () => {
    const mailbox = new Mailbox();
    const first = gate();
    void mailbox.run(
      () => true,
      () => first.opened,
    );
    const ok = mailbox.batch(
      HEARTBEATS,
      () => true,
      'ok',
      async (items) =>
        items.map((item) =>
          item === 'ok'
            ? { ok: true as const, value: 1 }
            : { ok: false as const, error: new Error(item) },
        ),
    );
    const bad = mailbox.batch(
      HEARTBEATS,
      () => true,
      'bad',
      async () => [],
    );
    first.open();
    expect(await ok).toBe(1);
    await expect(bad).rejects.toThrow('bad');
    const thrown = mailbox.batch(
      HEARTBEATS,
      () => true,
      'x',
      () => Promise.reject(new Error('boom')),
    );
    await expect(thrown).rejects.toThrow('boom');
  });

  it('a batch that reaches a dropped entry is not run: every item goes back as STALE', async () => {
    const mailbox = new Mailbox();
    let current = true;
    const first = gate();
    void mailbox.run(
      () => current,
      async () => {
        await first.opened;
        current = false;
      },
    );
    let ran = false;
    const process = async (items: readonly string[]) => {
      ran = true;
      return items.map(() => ({ ok: true as const, value: 'ran' }));
    };
    const items = ['a', 'b'].map((item) => mailbox.batch(HEARTBEATS, () => current, item, process));
    first.open();
    expect(await Promise.all(items)).toEqual([STALE, STALE]);
    expect(ran).toBe(false);
  });
});
