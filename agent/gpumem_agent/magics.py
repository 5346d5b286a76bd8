"""IPython: `%load_ext gpumem_agent`, then `%gpumem STATEMENT` or a `%%gpumem` cell: the statement
or cell runs with its lines profiled from the allocator's events, and the table prints below."""
import linecache


def register(ipython):
    from . import _lines

    count = [0]

    def gpumem(line, cell=None):
        src = cell if cell is not None else line
        if not src.strip():
            print("usage: %gpumem STATEMENT, or %%gpumem at the top of a cell")
            return
        count[0] += 1
        filename = "<gpumem-%d>" % count[0]
        # The source where the table and tracebacks look for it.
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        code = compile(src, filename, "exec")
        p = _lines()
        try:
            p.run_code(code, ipython.user_ns, name=("%%%%gpumem cell %d" if cell is not None else "%%gpumem %d") % count[0])
        finally:
            print(p.format(code), end="")

    ipython.register_magic_function(gpumem, "line_cell", "gpumem")
