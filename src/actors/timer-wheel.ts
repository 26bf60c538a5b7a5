import type { Clock } from '../machines/clock.js';

/** A binary min-heap of numbers (the wheel's slot numbers). */
class MinHeap {
  private readonly items: number[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): number | undefined {
    return this.items[0];
  }

  push(value: number): void {
    const items = this.items;
    let i = items.push(value) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const above = items[parent] as number;
      if (above <= value) break;
      items[i] = above;
      i = parent;
    }
    items[i] = value;
  }

  pop(): number | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child =
        right < items.length && (items[right] as number) < (items[left] as number) ? right : left;
      if ((items[child] as number) >= last) break;
      items[i] = items[child] as number;
      i = child;
    }
    items[i] = last;
    return top;
  }
}

/** Where an item waits in a {@link TimerWheel}: what {@link TimerWheel.remove} needs. */
export type WheelSlot = number;

/**
 * Many timers on ONE clock timer (no timer per member or per request,
 * docs/architecture.md#performance-rules). Items are kept in slots of `resolutionMs` (an item fires
 * when its slot's end has come, so at most `resolutionMs` late, never early); the slots are found
 * in due order through a min-heap of slot numbers, pushed only when a slot is opened. Adding to an
 * open slot and removing are O(1); opening a slot is O(log slots), and there are at most as many
 * slots as distinct due times — so with many items per slot (heartbeats arriving together) it is
 * O(1) amortised.
 */
export class TimerWheel<T> {
  private readonly slots = new Map<number, Set<T>>();
  private readonly due = new MinHeap();
  /** The slot the clock timer is armed for; null when none is armed. */
  private armedSlot: number | null = null;
  private disarm: (() => void) | null = null;
  private count = 0;

  constructor(
    private readonly clock: Clock,
    private readonly resolutionMs: number,
    /** Called with the items whose time has come, in slot order. */
    private readonly fire: (items: T[]) => void,
  ) {}

  /** How many items wait. */
  get size(): number {
    return this.count;
  }

  /** Schedules `item` to fire at `at` (epoch ms); returns its slot, for {@link remove}. */
  add(at: number, item: T): WheelSlot {
    const slot = Math.ceil(at / this.resolutionMs);
    let items = this.slots.get(slot);
    if (!items) {
      items = new Set();
      this.slots.set(slot, items);
      this.due.push(slot);
    }
    if (!items.has(item)) {
      items.add(item);
      this.count++;
    }
    if (this.armedSlot === null || slot < this.armedSlot) this.arm();
    return slot;
  }

  /** Takes `item` out of `slot`; false if it was not there (fired or removed already). */
  remove(slot: WheelSlot, item: T): boolean {
    const items = this.slots.get(slot);
    if (!items?.delete(item)) return false;
    this.count--;
    // The slot number stays in the heap; an emptied slot is skipped when it comes up.
    if (items.size === 0) this.slots.delete(slot);
    return true;
  }

  /** Drops every item and the clock timer. */
  clear(): void {
    this.disarm?.();
    this.disarm = null;
    this.armedSlot = null;
    this.slots.clear();
    while (this.due.size > 0) this.due.pop();
    this.count = 0;
  }

  /** Arms the clock timer for the earliest slot that still holds items. */
  private arm(): void {
    this.disarm?.();
    this.disarm = null;
    this.armedSlot = null;
    let slot = this.due.peek();
    while (slot !== undefined && !this.slots.has(slot)) {
      this.due.pop();
      slot = this.due.peek();
    }
    if (slot === undefined) return;
    this.armedSlot = slot;
    const delay = Math.max(0, slot * this.resolutionMs - this.clock.now());
    this.disarm = this.clock.after(delay, () => this.expire());
  }

  private expire(): void {
    this.disarm = null;
    this.armedSlot = null;
    const now = this.clock.now();
    const fired: T[] = [];
    for (let slot = this.due.peek(); slot !== undefined; slot = this.due.peek()) {
      if (slot * this.resolutionMs > now) break;
      this.due.pop();
      const items = this.slots.get(slot);
      if (!items) continue;
      this.slots.delete(slot);
      this.count -= items.size;
      for (const item of items) fired.push(item);
    }
    this.arm();
    if (fired.length > 0) this.fire(fired);
  }
}
