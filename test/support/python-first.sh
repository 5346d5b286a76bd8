#!/bin/sh
# Runs its arguments (the test command, package.json) with the interpreter python3 resolves to
# first on PATH, where python3 is a version manager's shim (pyenv's, asdf's: a script that picks
# the interpreter on every call, ~0.08 s of CPU each; the tests start python3 hundreds of times).
# Set before Bun starts: Bun 1.4.4 gives a process started without `env` the environment Bun
# started with, not process.env as a preload would change it. The same interpreter the shim
# would pick from here; where python3 is no shim, or cannot say where it is, PATH is left as it is.
py=$(command -v python3 2>/dev/null)
case "$py" in
  */shims/python3)
    real=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
    case "$real" in
      /*/python*) [ -x "$real" ] && PATH="${real%/*}:$PATH" && export PATH ;;
    esac
    ;;
esac
exec "$@"
