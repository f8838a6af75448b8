"""JupyterLab as people use it, in a real browser: Debian's chromium driven by selenium through
Debian's chromium-driver (the driver's path is given, so nothing is downloaded at run time).

One JupyterLab for the module, on 127.0.0.1, a free port and a random token, serving a
temporary folder that holds COPIES of notebooks/ (JupyterLab saves what it edits: the checkout
is left as it was); the kernels find the project through $BURSTBENCH_ROOT. Each notebook is
opened at /lab/workspaces/<its own>/tree/<name>, its parameters cell edited by typing (lines
added at its end, so that everything it writes goes to temporary folders), run with
Run > Run All Cells and saved with File > Save, then checked: every code cell ran, no error
output (in the page and in the saved file), the report notebooks show their figures, the
measurement notebook wrote its run folder. A bad parameter value shows its one-line error.

A screenshot of every notebook is saved to a temporary folder and printed (`pytest -s`), and
named in every failure, with the page's visible error text.

Skipped, with the reason, where selenium, jupyterlab, chromium or chromedriver is missing or
does not start; with BURSTBENCH_REQUIRE_BROWSER=1 (.ci/run sets it where the browser works)
that is a failure instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
REQUIRE = os.environ.get("BURSTBENCH_REQUIRE_BROWSER") == "1"
REPORTS = sorted(p.name for p in NOTEBOOKS.glob("1[0-9][0-9]_report_*.ipynb"))
EXPLORE = "200_explore.ipynb"
MEASURE = "010_measure_triad.ipynb"
BAD = "010_bad_parameter.ipynb"  # a second copy of MEASURE, given a bad value

#: The notebook's state as the page shows it (the one notebook of the workspace).
STATE_JS = """
const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
const dialogs = [...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText.trim());
if (!panel) return {open: false, dialogs: dialogs};
const ind = panel.querySelector('.jp-Notebook-ExecutionIndicator')
    || document.querySelector('.jp-Notebook-ExecutionIndicator');
