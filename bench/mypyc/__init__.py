"""Issue 30's mypyc experiment (docs/benchmarks.md, "mypyc: measured"): the hot modules of W1's
cycle compiled with mypyc, measured against the pure package.  An experiment, not a build of the
package: nothing here is installed or shipped.

    git apply bench/mypyc/compile.patch   # the changes compiling needs (not in the package: see the doc)
    python -m bench.mypyc.build build     # compile modules.txt in place, next to the sources
    python -m bench.mypyc.build pure      # set the built modules aside: the pure package again
    python -m bench.mypyc.build compiled  # put them back
    python -m bench.mypyc.cpu 20000 normal durableq,floor,litequeue

``build`` needs a C compiler, the Python headers, the pinned mypy (constraints/dev.txt) and
setuptools >= 77 (setup() reads pyproject.toml, whose license field needs it).
"""
