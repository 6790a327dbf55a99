#!/usr/bin/env python3
"""The sample order of a generated program's `train --data` (docs/cli.md).

A data set of `samples` samples and a program batch of `batch` has
samples // batch steps per epoch (the last partial batch is dropped). Step
k reads, in epoch e = k // steps_per_epoch at position p = k %
steps_per_epoch, the samples order_e[p * batch + i] for i in 0 .. batch - 1,
micro-batch j of the step (of every replica) the positions j * b .. j * b +
b - 1 of them. order_e is the identity without --shuffle; with --shuffle it
is epoch_permutation(seed, e, samples): splitmix64 started at seed + (e +
1) * 0xD1342543DE82EF95 (mod 2^64), then a Fisher-Yates shuffle of 0 ..
samples - 1 (runtime/lib/train/Dataset.cpp does the same).

    python3 pp_data_order.py --samples 43 --batch 8 --seed 5 --steps 10
prints each step's sample indices.
"""
import argparse

import numpy as np

MASK = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15
EPOCH_STRIDE = 0xD1342543DE82EF95


class SplitMix64:
    """Steele, Lea and Flood's splitmix64, as SplitMix64 in Dataset.h."""

    def __init__(self, state):
        self.state = state & MASK

    def next(self):
        self.state = (self.state + GOLDEN_GAMMA) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def epoch_permutation(seed, epoch, samples):
    """The sample order of epoch `epoch` under --shuffle --seed `seed`."""
    rng = SplitMix64((seed & MASK) + (epoch + 1) * EPOCH_STRIDE)
    order = list(range(samples))
    for i in range(samples - 1, 0, -1):
        j = rng.next() % (i + 1)
        order[i], order[j] = order[j], order[i]
    return np.array(order, dtype=np.int64)


class DataOrder:
    """Each step's sample indices, the epochs' permutations computed once."""

    def __init__(self, samples, batch, shuffle=False, seed=0):
        if samples < batch:
            raise ValueError(f"{samples} samples, fewer than one batch of "
                             f"{batch}")
        self.samples, self.batch = samples, batch
        self.shuffle, self.seed = shuffle, seed
        self.steps_per_epoch = samples // batch
        self._orders = {}

    def order(self, epoch):
        if not self.shuffle:
            return np.arange(self.samples)
        if epoch not in self._orders:
            self._orders[epoch] = epoch_permutation(self.seed, epoch,
                                                    self.samples)
        return self._orders[epoch]

    def step(self, k):
        """The sample indices of step k (from 0), in batch order."""
        epoch, place = divmod(k, self.steps_per_epoch)
        start = place * self.batch
        return self.order(epoch)[start:start + self.batch]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-shuffle", action="store_true")
    parser.add_argument("--steps", type=int, default=None,
                        help="default: one epoch")
    args = parser.parse_args()
    order = DataOrder(args.samples, args.batch, not args.no_shuffle,
                      args.seed)
    for k in range(args.steps or order.steps_per_epoch):
        print(f"step {k + 1}: " + " ".join(map(str, order.step(k))))


if __name__ == "__main__":
    main()