const outs = [...panel.querySelectorAll('.jp-OutputArea-output')];
const stderr = outs
    .filter(o => o.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr')
    .map(o => o.textContent);
const kernel = panel.querySelector('.jp-KernelName, .jp-Toolbar-kernelName');
return {
  open: true,
  dialogs: dialogs,
  status: ind ? ind.getAttribute('data-status') : null,
  kernel: kernel ? kernel.textContent.trim() : null,
  prompts: [...panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]
    .map(e => e.textContent.trim()),
  stderr: stderr,
  images: panel.querySelectorAll('.jp-OutputArea-output img').length,
  dirty: !!document.querySelector('.lm-TabBar-tab.jp-mod-dirty'),
};
"""
#: An error output as JupyterLab shows it (rendered as stderr text): IPython's traceback, or
#: `Name: value` alone where the traceback is empty.
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b", re.M)


def _problem() -> str:
    """'' where the browser test can run, else why not."""
    for mod, how in (("selenium", "the test extra: .venv/bin/pip install selenium"),
                     ("jupyterlab", "the test and lab extras: make lab installs it")):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed in {sys.prefix} ({how})"
    for prog in ("chromium", "chromedriver"):
        if shutil.which(prog) is None:
            return f"{prog} is not installed (apt-get install chromium chromium-driver)"
    try:
        proc = subprocess.run(["chromedriver", "--version"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"chromedriver --version did not run: {exc}"
    if proc.returncode != 0:
        return f"chromedriver --version failed: {(proc.stderr or proc.stdout).strip()[:300]}"
    return ""


def _unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"BURSTBENCH_REQUIRE_BROWSER=1, but {reason}", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _code_cells(nb: Path) -> list[dict]:
    return [c for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]


#: HTTP to the local server, whatever proxy the environment names.
_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _shutdown_kernels(base: str, token: str) -> None:
    """Stop every kernel of the server (and the processes a notebook started): they run in
    sessions of their own, out of the server's process group."""
    auth = {"Authorization": f"token {token}"}
    try:
        with _HTTP.open(urllib.request.Request(f"{base}/api/kernels", headers=auth),
                        timeout=30) as r:
            kernels = json.loads(r.read())
        for k in kernels:
            _HTTP.open(urllib.request.Request(f"{base}/api/kernels/{k['id']}", method="DELETE",
                                              headers=auth), timeout=60).close()
    except (OSError, urllib.error.URLError, ValueError):
        pass


class Lab:
    """The browser on one JupyterLab: open, edit, run, save, look."""

    def __init__(self, driver, base: str, token: str, root: Path, tmp: Path, log: Path):
        self.driver, self.base, self.token = driver, base, token
        self.root, self.tmp, self.log = root, tmp, log
        self.shots = tmp / "screenshots"
        self.shots.mkdir()

    def shutdown_kernels(self) -> None:
        _shutdown_kernels(self.base, self.token)

    # -- the page -----------------------------------------------------------------------
    def state(self) -> dict:
        return self.driver.execute_script(STATE_JS)

    def screenshot(self, name: str) -> Path:
        path = self.shots / (Path(name).stem + ".png")
        self.driver.save_screenshot(str(path))
        print(f"\nscreenshot: {path}")
        return path

    def fail(self, name: str, what: str) -> None:
        """Fail with a screenshot and what the page shows of errors."""
        try:
            shot = self.screenshot(f"FAILED-{Path(name).stem}")
            st = self.state()
            errors = [s[-1500:] for s in st.get("stderr", []) if TRACEBACK.search(s)]
            shown = (f"kernel {st.get('kernel')!r} {st.get('status')!r}, prompts "
                     f"{st.get('prompts')}, dialogs {st.get('dialogs')}, error outputs {errors}")
        except Exception as exc:  # the page itself is gone
            shot, shown = "(none)", f"the page could not be read: {exc}"
        pytest.fail(f"{name}: {what}\npage: {shown}\nscreenshot: {shot}\n"
                    f"JupyterLab's log (end): {_tail(self.log, 1500)}", pytrace=False)

    @staticmethod
    def poll(cond, timeout: float):
        """`cond()`'s first true value within `timeout` seconds, else None."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = cond()
            except Exception:  # noqa: BLE001 -- a page in the middle of changing
                got = None
            if got or time.monotonic() > deadline:
                return got or None
            time.sleep(0.5)

    def wait(self, name: str, what: str, cond, timeout: float):
        """`cond()`'s first true value, or fail with `what` after `timeout` seconds."""
        got = self.poll(cond, timeout)
        if not got:
            self.fail(name, f"{what} (waited {timeout:.0f} s)")
        return got

    def click(self, name: str, css: str | None = None, xpath: str | None = None,
              timeout: float = 30) -> None:
        from selenium.webdriver.common.by import By

        by, sel = (By.CSS_SELECTOR, css) if css else (By.XPATH, xpath)

        def find():
            el = self.driver.find_element(by, sel)
            return el if el.is_displayed() else None

        self.wait(name, f"no {sel} to click", find, timeout).click()

    def menu(self, name: str, menu: str, item: str) -> None:
        """Menu bar > `menu` > `item`, as a person clicks them: the item once it is enabled,
        then wait for the menu to close (the click was taken)."""
        self.click(name, xpath=f"//li[contains(@class, 'lm-MenuBar-item')]"
                               f"[normalize-space(.)='{menu}']")
        self.click(name, xpath=f"//li[contains(@class, 'lm-Menu-item')]"
                               f"[not(contains(@class, 'lm-mod-disabled'))][.//div[contains("
                               f"@class, 'lm-Menu-itemLabel')][normalize-space(.)='{item}']]")
        self.wait(name, f"the {menu} menu stayed open after {item}", lambda: not self.driver
                  .execute_script("return [...document.querySelectorAll('.lm-Menu')]"
                                  ".some(m => m.offsetParent !== null)"), 30)

    def kernel(self, name: str) -> dict | None:
        """The server's view of the kernel of notebook `name`'s session: its execution_state
        and how many connections (the page's websocket) it has; None before there is one."""
        req = urllib.request.Request(f"{self.base}/api/sessions",
                                     headers={"Authorization": f"token {self.token}"})
        with _HTTP.open(req, timeout=30) as r:
            sessions = json.loads(r.read())
        return next((s["kernel"] for s in sessions if s.get("path") == name), None)

    def open(self, name: str) -> None:
        """The notebook alone in a workspace of its own, its kernel started, idle and
        connected to the page (the server counts the page's connection): a command given
        before that is lost, as Run All was on a loaded machine ("every cell [ ], the kernel
        idle")."""
        ws = re.sub(r"\W", "", Path(name).stem)
        self.driver.get(f"{self.base}/lab/workspaces/{ws}/tree/{name}?token={self.token}")
        n = len(_code_cells(self.root / name))

        def ready():
            st = self.state()
            if st.get("dialogs"):
                self.fail(name, f"a dialog opened: {st['dialogs']}")
            if not (st["open"] and st["status"] == "idle" and len(st["prompts"]) == n):
                return None
            k = self.kernel(name)
            return k and k.get("execution_state") == "idle" and k.get("connections", 0) >= 1

        self.wait(name, f"the notebook did not open with its {n} code cells and a kernel "
                        "idle and connected to the page", ready, 180)

    def add_lines(self, name: str, lines: list[str]) -> None:
        """Type `lines` at the end of the notebook's parameters cell."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        cells = json.loads((self.root / name).read_text())["cells"]
        index = next(i for i, c in enumerate(cells)
                     if "parameters" in c.get("metadata", {}).get("tags", []))
        cell = self.driver.find_elements(
            By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")[index]
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
        cell.find_element(By.CSS_SELECTOR, ".cm-content").click()
        keys = ActionChains(self.driver).key_down(Keys.CONTROL).send_keys(Keys.END)
        keys = keys.key_up(Keys.CONTROL)
        for line in lines:
            keys = keys.send_keys(Keys.ENTER, line)
        keys.send_keys(Keys.ESCAPE).perform()
        text = self.driver.execute_script(
            "return [...arguments[0].querySelectorAll('.cm-line')].map(l => l.textContent)"
            ".join('\\n')", cell)
        missing = [x for x in lines if x not in text.splitlines()]
        if missing:
            self.fail(name, f"typed lines not in the parameters cell: {missing}\ncell: {text}")

    @staticmethod
    def counts(prompts: list[str]) -> list[int | None]:
        """Each code cell's execution count as its prompt shows it; None: not run ('[ ]:')
        or running ('[*]:')."""
        return [int(m.group(1)) if (m := re.fullmatch(r"\[(\d+)\]:", p)) else None
                for p in prompts]

    def run_all(self, name: str, timeout: float) -> dict:
        """Run > Run All Cells; check that it took (a cell queued or ran: a prompt changed,
        not merely the kernel busy), giving the command again while nothing did and the
        kernel is idle; wait until every code cell ran in this Run All (its count above any
        before) or one failed; then File > Save.  Returns the page's state."""
        before = self.state()["prompts"]
        last = max([c for c in self.counts(before) if c is not None], default=0)

        def took():
            return self.state()["prompts"] != before

        for _ in range(3):
            self.menu(name, "Run", "Run All Cells")
            if self.poll(took, 30):
                break
            k = self.kernel(name) or {}
            if k.get("execution_state") != "idle":  # it is running something: it took
                self.wait(name, "Run All Cells: the kernel ran, the cells did not change",
                          took, 60)
                break
            print(f"\n{name}: Run All Cells changed no cell in 30 s (kernel {k}); again")
        else:
            self.fail(name, "Run > Run All Cells changed no cell, three times")

        def finished():
            st = self.state()
            if st.get("dialogs"):
                self.fail(name, f"a dialog opened: {st['dialogs']}")
            if st["status"] != "idle" or any("*" in p for p in st["prompts"]):
                return None
            counts = self.counts(st["prompts"])
            ran = all(c is not None and c > last for c in counts)
            return st if ran or any(TRACEBACK.search(s) for s in st["stderr"]) else None

        st = self.wait(name, "Run All Cells did not finish", finished, timeout)
        saved = (self.root / name).stat().st_mtime_ns
        self.menu(name, "File", "Save Notebook")
        self.wait(name, "File > Save did not save", lambda: not self.state()["dirty"]
                  and (self.root / name).stat().st_mtime_ns != saved, 60)
        return st

    def saved_errors(self, name: str) -> list[str]:
        """The error outputs of the saved notebook: `ename: evalue`."""
        return [f"{o['ename']}: {o['evalue']}" for c in _code_cells(self.root / name)
                for o in c.get("outputs", []) if o["output_type"] == "error"]

    def show(self, css: str, block: str = "center") -> None:
        """Scroll the last element matching `css` into view (for the screenshot): its middle,
        or with block="end" its end."""
        self.driver.execute_script(
            "const e = [...document.querySelectorAll(arguments[0])].pop();"
            "if (e) e.scrollIntoView({block: arguments[1]});", css, block)
        time.sleep(0.5)

    def check_ran_clean(self, name: str, st: dict) -> None:
        errors = [s for s in st["stderr"] if TRACEBACK.search(s)]
        if errors or self.saved_errors(name):
            self.show(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            self.fail(name, f"error output: {self.saved_errors(name)} {[e[-800:] for e in errors]}")
        if not all(re.fullmatch(r"\[\d+\]:", p) for p in st["prompts"]):
            self.fail(name, f"not every code cell ran: {st['prompts']}")


@contextlib.contextmanager
def _jupyterlab(tmp: Path, root: Path, env_extra: dict[str, str], settings: dict[str, dict],
                config: Path | None = None):
    """JupyterLab serving `root` and a headless chromium on it, stopped afterwards; its
    config, data and runtime folders in `tmp`; `settings`: user settings by plugin file
    ("@jupyterlab/apputils-extension/notification"), news and update checks always off;
    `config`: a server config file, as make lab passes the repository's."""
    problem = _problem()
    if problem:
        _unavailable(problem)
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    # Notifications asking about news and updates would cover the notebook: off.
    settings = {"@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false", "checkForUpdates": False}} | settings
    for plugin, values in settings.items():
        path = tmp / "jupyter-config" / "lab" / "user-settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))

    port, token = _free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "JUPYTER_PATH")}
    env |= {
        "BURSTBENCH_ROOT": str(ROOT),  # the kernels run in the copies' folder
        "JUPYTER_CONFIG_DIR": str(tmp / "jupyter-config"),  # nothing of the user's, nor to it
        "JUPYTER_DATA_DIR": str(tmp / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "jupyter-runtime"),
        "IPYTHONDIR": str(tmp / "ipython"),
    } | env_extra
    log = tmp / "jupyterlab.log"
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:
        cmd.append("--ServerApp.allow_root=True")
    if config is not None:
        cmd.append(f"--config={config}")
    base = f"http://127.0.0.1:{port}"
    driver = None
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited ({proc.returncode}) before serving: "
                            f"{_tail(log)}", pytrace=False)
            try:
                with _HTTP.open(f"{base}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer on {base} in 120 s: {_tail(log)}",
                            pytrace=False)
            time.sleep(0.5)

        opts = webdriver.ChromeOptions()
        opts.binary_location = shutil.which("chromium")
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--no-proxy-server", "--window-size=1400,1000", "--no-first-run",
                    f"--user-data-dir={tmp / 'chromium-profile'}"):
            opts.add_argument(arg)
        service = Service(executable_path=shutil.which("chromedriver"),
                          log_output=str(tmp / "chromedriver.log"))
        try:
            driver = webdriver.Chrome(service=service, options=opts)
        except WebDriverException as exc:
            msg = (exc.msg or str(exc)).strip().splitlines()[0].split("; For documentation")[0]
            _unavailable(f"chromium did not start under chromedriver: {msg} "
                         f"(log: {_tail(tmp / 'chromedriver.log', 500)})")
        driver.set_page_load_timeout(120)
        yield Lab(driver, base, token, root, tmp, log)
    finally:
        if driver is not None:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001 -- already gone
                pass
        if proc.poll() is None:
            _shutdown_kernels(base, token)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "notebooks"  # what JupyterLab serves: copies, never the checkout's files
    root.mkdir()
    for nb in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy2(nb, root / nb.name)
    shutil.copy2(NOTEBOOKS / MEASURE, root / BAD)
    with _jupyterlab(tmp, root, {}, {}) as lab:
        yield lab


