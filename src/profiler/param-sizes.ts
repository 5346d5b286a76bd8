// The parameters' block sizes, and whether a block that outlived backward is sized as one of their
// gradients (a block that is not is a cache the backward pass made: the cuBLAS workspace of
// autograd's thread, for one). Used by the live lifetimes and by the timeline's bands alike.

import { partitionPoint } from "./partition";

/** The caching allocator keeps a large block whole where a split would leave 1 MiB or less
 *  (kSmallSize): a block can then exceed its request by up to this, a parameter's and its
 *  gradient's alike, so the two need not be the same size (a ResNet50's gradients on an H200). */
const LARGE_SLACK = 1 << 20;

export class ParamSizes {
  private readonly exact = new Set<number>();
  private large: number[] = [];
  private sorted = true;

  get size(): number {
    return this.exact.size;
  }

  add(size: number): void {
    if (this.exact.has(size)) return;
    this.exact.add(size);
    if (size > LARGE_SLACK) {
      this.large.push(size);
      this.sorted = false;
    }
  }

  clear(): void {
    this.exact.clear();
    this.large = [];
    this.sorted = true;
  }

  /** A parameter's size exactly, or, both being large, within the allocator's slack of one. */
  fits(size: number): boolean {
    if (this.exact.has(size)) return true;
    if (size <= LARGE_SLACK || this.large.length === 0) return false;
    if (!this.sorted) {
      this.large.sort((a, b) => a - b);
      this.sorted = true;
    }
    const large = this.large;
    const k = partitionPoint(0, large.length, (i) => large[i]! < size - LARGE_SLACK);
    return k < large.length && large[k]! <= size + LARGE_SLACK;
  }
}
