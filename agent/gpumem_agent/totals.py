"""A device's running totals, moved by each record as the ring header's rule says
(GPUMEM_TOTALS_RULE in cuda/gpumem_ring.h, generated into wire.TOTALS_RULE): the rule the hook
(gpumem_totals_apply) and the monitor's model (src/profiler/totals.ts) follow too, held together by
test/profiler/totals-rule.test.ts on every committed recording. Nothing here names an action.
"""
from .wire import ACTION, MIN_BLOCK_SIZE, TOTALS_RULE

COUNT_NAMES = ("n_alloc", "n_free", "n_segment_alloc", "n_segment_free", "n_oom")

# By action code: (requested, allocated, active, reserved) signs and the count's name (or None).
_RULE = {ACTION[name]: ((row["requested"], row["allocated"], row["active"], row["reserved"]), row["count"]) for name, row in TOTALS_RULE.items()}
_NONE = ((0, 0, 0, 0), None)


def block_size(n):
    """The caching allocator's block for a request of n bytes (trace entries carry the request)."""
    return 0 if n <= 0 else -(-n // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE


class Totals:
    __slots__ = ("requested", "allocated", "active", "reserved", "peak_allocated", "peak_active", "peak_reserved") + COUNT_NAMES

    def __init__(self, active=0, reserved=0):
        for k in self.__slots__:
            setattr(self, k, 0)
        self.active = self.peak_active = active
        self.reserved = self.peak_reserved = reserved

    def apply(self, action, size, block=None):
        """One record: `size` its bytes, `block` the block it moves (default: the request's block)."""
        (rq, al, ac, rs), count = _RULE.get(action, _NONE)
        if block is None:
            block = block_size(size)
        if rq:
            self.requested += rq * size
        if al:
            self.allocated += al * block
            if al > 0 and self.allocated > self.peak_allocated:
                self.peak_allocated = self.allocated
        if ac:
            self.active += ac * block
            if ac > 0 and self.active > self.peak_active:
                self.peak_active = self.active
        if rs:
            self.reserved += rs * size
            if rs > 0 and self.reserved > self.peak_reserved:
                self.peak_reserved = self.reserved
        if count is not None:
            setattr(self, count, getattr(self, count) + 1)

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}