@pytest.mark.parametrize("name", REPORTS)
def test_report_notebook_shows_its_figures(lab, name):
    figures = lab.tmp / f"figures-{Path(name).stem}"
    lab.open(name)
    lab.add_lines(name, [f'figures_dir = "{figures}"'])
    st = lab.run_all(name, timeout=180)
    lab.show(".jp-OutputArea-output img")
    shot = lab.screenshot(name)
    lab.check_ran_clean(name, st)
    assert st["images"] > 0, f"{name}: no figure shown (screenshot: {shot})"
    written = sorted(p.name for p in figures.iterdir()) if figures.is_dir() else []
    assert any(n.endswith((".png", ".svg")) for n in written), (
        f"{name}: nothing drawn into figures_dir {figures}: {written} (screenshot: {shot})")
    lab.shutdown_kernels()


def test_explore_notebook_runs(lab):
    if not (NOTEBOOKS / EXPLORE).exists():
        pytest.skip(f"notebooks/{EXPLORE} is not in this checkout yet")
    lab.open(EXPLORE)
    st = lab.run_all(EXPLORE, timeout=180)
    lab.show(".jp-OutputArea-output img")
    lab.screenshot(EXPLORE)
    lab.check_ran_clean(EXPLORE, st)
    lab.shutdown_kernels()


