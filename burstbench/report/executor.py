"""Execute the report notebooks in a few warm Jupyter kernels (what `burstbench report` runs).

papermill starts one process and one kernel per notebook, and each kernel imports matplotlib,
pandas, seaborn (with scipy) and burstbench again: most of a rebuild was start-up, not
drawing.  Here one process starts one kernel per core (at most one per notebook); each takes
the next notebook from one queue when it is free, the longest first by the seconds the last
build took (TIMINGS in the output folder; name order where there are none), so that no kernel
idles while another has two notebooks left.  Which kernel draws which notebook changes
nothing in what is drawn (the tests compare shared kernels with fresh ones).  Between two
notebooks the kernel's figures are closed, matplotlib's settings restored and its namespace
emptied (kernel.RESET), so a notebook sees only what it defines itself, as in a fresh kernel; what
stays is what was imported.  Each notebook still runs cell by cell in a Jupyter kernel with
its parameters injected after its `parameters` cell, as papermill does, and the executed
notebook is written to the output folder, with its outputs up to the error where one failed.
Its `parameters` cell runs as committed (committed_parameters), not as the file was last
saved: an explorer's autosaved edit, or a half-typed line, never reaches the report.

``BURSTBENCH_REPORT_KERNELS`` changes the default: a number (the most kernels at once), or
``fresh`` (a new kernel for every notebook, as papermill did: the tests compare the two).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from burstbench.report.kernel import Kernel, first_line, reused, started

KERNELS_ENV = "BURSTBENCH_REPORT_KERNELS"

#: What a notebook runs with: (its parameters as committed, every value injected after them).
Parameters = Callable[[Path], "tuple[dict, dict]"]

@dataclass
class Result:
    """What happened to one notebook: None for success, else one line saying why."""

    notebook: Path
    output: Path
    error: str | None = None
    seconds: float = 0.0
    kernel: int = 0


#: Seconds each notebook took in the last build, in the output folder (a cache: deleting it
#: changes only the order).
TIMINGS = "timings.json"


@dataclass
class KernelPlan:
    kernels: int
    fresh: bool
    queue: list[Path] = field(default_factory=list)  # longest first


def last_seconds(out_dir: Path) -> dict[str, float]:
    """{notebook name: seconds} of the last build into `out_dir`; {} where none was kept."""
    import json

    try:
        data = json.loads((Path(out_dir) / TIMINGS).read_text())
        return {str(k): float(v) for k, v in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def plan(notebooks: list[Path], setting: str | None = None,
         seconds: dict[str, float] | None = None) -> KernelPlan:
    """How many kernels, fresh or shared, and the order the notebooks are taken in: the
    longest first by `seconds` (those not in it first, in name order, then by name)."""
    setting = (os.environ.get(KERNELS_ENV, "") if setting is None else setting).strip().lower()
    fresh = setting == "fresh"
    if setting and not fresh:
        try:
            wanted = int(setting)
        except ValueError:
            raise ValueError(f"{KERNELS_ENV}={setting!r}: a number of kernels or 'fresh'"
                             ) from None
        if wanted < 1:
            raise ValueError(f"{KERNELS_ENV}={setting!r}: at least 1")
    else:
        wanted = available_cpus()
    n = max(1, min(wanted, len(notebooks)))
    seconds = seconds or {}
    return KernelPlan(n, fresh, sorted(notebooks, key=lambda p: (-seconds.get(p.name, float("inf")),
                                                           p.name)))


def _skip_slow_imports() -> None:
    """nbformat imports jsonschema, which imports rfc3987_syntax where it is installed (a
    jupyterlab dependency) for its 'iri' format check; that module compiles a grammar at
    import, 2 s on a small VM.  Notebook schemas use no 'iri' field: let the import fail,
    so jsonschema goes without that check, in this process only."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


