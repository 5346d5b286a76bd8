"""The agent's names for tied and shared parameters (tensor_names.known_walk), on stand-ins shaped
as torch's: a Module whose named_parameters lists each Parameter once unless remove_duplicate=False
(as torch's does), tensors with a storage, a data pointer and a shape. GPT-2 ties lm_head.weight to
transformer.wte.weight: its gradient is one block of its own, and is named with both names.
Standard library only."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "agent"))

from gpumem_agent import tensor_names  # noqa: E402

_next = [0x7F0000000000]


class Storage:
    def __init__(self, nbytes):
        self.address, self.size = _next[0], nbytes
        _next[0] += nbytes + 512

    def data_ptr(self):
        return self.address

    def nbytes(self):
        return self.size


class Device:
    type, index = "cuda", 0


class Tensor:
    is_cuda, is_meta, layout, dtype, device = True, False, "torch.strided", "torch.float32", Device()

    def __init__(self, *shape, storage=None, offset=0):
        self.shape = tuple(shape)
        n = 4
        for s in shape:
            n *= s
        self._storage = storage or Storage(n)
        self._offset = offset
        self.grad = None

    def untyped_storage(self):
        return self._storage

    def data_ptr(self):
        return self._storage.address + self._offset


class Parameter(Tensor):
    pass


class Module:
    """named_parameters as torch's: every (module path, parameter), each Parameter object once
    unless remove_duplicate=False."""

    def named_parameters(self, prefix="", remove_duplicate=True):
        seen = set()
        for name, p in self._all(prefix):
            if remove_duplicate and id(p) in seen:
                continue
            seen.add(id(p))
            yield name, p

    def _all(self, prefix):
        for name, v in vars(self).items():
            full = prefix + name
            if isinstance(v, Parameter):
                yield full, v
            elif isinstance(v, Module):
                yield from v._all(full + ".")

    def named_buffers(self):
        return iter(())


class OldModule(Module):
    """A module whose named_parameters takes no remove_duplicate."""

    def named_parameters(self):  # noqa: D102 (no remove_duplicate, as before torch 2.0)
        return Module.named_parameters(self)


def gpt2(cls=Module, tie="object"):
    model, wte, head, h = cls(), cls(), cls(), cls()
    wte.weight = Parameter(1000, 64)
    h.weight = Parameter(64, 64)
    if tie == "object":
        head.weight = wte.weight  # transformers' tie_weights: one Parameter held twice
    else:
        head.weight = Parameter(1000, 64, storage=wte.weight.untyped_storage())  # two Parameters, one block
    model.transformer = cls()
    model.transformer.wte = wte
    model.transformer.h = h
    model.lm_head = head
    for p in {id(p): p for _, p in model._all("")}.values():
        p.grad = Tensor(*p.shape)
    return model


def names(model, optimizers=()):
    return tensor_names.known_names([model], list(optimizers))


class TiedNames(unittest.TestCase):
    def test_tied_by_object_gradient_named_with_both_names(self):
        model = gpt2()
        out = names(model)
        wte = model.transformer.wte.weight
        grad = out[wte.grad.untyped_storage().data_ptr()]
        self.assertEqual(grad["name"], "transformer.wte.weight.grad (tied: lm_head.weight)")
        self.assertEqual(grad["category"], "gradient")
        self.assertEqual(out[wte.untyped_storage().data_ptr()]["name"], "transformer.wte.weight")
        # every other gradient named as before
        self.assertEqual(out[model.transformer.h.weight.grad.untyped_storage().data_ptr()]["name"], "transformer.h.weight.grad")
        self.assertEqual(sum(1 for e in out.values() if e["category"] == "gradient"), 2)

    def test_two_parameters_over_one_block_each_gradient_named(self):
        model = gpt2(tie="data")
        out = names(model)
        wte, head = model.transformer.wte.weight, model.lm_head.weight
        self.assertEqual(out[wte.grad.untyped_storage().data_ptr()]["name"], "transformer.wte.weight.grad (tied: lm_head.weight)")
        self.assertEqual(out[head.grad.untyped_storage().data_ptr()]["name"], "lm_head.weight.grad (tied: transformer.wte.weight)")
        # the shared block itself is named once, under the first name
        self.assertEqual(out[wte.untyped_storage().data_ptr()]["name"], "transformer.wte.weight")

    def test_views_of_one_flat_buffer_are_not_tied(self):
        model, a, b = Module(), Module(), Module()
        flat = Storage(2 * 64 * 4)
        a.weight = Parameter(64, storage=flat)
        b.weight = Parameter(64, storage=flat, offset=64 * 4)
        model.a, model.b = a, b
        a.weight.grad, b.weight.grad = Tensor(64), Tensor(64)
        out = names(model)
        self.assertEqual(out[a.weight.grad.untyped_storage().data_ptr()]["name"], "a.weight.grad")
        self.assertEqual(out[b.weight.grad.untyped_storage().data_ptr()]["name"], "b.weight.grad")

    def test_many_ties_stay_one_line(self):
        model = Module()
        shared = Parameter(8)
        for k in range(6):
            m = Module()
            m.weight = shared
            setattr(model, "m%d" % k, m)
        shared.grad = Tensor(8)
        self.assertEqual(names(model)[shared.grad.untyped_storage().data_ptr()]["name"],
                         "m0.weight.grad (tied: m1.weight, m2.weight, m3.weight and 2 more)")

    def test_a_module_without_remove_duplicate(self):
        model = gpt2(cls=OldModule)
        out = names(model)
        wte = model.transformer.wte.weight
        self.assertEqual(out[wte.grad.untyped_storage().data_ptr()]["name"], "transformer.wte.weight.grad")


if __name__ == "__main__":
    unittest.main()