def test_measure_notebook_writes_its_run_where_told(lab):
    runs = lab.tmp / "runs"
    lab.open(MEASURE)
    lab.add_lines(MEASURE, [  # papermill_params/smoke.yaml, less the baselines
        'vm = "browser"', f'runs_dir = "{runs}"', "test = True",
        "triad_size = 200000", "triad_ntimes = 2", "triad_threads = [1, 2]",
        'triad_places = ["cores"]', 'triad_bind = ["close"]',
        'triad_variants = [{"compiler": "gcc", "flags": "-O2 -fopenmp"}]',
        "triad_baselines = []", "triad_repetitions = 2", "triad_timeout_s = 120"])
    st = lab.run_all(MEASURE, timeout=240)
    lab.show(".jp-OutputArea-output img")
    shot = lab.screenshot(MEASURE)
    lab.check_ran_clean(MEASURE, st)
    made = sorted(p for p in (runs / "browser").glob("*") if p.is_dir())
    assert len(made) == 1, f"expected one run folder in {runs / 'browser'}: {made} ({shot})"
    assert (made[0] / "triad.csv").stat().st_size > 0 and (made[0] / "provenance.json").exists()
    assert st["images"] > 0, f"{MEASURE}: no figure shown (screenshot: {shot})"
    lab.shutdown_kernels()


