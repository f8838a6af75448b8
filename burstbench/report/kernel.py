"""One Jupyter kernel of the report's (burstbench.report.executor), started again where it
dies before it answers, and reset between two notebooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Run in a kernel between two notebooks, so that the next one starts as in a fresh kernel:
#: no figure open, matplotlib's settings as read from its rc file (apply_style's theme gone),
#: the namespace empty.  Modules stay imported: that is the point.
RESET = ("import matplotlib as _mpl, matplotlib.pyplot as _plt\n"
         "_plt.close('all')\n"
         "_mpl.rc_file_defaults()\n"
         "del _mpl, _plt\n"
         "get_ipython().run_line_magic('reset', '-f')\n")


#: Kernels started for one notebook before it fails.  A kernel can die before it answers
#: for a reason of the moment: jupyter_client picks its ports free and the kernel binds them
#: a moment later, when any process on the machine may have taken one.  A new kernel has new
#: ports.  A kernel that cannot start at all fails the same way each time, and says why.
STARTS = 3


def first_line(exc: BaseException) -> str:
    """The first line of what `exc` says ('' where it says nothing)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


class Kernel:
    """One Jupyter kernel: launched, then ready once it answers; its stderr kept."""

    def __init__(self, number: int, cwd: Path, env: dict, log: bool):
        self.number, self.cwd, self.env, self.log = number, cwd, env, log
        self.km: Any = None  # the kernel's manager and client, once launched
        self.kc: Any = None
        self.stderr: Any = None  # what the kernel wrote there, kept to say why it died

    async def start(self) -> None:
        await self.launch()
        await self.ready()

    async def launch(self) -> None:
        """Start the kernel's process; ready() waits until it answers."""
        import subprocess
        import tempfile

        from jupyter_client.manager import AsyncKernelManager

        self.km = AsyncKernelManager(kernel_name="python3")
        # the kernel's own messages (ipykernel's warning about TCP without encryption)
        # only with --verbose; what a notebook prints is in the executed notebook
        quiet = {}
        if not self.log:
            self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            quiet = {"stdout": subprocess.DEVNULL, "stderr": self.stderr}
        await self.km.start_kernel(cwd=str(self.cwd), env=self.env, **quiet)

    async def ready(self) -> None:
        self.kc = self.km.client()
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=120)

    def clear_stderr(self) -> None:
        """Forget what the kernel wrote to its stderr so far (the file's offset is the
        kernel's too): the last words of a kernel that dies are then the last notebook's."""
        if self.stderr is not None:
            self.stderr.seek(0)
            self.stderr.truncate()

    def why(self, exc: BaseException) -> str:
        """`exc` in one line, with the last line the kernel wrote to its stderr (where
        it was kept: not with --verbose, where it went to this process's)."""
        why = first_line(exc) or type(exc).__name__
        if self.stderr is not None:
            self.stderr.seek(0)
            said = [line.strip() for line in self.stderr.read().splitlines() if line.strip()]
            if said:
                why += f" (its last words: {said[-1]})"
        return why

    async def alive(self) -> bool:
        return self.km is not None and await self.km.is_alive()

    async def run_code(self, code: str, timeout: float = 120) -> str | None:
        """Run `code` quietly; None when it worked, else 'ename: evalue'."""
        reply = await self.kc.execute_interactive(code, silent=True, store_history=False,
                                                  output_hook=lambda msg: None,
                                                  timeout=timeout)
        content = reply["content"]
        return None if content["status"] == "ok" else \
            f"{content.get('ename')}: {content.get('evalue')}"

    async def stop(self) -> None:
        if self.kc is not None:
            self.kc.stop_channels()
        try:
            if self.km is not None:
                try:
                    if await self.km.is_alive():
                        await self.km.shutdown_kernel(now=True)
                finally:
                    await self.km.cleanup_resources()
        finally:
            if self.stderr is not None:
                self.stderr.close()
            self.km = self.kc = self.stderr = None


async def reused(kernel: Kernel | None, fresh: bool) -> Kernel | None:
    """`kernel` ready for the next notebook: answering (one launched by the caller), or
    alive and reset; None where a new one is needed (this one stopped)."""
    if kernel is None:
        return None
    try:
        if kernel.kc is None:
            await kernel.ready()
            return kernel
        if not fresh and await kernel.alive() and not await kernel.run_code(RESET):
            return kernel  # (a kernel that cannot reset is not reused)
    except Exception:  # it died while starting, or does not answer: a new one
        pass
    await _stopped(kernel)
    return None


async def started(number: int, cwd: Path, env: dict, log: bool, kernels: dict[int, Kernel],
                  tried: int = 0) -> Kernel:
    """A new kernel, answering, as kernels[number]; where one dies before it answers,
    another, STARTS in all with the `tried` already (a launched one that died); then
    RuntimeError says why the last one died.  One that is alive but does not answer is not
    followed by another (it would wait as long).  Each is in `kernels` from its launch, so
    that the caller stops it where this is cancelled (Ctrl-C)."""
    why, n = "", tried
    while n < max(STARTS, tried + 1):
        n += 1
        kernel = kernels[number] = Kernel(number, cwd, env, log)
        try:
            await kernel.start()
            return kernel
        except Exception as exc:
            why = kernel.why(exc)
            try:
                died = not await kernel.alive()
            except Exception:
                died = True
            await _stopped(kernel)
            if not died:
                break
    raise RuntimeError(f"{why}; {n} kernel{'s' if n > 1 else ''} tried")


async def _stopped(kernel: Kernel) -> None:
    """kernel.stop(), whatever it raises: a kernel that failed is left for the next."""
    try:
        await kernel.stop()
    except Exception:
        pass
