"""The agent's side of the control protocol held to protocol.py (generated from the one definition,
src/collect/protocol.ts; test/collect/protocol.test.ts checks it is not stale and runs this file):
a verb answered on one side only, an argument renamed or given another default, a reply field left
out or added, a category word of the agent's own, each fails here. Standard library only."""
import ast
import inspect
import os
import sys
import types
import unittest

AGENT = os.path.join(os.path.dirname(__file__), "..", "..", "agent")
sys.path.insert(0, AGENT)

from gpumem_agent import commands, protocol  # noqa: E402
from gpumem_agent.commands import AttachedCommands, Commands, check_args  # noqa: E402

SOURCE = os.path.join(AGENT, "gpumem_agent", "commands.py")
NAMES = os.path.join(AGENT, "gpumem_agent", "tensor_names.py")


def verbs_of(cls):
    return {n for n, f in vars(cls).items() if inspect.isfunction(f) and not n.startswith("_")}


def methods():
    """{verb: FunctionDef} of Commands and AttachedCommands, from the source."""
    with open(SOURCE) as f:
        tree = ast.parse(f.read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("Commands", "AttachedCommands"):
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and not f.name.startswith("_"):
                    out[f.name] = f
    return out


def dict_keys(node):
    """The string keys of a dict literal, or of each branch of `a if c else b`; None for anything else."""
    if isinstance(node, ast.Dict):
        return [{k.value for k in node.keys if isinstance(k, ast.Constant)}]
    if isinstance(node, ast.IfExp):
        a, b = dict_keys(node.body), dict_keys(node.orelse)
        return None if a is None or b is None else a + b
    return None


def own_nodes(fn):
    """The nodes of a function's body, not of the functions defined inside it."""
    todo = list(fn.body)
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(n))


def answered(fn):
    """What a verb's method answers: the key sets of each reply it returns (a dict literal, or a
    name whose string keys it sets: `m["totals"] = …`)."""
    assigned = set()
    for n in own_nodes(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                    assigned.add(t.slice.value)
    replies = []
    for n in own_nodes(fn):
        if isinstance(n, ast.Return) and n.value is not None:
            keys = dict_keys(n.value)
            replies += keys if keys is not None else [assigned]
    return replies


class Verbs(unittest.TestCase):
    def test_every_verb_has_one_method_and_every_method_is_a_verb(self):
        everyone = {v for v, s in protocol.VERBS.items() if not s["attached_only"]}
        attached = {v for v, s in protocol.VERBS.items() if s["attached_only"]}
        self.assertEqual(verbs_of(Commands), everyone)
        self.assertEqual(verbs_of(AttachedCommands), attached)

    def test_arguments_and_defaults_are_the_protocols(self):
        for verb, spec in protocol.VERBS.items():
            params = dict(inspect.signature(getattr(AttachedCommands, verb)).parameters)
            params.pop("self")
            self.assertEqual(sorted(params), sorted(spec["args"]), verb)
            for name, p in params.items():
                if name in spec["required_args"]:
                    self.assertIs(p.default, inspect.Parameter.empty, "%s(%s) is required" % (verb, name))
                else:
                    self.assertEqual(p.default, spec["args"][name].get("default"), "%s(%s)'s default" % (verb, name))

    def test_each_reply_holds_the_protocols_fields_and_no_other(self):
        found = methods()
        for verb, spec in protocol.VERBS.items():
            replies = answered(found[verb])
            self.assertTrue(replies, "%s returns no reply" % verb)
            for keys in replies:
                missing = set(spec["reply"]) - keys
                self.assertFalse(missing, "%s's reply lacks %s" % (verb, sorted(missing)))
                if not spec["reply_open"]:
                    extra = keys - set(spec["reply"]) - set(spec["reply_optional"])
                    self.assertFalse(extra, "%s's reply has fields the protocol does not define: %s" % (verb, sorted(extra)))

    def test_the_agents_handlers_are_the_protocols_verbs(self):
        agent = types.SimpleNamespace()
        self.assertEqual(set(commands.handlers(Commands(agent))), {v for v, s in protocol.VERBS.items() if not s["attached_only"]})
        self.assertEqual(set(commands.handlers(AttachedCommands(agent))), set(protocol.VERBS))


class Arguments(unittest.TestCase):
    def test_defaults_filled_in(self):
        self.assertEqual(check_args("names", {}), {"scan": False, "at_step": False})
        self.assertEqual(check_args("history", {"enabled": True}), {"enabled": True, "stacks": "python", "max_entries": 100000})

    def test_what_the_protocol_does_not_allow_is_said_in_one_line(self):
        cases = [
            ("names", {"scna": True}, 'names takes no argument "scna"; known: scan, at_step'),
            ("names", {"scan": 1}, 'names: "scan" must be true or false'),
            ("history", {}, 'history needs "enabled"'),
            ("history", {"enabled": True, "stacks": "c++"}, 'history: "stacks" must be \'python\' or \'all\''),
            ("history", {"enabled": True, "max_entries": 0}, 'history: "max_entries" must be above 0'),
            ("history", {"enabled": True, "max_entries": True}, 'history: "max_entries" must be an integer'),
            ("dump_snapshot", {"path": "x.pickle"}, 'dump_snapshot: "path" must be an absolute path ending in .pickle or null'),
            ("reset_peaks", {"x": 1}, 'reset_peaks takes no argument "x"'),
        ]
        for verb, args, why in cases:
            with self.assertRaises(TypeError) as e:
                check_args(verb, args)
            self.assertIn(why, str(e.exception))
            self.assertNotIn("\n", str(e.exception))


class Categories(unittest.TestCase):
    def test_names_uses_the_protocols_words_only(self):
        with open(NAMES) as f:
            tree = ast.parse(f.read())
        words = set(protocol.CATEGORIES)
        literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in words]
        self.assertEqual(literals, [], "category words written in tensor_names.py: use protocol.Category")
        used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "Category"}
        self.assertTrue(used)
        self.assertLessEqual(used, words)


if __name__ == "__main__":
    unittest.main()