def test_bad_parameter_shows_its_one_line_error(lab):
    runs = lab.tmp / "bad-runs"
    lab.open(BAD)
    lab.add_lines(BAD, [f'runs_dir = "{runs}"', "test = True", "triad_ntimes = 1"])
    st = lab.run_all(BAD, timeout=120)
    lab.show(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']", "end")
    shot = lab.screenshot(BAD)
    message = "ParamError: notebook 010_measure_triad.ipynb: triad_ntimes must be at least 2, not 1"
    shown = [s for s in st["stderr"] if TRACEBACK.search(s)]
    assert any(message in " ".join(s.split()) for s in shown), (
        f"the page does not show {message!r}: error outputs {shown} (screenshot: {shot})")
    assert not any("most recent call" in s for s in shown), (
        f"a traceback around the one line: {shown} (screenshot: {shot})")
    assert lab.saved_errors(BAD) == [message], lab.saved_errors(BAD)
    assert not any(runs.glob("*/*")), f"a bad parameter still made a run: {list(runs.rglob('*'))}"
    lab.shutdown_kernels()


def test_a_second_run_all_measures_with_the_edited_parameters(lab):
    """The lost-work issue: edit a parameter, Run All, edit it again, Run All again in the
    same kernel: the second run measures with the second edit (its own VM folder, its own
    array size), not with the first edit or the defaults, and the first run is untouched."""
    name = "010_twice.ipynb"
    shutil.copy2(NOTEBOOKS / MEASURE, lab.root / name)
    runs = lab.tmp / "twice-runs"
    lab.open(name)
    common = [f'runs_dir = "{runs}"', "test = True", "triad_ntimes = 2",
              "triad_threads = [1]", 'triad_places = ["cores"]', 'triad_bind = ["close"]',
              'triad_variants = [{"compiler": "gcc", "flags": "-O2 -fopenmp"}]',
              "triad_baselines = []", "triad_repetitions = 1"]
    lab.add_lines(name, common + ['vm = "first"', "triad_size = 200000"])
    lab.check_ran_clean(name, lab.run_all(name, timeout=240))
    (first,) = (runs / "first").iterdir()
    before = (first / "triad.csv").read_bytes()
    lab.add_lines(name, ['vm = "second"', "triad_size = 300000"])  # later lines win
    st = lab.run_all(name, timeout=240)
    shot = lab.screenshot(name)
    lab.check_ran_clean(name, st)
    (second,) = (runs / "second").iterdir()
    sizes = {vm: set(pd.read_csv(d / "triad.csv")["size"]) for vm, d in
             (("first", first), ("second", second))}
    assert sizes == {"first": {200000}, "second": {300000}}, f"{sizes} (screenshot: {shot})"
    assert sorted(p.name for p in runs.iterdir()) == ["first", "second"]
    assert (first / "triad.csv").read_bytes() == before
    lab.shutdown_kernels()


# -- exploring changes nothing it should not (the checkout as people use it) -----------------

#: Seconds between JupyterLab's autosaves in the clone's lab (its default is 120).  Not
#: fewer: a save that takes longer than the interval (the server's pre-save hook on a
#: loaded machine: 3 test workers on 2 cores) overlaps the next, which then finds the file
#: newer than the page's copy and opens "File Changed" over the menu (CI at 26d18b2, 3 s).
AUTOSAVE_S = 8


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True,
                          check=True).stdout


