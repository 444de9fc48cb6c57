/**
 * A bounded in-memory cache split into partitions (a workspace, a client address), so that no
 * tenant's load evicts another tenant's entries (docs/operators/security.md "Memory every
 * tenant shares"). One flat LRU for everyone let a tenant that made enough keys push out every
 * other tenant's: rate-limit buckets, cached answers.
 *
 * Two bounds, both in weight (1 per entry unless `weigh` says otherwise):
 * - `perPartition`: a partition over it loses its own least recently used entries, and nobody
 *   else's. An entry heavier than the bound alone is not kept.
 * - `total`: over it, the least recently used entry of the heaviest partition goes, again and
 *   again until under. The heaviest holds at least the average (`total` / partitions, its fair
 *   share), so a partition under its fair share never loses an entry to anyone's load.
 */
export interface FairBounds {
  perPartition: number;
  total: number;
}

interface Partition<V> {
  name: string;
  /** In recency order: the first is the least recently used. */
  entries: Map<string, { value: V; weight: number }>;
  weight: number;
}

export class FairCache<V> {
  readonly #partitions = new Map<string, Partition<V>>();
  /**
   * A max-heap of [weight, partition] to find the heaviest partition without a scan. Lazy: an
   * entry is pushed whenever a partition grows, and one whose weight is no longer its
   * partition's is dropped when it comes to the top.
   */
  #heap: [number, Partition<V>][] = [];
  #weight = 0;
  #size = 0;

  constructor(
    readonly bounds: FairBounds,
    private readonly weigh: (value: V) => number = () => 1,
  ) {}

  /** Entries held, in every partition. */
  get size(): number {
    return this.#size;
  }

  /** Weight held, in every partition. */
  get weight(): number {
    return this.#weight;
  }

  /** The weight one partition holds. */
  partitionWeight(partition: string): number {
    return this.#partitions.get(partition)?.weight ?? 0;
  }

  /** The value, marked as the partition's most recently used. */
  get(partition: string, key: string): V | undefined {
    const entries = this.#partitions.get(partition)?.entries;
    const entry = entries?.get(key);
    if (!entry) return undefined;
    entries!.delete(key);
    entries!.set(key, entry);
    return entry.value;
  }

  /** The value, leaving its recency as it was. */
  peek(partition: string, key: string): V | undefined {
    return this.#partitions.get(partition)?.entries.get(key)?.value;
  }

  /** Keeps `value` as the partition's most recently used, evicting as the bounds say. */
  set(partition: string, key: string, value: V): void {
    const weight = this.weigh(value);
    const entries = this.#partitions.get(partition)?.entries;
    const previous = entries?.get(key);
    if (previous && previous.weight === weight) {
      // The same weight in place (a bucket taken from again): no bound moves, nothing to evict.
      entries!.delete(key);
      entries!.set(key, { value, weight });
      return;
    }
    this.delete(partition, key);
    if (weight > this.bounds.perPartition || weight > this.bounds.total) return;
    let held = this.#partitions.get(partition);
    if (!held) {
      held = { name: partition, entries: new Map(), weight: 0 };
      this.#partitions.set(partition, held);
    }
    held.entries.set(key, { value, weight });
    held.weight += weight;
    this.#weight += weight;
    this.#size += 1;
    while (held.weight > this.bounds.perPartition) this.#evictOldest(held);
    this.#push(held);
    while (this.#weight > this.bounds.total) this.#evictOldest(this.#heaviest());
  }

  delete(partition: string, key: string): boolean {
    const held = this.#partitions.get(partition);
    const entry = held?.entries.get(key);
    if (!held || !entry) return false;
    this.#remove(held, key, entry.weight);
    return true;
  }

  #evictOldest(held: Partition<V>): void {
    const [key, entry] = held.entries.entries().next().value!;
    this.#remove(held, key, entry.weight);
  }

  #remove(held: Partition<V>, key: string, weight: number): void {
    held.entries.delete(key);
    held.weight -= weight;
    this.#weight -= weight;
    this.#size -= 1;
    if (held.entries.size === 0) this.#partitions.delete(held.name);
  }

  #push(held: Partition<V>): void {
    const heap = this.#heap;
    // Stale entries are dropped as they surface; a heap far larger than the partitions is rebuilt.
    if (heap.length > 2 * this.#partitions.size + 64) {
      this.#heap = [];
      for (const partition of this.#partitions.values()) this.#push(partition);
      return;
    }
    heap.push([held.weight, held]);
    for (let i = heap.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (heap[parent]![0] >= heap[i]![0]) break;
      [heap[parent], heap[i]] = [heap[i]!, heap[parent]!];
      i = parent;
    }
  }

  #pop(): void {
    const heap = this.#heap;
    const last = heap.pop()!;
    if (heap.length === 0) return;
    heap[0] = last;
    for (let i = 0; ;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let top = i;
      if (left < heap.length && heap[left]![0] > heap[top]![0]) top = left;
      if (right < heap.length && heap[right]![0] > heap[top]![0]) top = right;
      if (top === i) break;
      [heap[top], heap[i]] = [heap[i]!, heap[top]!];
      i = top;
    }
  }

  /** The partition holding the most weight. Only called while something is held. */
  #heaviest(): Partition<V> {
    for (;;) {
      const [weight, held] = this.#heap[0]!;
      if (this.#partitions.get(held.name) === held && held.weight === weight) return held;
      this.#pop();
      // Shrunk since it was pushed: back in at its weight now, to surface where it belongs.
      if (this.#partitions.get(held.name) === held) this.#push(held);
    }
  }
}
