"""The one rule for every callback the agent puts into a program: an exception of ours never
reaches the program. A feature's callback catches its own exceptions and hands them to
Guard.fail, which counts them, says the first once in the agent's notes ({feature: "off: Type:
message (at step N)"}, written to the manifest, shown by the monitor), and turns that feature off
for the rest of the process; the program goes on as if the agent had never had the feature.

Hot callbacks (module hooks, run at every module call until the first step) do the catching
themselves, flat: `if not x.on: return` then `try: ... except Exception as e: guard.fail(...)`:
a try costs nothing when nothing is raised (Python 3.11+) or a few ns (before), and no extra call
is made. Cold paths use Guard.call. Only Exception is caught: a KeyboardInterrupt that lands in our
code is the user's, and goes on to the program as it would have anyway.
"""
import sys
import threading
import traceback

from . import trust

MAX_MESSAGE = 300  # a sentence in the manifest, not a traceback


def unpatch(patched):
    """Put back what a feature wrapped: rows (object, name, original, wrapper), newest first, each
    only where ours is still the one there (a wrapper put over ours stays: ours, inside it, passes
    straight through once its feature is off). Never raises: an object that refuses the setattr
    keeps our wrapper, which then does nothing of ours."""
    for obj, name, original, wrapper in reversed(patched):
        try:
            if getattr(obj, name, None) is wrapper:
                setattr(obj, name, original)
        except Exception:
            pass


def sentence(exc, step=None):
    """The note for a feature turned off by `exc`: "off: Type: first line of the message (at step N)"."""
    try:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    except Exception:  # an exception whose __str__ fails still gets a note
        msg = ""
    if len(msg) > MAX_MESSAGE:
        msg = msg[: MAX_MESSAGE - 1] + "…"
    where = "" if step is None else " (at step %d)" % step
    return "off: %s%s%s" % (type(exc).__name__, ": " + msg if msg else "", where)


class Guard:
    """Failures of the agent's features: `notes` is the dict the manifest carries; `step()` the
    program's step now (or None); `changed()` rewrites the manifest."""

    def __init__(self, notes, step=lambda: None, changed=lambda: None):
        self.notes = notes
        self.step = step
        self.changed = changed
        self.failures = {}  # feature -> exceptions caught (the first turned it off)
        self._stops = {}  # feature -> what turns it off
        self._lock = threading.Lock()

    def stops(self, feature, fn):
        """`fn()` turns `feature` off: called once, at its first failure."""
        self._stops[feature] = fn

    def on(self, feature):
        return feature not in self.failures

    def fail(self, feature, exc):
        """Called from an except clause of `feature`'s code. Never raises."""
        try:
            with self._lock:
                n = self.failures[feature] = self.failures.get(feature, 0) + 1
            if n > 1:
                return  # said once; the feature is already off
            try:
                step = self.step()
            except Exception:
                step = None
            self.notes[feature] = sentence(exc, step)
            if trust.environ().get("GPUMEM_TUI_VERBOSE") == "1":
                sys.stderr.write("gpumem-agent: %s %s\n%s" % (feature, self.notes[feature], "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))
            stop = self._stops.get(feature)
            if stop is not None:
                try:
                    stop()
                except Exception:
                    pass  # half off is still better than raising into the program
            try:
                self.changed()
            except Exception:
                pass
        except Exception:
            pass

    def call(self, feature, fn, *args):
        """fn(*args) unless `feature` is off; its exception goes to fail. Returns fn's value or None."""
        if feature in self.failures:
            return None
        try:
            return fn(*args)
        except Exception as e:
            self.fail(feature, e)
            return None