def committed_parameters(nb, committed: dict, source: str) -> None:
    """Set the source of the cell tagged `parameters` to `committed` (each name = its value,
    as the committed notebook holds them), saying they come from `source`: what the file's
    saved cell holds (an explorer's edit, autosaved; a half-typed line that no longer parses)
    is never run by a command."""
    for cell in nb.cells:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            cell["source"] = (f"# the committed parameters ({source}), not this file's saved "
                              "cell; the values used are in the next cell\n"
                              + "".join(f"{k} = {v!r}\n" for k, v in committed.items()))


def inject_parameters(nb, parameters: dict) -> None:
    """papermill's injection: a cell tagged `injected-parameters` after the one tagged
    `parameters` (at the top where there is none), replacing an earlier injected cell."""
    import nbformat

    cells = [c for c in nb.cells
             if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]
    at = next((i + 1 for i, c in enumerate(cells)
               if "parameters" in c.get("metadata", {}).get("tags", [])), 0)
    source = "# Parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    cell["id"] = "injected-parameters"  # not random: the same notebook from the same input
    nb.cells = cells[:at] + [cell] + cells[at:]


def _echo(cell, **_) -> None:
    """--verbose: a cell's text output as it completes."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            (sys.stderr if out.get("name") == "stderr" else sys.stdout).write(out.get("text", ""))
        elif out.get("output_type") == "error":
            print("\n".join(out.get("traceback", [])), file=sys.stderr)
        elif out.get("output_type") == "execute_result" and "text/plain" in out["data"]:
            print(out["data"]["text/plain"])
    sys.stdout.flush()


async def _run_one(kernel: Kernel, notebook: Path, output: Path, parameters: Parameters,
                   log: bool, timeout: float | None) -> str | None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    nb = nbformat.read(notebook, as_version=4)
    committed, values = parameters(notebook)
    committed_parameters(nb, committed, "burstbench/report/parameters.py")
    inject_parameters(nb, values)
    client = NotebookClient(nb, km=kernel.km, kernel_name="python3", timeout=timeout,
                            resources={"metadata": {"path": str(kernel.cwd)}},
                            on_cell_executed=_echo if log else None)
    client.kc = kernel.kc
    kernel.clear_stderr()
    why = None
    try:
        await client.async_execute()
    except CellExecutionError as exc:
        why = f"{exc.ename}: {exc.evalue}"
    except DeadKernelError as exc:
        why = f"the kernel died ({kernel.why(exc)})"
    except Exception as exc:  # a timeout, a message the client could not read: one line
        why = f"{type(exc).__name__}: {first_line(exc)}"
    output.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, output)
    return why


async def _worker(number: int, queue: list[Path], fresh: bool, out_dir: Path,
                  parameters: Parameters, cwd: Path, env: dict, log: bool, timeout: float | None,
                  results: list[Result], kernels: dict[int, Kernel], on_start,
                  stopping) -> None:
    """Take notebooks from the front of `queue` (shared by the workers) until it is empty
    and run each in one kernel (a new one per notebook when `fresh`, or after one died),
    left running in `kernels[number]` (the caller stops it); none after `stopping` is set
    (nbclient turns the cancelling of a cell into DeadKernelError)."""
    import time

    kernel = kernels.get(number)  # launched by the caller, not ready yet
    while queue:
        if stopping.is_set():
            return
        nb = queue.pop(0)  # one event loop: no other worker runs between the test and this
        t0 = time.monotonic()
        launched = kernel is not None and kernel.kc is None  # a first try, if it died
        kernel = await reused(kernel, fresh)
        if kernel is None:
            try:
                kernel = await started(number, cwd, env, log, kernels, tried=int(launched))
            except Exception as exc:  # this notebook fails, the next tries again
                results.append(Result(nb, out_dir / nb.name, f"the kernel did not start: {exc}",
                                      time.monotonic() - t0, number))
                continue
        on_start(nb, number)
        why = await _run_one(kernel, nb, out_dir / nb.name, parameters, log, timeout)
        results.append(Result(nb, out_dir / nb.name, why, time.monotonic() - t0, number))


async def _run_all(notebooks: list[Path], out_dir: Path, parameters: Parameters, cwd: Path,
                   env: dict, log: bool, timeout: float | None, after: str | None,
                   setting: str | None, on_start, stopping) -> tuple[list[Result], str | None]:
    p = plan(notebooks, setting, last_seconds(out_dir))
    results: list[Result] = []
    kernels: dict[int, Kernel] = {}
    after_why: str | None = "not run"
    try:
        for i in range(p.kernels):  # all started before anything else, each with its own core
            kernel = Kernel(i, cwd, env, log)
            try:
                await kernel.launch()
                kernels[i] = kernel
            except Exception:  # the worker tries again, and says why where it fails
                await kernel.stop()
        import nbclient  # noqa: F401  (imported while the kernels start)
        queue = list(p.queue)
        await asyncio.gather(*(_worker(i, queue, p.fresh, out_dir, parameters, cwd, env, log,
                                       timeout, results, kernels, on_start, stopping)
                               for i in range(p.kernels)))
        _keep_seconds(out_dir, results)
        live = [k for _, k in sorted(kernels.items()) if await k.alive()]
        if after and live and not stopping.is_set():
            after_why = await live[0].run_code(after)
    finally:  # also on Ctrl-C: the kernels run in sessions of their own
        await asyncio.gather(*(k.stop() for k in kernels.values()), return_exceptions=True)
    order = {nb: i for i, nb in enumerate(notebooks)}
    return sorted(results, key=lambda r: order.get(r.notebook, 0)), after_why


def _keep_seconds(out_dir: Path, results: list[Result]) -> None:
    """Write TIMINGS for the next build's order: this build's seconds where a notebook ran
    to its end, the last build's for the others."""
    import json

    seconds = last_seconds(out_dir) | {r.notebook.name: round(r.seconds, 3) for r in results
                                       if r.error is None}
    path = Path(out_dir) / TIMINGS
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{TIMINGS}.{os.getpid()}")  # whole or not at all (the store
    part.write_text(json.dumps(seconds, indent=1, sort_keys=True) + "\n")  # imports pandas)
    os.replace(part, path)