def test_the_notebook_filter_of_each_worktree_is_its_own(tmp_path):
    """`make nbstripout` in a second worktree of a clone (`git worktree add`, which shares
    the clone's .git/config), then that worktree removed: the clone's filter still cleans
    its notebooks with the clone's own .venv.  With the filter at an absolute path, the
    worktree's make pointed every worktree's filter at its .venv, and once it was gone
    every `git diff`, `git add` and commit failed ("external filter ... failed 127") and
    took the notebooks' outputs."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to keep clean")
    if shutil.which("make") is None:
        pytest.skip("no make: the filter is set by `make nbstripout`")
    clone, other = tmp_path / "repo", tmp_path / "other"
    subprocess.run(["git", "clone", "--quiet", "--local", str(ROOT), str(clone)], check=True)
    for tree in (clone, other):
        if tree == other:
            _git(clone, "worktree", "add", "--quiet", "--detach", str(other))
        (tree / ".venv").symlink_to(sys.prefix)  # each checkout's own environment
        shutil.copy(ROOT / "Makefile", tree)  # this checkout's, committed or not
        made = subprocess.run(["make", "-s", "-C", str(tree), "nbstripout"],
                              capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
    _git(clone, "worktree", "remove", "--force", str(other))
    nb = clone / "notebooks" / EXPLORE
    doc = json.loads(nb.read_text())
    cell = next(c for c in doc["cells"] if c["cell_type"] == "code")
    cell["execution_count"] = 7
    cell["outputs"] = [{"name": "stdout", "output_type": "stream", "text": ["ran\n"]}]
    nb.write_text(json.dumps(doc, indent=1) + "\n")
    diff = subprocess.run(["git", "-C", str(clone), "diff", "--stat", str(nb)],
                          capture_output=True, text=True)  # status: M, as its size changed
    assert (diff.stdout, diff.stderr) == ("", "")


@pytest.fixture(scope="module")
def clone_lab(tmp_path_factory):
    """JupyterLab on a git clone of this repository's HEAD, as `make lab` runs it: its
    notebooks/ served in place (not copies) with the repository's server config, the
    nbstripout filter set (make nbstripout), autosave every AUTOSAVE_S seconds, the
    kernels' project the clone."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to keep clean")
    tmp = tmp_path_factory.mktemp("clone-lab")
    clone = tmp / "repo"
    subprocess.run(["git", "clone", "--quiet", "--local", str(ROOT), str(clone)], check=True)
    if (ROOT.parent / "shared").is_dir():  # beside it, as beside this checkout: the replay's log
        (tmp / "shared").symlink_to((ROOT.parent / "shared").resolve())
    made = subprocess.run(["make", "-s", "-C", str(clone), "nbstripout",
                           f"VENV={Path(sys.prefix)}"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    settings = {"@jupyterlab/docmanager-extension/plugin": {"autosave": True,
                                                             "autosaveInterval": AUTOSAVE_S}}
    with _jupyterlab(tmp, clone / "notebooks", {"BURSTBENCH_ROOT": str(clone)},
                     settings, clone / "jupyter_server_config.py") as lab:
        lab.clone = clone
        yield lab


def _clean(lab, name: str, shot: Path, *folders: str) -> None:
    time.sleep(AUTOSAVE_S * 3)  # past the autosave interval, twice over
    status = _git(lab.clone, "status", "--porcelain", "--untracked-files=all", *folders)
    assert status == "", f"{name} left the checkout changed: {status} (screenshot: {shot})"


@pytest.mark.parametrize("name", ["190_report_cost.ipynb", EXPLORE])
def test_opening_and_running_leaves_git_clean(clone_lab, name):
    """Open, Run All, File > Save, autosave: the notebook opens unmodified (it showed as
    unsaved the moment it opened: its kernel's language_info, which the file lacks), the
    notebook on disk is as committed (its outputs stay on the page), and nothing under
    notebooks/ or figures/ changed."""
    lab = clone_lab
    lab.open(name)
    time.sleep(2)  # the kernel's info has reached the page (it is idle and connected)
    assert not lab.state()["dirty"], f"{name} shows as modified on opening"
    st = lab.run_all(name, timeout=240)
    shot = lab.screenshot(f"{Path(name).stem}-clean")
    lab.check_ran_clean(name, st)
    assert st["images"] > 0, f"{name}: no figure shown (screenshot: {shot})"
    _clean(lab, name, shot, "notebooks", "figures")
    assert not _code_cells(lab.clone / "notebooks" / name)[-1].get("outputs"), "outputs saved"
    lab.shutdown_kernels()


def test_your_job_goes_to_your_folder_and_git_stays_clean(clone_lab):
    """190 with a user's job, run and saved (and autosaved): the decision goes to
    build/mine/, said in the last cell; notebooks/ and figures/ stay as committed."""
    lab, name = clone_lab, "190_report_cost.ipynb"
    lab.open(name)
    lab.add_lines(name, ['user_job = {"name": "mine", "problem": {"poisson": [64, 64, 64], '
                         '"iterations": 70}, "solves": 1000, "nodes": [1, 2]}'])
    st = lab.run_all(name, timeout=240)
    lab.driver.execute_script(  # the decision's figure: the last but one (the tornado last)
        "const i = [...document.querySelectorAll('.jp-OutputArea-output img')];"
        "i[i.length - 2].scrollIntoView({block: 'start'});")
    time.sleep(0.5)
    shot = lab.screenshot("190-decision-figure")
    lab.check_ran_clean(name, st)
    mine = lab.clone / "build" / "mine"
    assert "mine, 1 node(s)" in (mine / "burst_decision.csv").read_text(), shot
    said = lab.driver.execute_script(
        "return [...document.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent)"
        ".join('\\n')")
    assert f"written to {mine}" in said, f"the notebook does not say where: {shot}"
    _clean(lab, name, shot, "figures")
    lab.shutdown_kernels()


@pytest.mark.parametrize("line,message", [
    ('user_job = {"name": "mine", "node": [1, 2], "problem": {"poisson": [64, 64, 64]}}',
     "user_job: unknown key 'node' (did you mean nodes? the keys are: name, nodes, "
     "problem, solves, input_gb, output_gb, keep_months, flow_node_hours)"),
    ('user_job = {"name": "mine", "input_gb": -50, "problem": {"poisson": [64, 64, 64]}}',
     "user_job: input_gb must be a number of 0 or more (GB), not -50"),
    ('usd_jpy = "145 yen"', "usd_jpy must be a positive number (JPY per USD), not '145 yen'")])
def test_a_bad_job_is_one_line_in_the_notebook(clone_lab, line, message):
    lab, name = clone_lab, "190_report_cost.ipynb"
    lab.open(name)
    lab.add_lines(name, [line])
    st = lab.run_all(name, timeout=240)
    lab.show(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']", "end")
    shot = lab.screenshot(f"190-{message.split()[0].strip(':')}")
    shown = [" ".join(s.split()) for s in st["stderr"] if TRACEBACK.search(s)]
    assert shown == [f"ParamError: notebook {name}: {message}"], (
        f"error outputs {shown} (screenshot: {shot})")
    assert lab.state()["images"] == 0  # the check comes first: nothing drawn with it
    _clean(lab, name, shot, "figures")
    lab.shutdown_kernels()


def _changed_parameters(clone: Path, name: str) -> list[str]:
    """The lines a notebook's saved parameters cell gained since HEAD; fails where anything
    else in it changed (another cell, outputs, metadata)."""
    head = json.loads(_git(clone, "show", f"HEAD:notebooks/{name}"))
    now = json.loads((clone / "notebooks" / name).read_text())
    assert len(now["cells"]) == len(head["cells"]) and now["metadata"] == head["metadata"], name
    added = []
    for old, new in zip(head["cells"], now["cells"]):
        if "parameters" in old["metadata"].get("tags", []):
            before = "".join(old["source"]).splitlines()
            lines = "".join(new["source"]).splitlines()
            assert lines[:len(before)] == before, name
            added = [x for x in lines[len(before):] if x.strip()]
        else:
            assert new == old, f"{name}: a cell other than the parameters changed"
    return added


def test_exploring_a_clone_leaves_the_report_and_the_runs_as_they_were(clone_lab):
    """What a user does in a fresh clone (the issue's "done when"): 190 edited (a job with no
    output, a 4-hour wait, Japan East) and 010 edited for a try-out, each run and autosaved.
    The answer is the edited one and says where it went; the try-out lands in build/runs;
    `git status` shows the two notebooks' parameters cells and nothing else (no run, no
    lock, no figure); `make figures` then rebuilds figures/ byte for byte as committed."""
    lab, cost = clone_lab, "190_report_cost.ipynb"
    clone = lab.clone
    _git(clone, "checkout", "--", "notebooks")  # as cloned, whatever earlier tests saved
    figures = {p.name: p.read_bytes() for p in (clone / "figures").iterdir()}
    job = ['queue_wait_h = 4', 'region = "Japan East"',
           'user_job = {"name": "mine", "problem": {"poisson": [64, 64, 64], "iterations": 70}'
           ', "solves": 1000, "nodes": [1, 2], "output_gb": 0}']
    lab.open(cost)
    lab.add_lines(cost, job)
    st = lab.run_all(cost, timeout=300)
    lab.show(".jp-OutputArea-output h2", "start")  # the answer's heading
    shot = lab.screenshot("190-answer")
    lab.check_ran_clean(cost, st)
    said = " ".join(lab.driver.execute_script(
        "return [...document.querySelectorAll('.jp-OutputArea-output')]"
        ".map(o => o.textContent).join('\\n')").split())
    mine = clone / "build" / "mine"
    for text in ("What would have been chosen in Japan East", "4.0 h wait",
                 "The job: 1,000 solve(s) on 1 node(s), 10 GB in and 0 GB out (user_job; "
                 "assumed: job_input_gb); staging",
                 "The network rate assumed for staging to Japan East:",
                 f"written to {mine} (build/mine/: yours, ignored by git; `make figures` "
                 "writes figures/)"):
        assert text in said, f"{text!r} not shown (screenshot: {shot})"
    lab.shutdown_kernels()

    tryout = ['vm = "mine"', "test = True", "triad_size = 200000", "triad_ntimes = 2",
              "triad_threads = [1]", 'triad_variants = [{"compiler": "gcc", "flags": '
              '"-O2 -fopenmp"}]', 'triad_bind = ["close"]', "triad_baselines = []",
              "triad_repetitions = 1"]
    lab.open(MEASURE)
    lab.add_lines(MEASURE, tryout)
    st = lab.run_all(MEASURE, timeout=300)
    shot = lab.screenshot("010-tryout")
    lab.check_ran_clean(MEASURE, st)
    said = lab.driver.execute_script(
        "return [...document.querySelectorAll('.jp-OutputArea-output')]"
        ".map(o => o.textContent).join('\\n')")
    assert f"a try-out: writing under {clone / 'build' / 'runs'} (ignored by git)" in said, shot
    assert len(list((clone / "build" / "runs" / "mine").iterdir())) == 1
    lab.shutdown_kernels()

    time.sleep(AUTOSAVE_S * 3)  # past the autosave interval, twice over
    status = _git(clone, "status", "--porcelain", "--untracked-files=all")
    assert status.splitlines() == [f" M notebooks/{MEASURE}", f" M notebooks/{cost}"], status
    assert _changed_parameters(clone, cost) == job
    assert _changed_parameters(clone, MEASURE) == tryout

    made = subprocess.run(["make", "-s", "-C", str(clone), "figures", f"VENV={sys.prefix}",
                           "STAMP="], capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    assert _git(clone, "status", "--porcelain", "--untracked-files=all") == status
    rebuilt = {p.name: p.read_bytes() for p in (clone / "figures").iterdir()}
    assert rebuilt.keys() == figures.keys()
    assert [n for n in figures if rebuilt[n] != figures[n]] == []