def run(notebooks: list[Path], out_dir: Path, parameters: Parameters, cwd: Path,
        env: dict | None = None, log: bool = False, timeout: float | None = None,
        after: str | None = None, setting: str | None = None,
        on_start=lambda nb, kernel: None) -> tuple[list[Result], str | None]:
    """Execute `notebooks` into `out_dir`, each with what `parameters(notebook)` gives (its
    parameters cell as committed, and every value injected after it), `cwd` as the kernels' working
    folder and `env` their environment (default: this process's); then, when given, run the
    code `after` in one of the kernels still up (None when it ran, else why not).

    Returns each notebook's Result (in the order given) and what `after` gave.

    The kernels are driven from a thread of their own: nbclient takes SIGINT for itself
    where it can (it shuts the kernel down and the next notebook would start), so it is
    kept where it cannot, and Ctrl-C reaches this thread, which stops every kernel and
    raises KeyboardInterrupt, as papermill did.
    """
    import threading

    _skip_slow_imports()
    env = dict(os.environ if env is None else env)
    loop = asyncio.new_event_loop()
    stopping, done = threading.Event(), threading.Event()
    task = loop.create_task(_run_all(list(notebooks), Path(out_dir), parameters, Path(cwd),
                                     env, log, timeout, after, setting, on_start, stopping))
    box: dict = {}

    def drive() -> None:
        asyncio.set_event_loop(loop)
        try:
            box["result"] = loop.run_until_complete(task)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:  # as asyncio.run: what nbclient left waiting is cancelled, then the loop closed
            left = asyncio.all_tasks(loop)
            for t in left:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            done.set()

    threading.Thread(target=drive, name="report-kernels", daemon=True).start()
    try:
        done.wait()
    except KeyboardInterrupt:
        print("stopping the report's kernels ...", file=sys.stderr, flush=True)
        stopping.set()
        loop.call_soon_threadsafe(task.cancel)
        done.wait(30)  # (not Thread.join: once interrupted, it may return at once)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]
