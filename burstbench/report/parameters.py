"""The report notebooks' parameters, declared once: each notebook's names, defaults, checks and
meanings (the report-parameter counterpart of burstbench.params for the measurement notebooks).

This is the one source of what `make figures` and `burstbench report` pass to a notebook:
every parameter a report notebook has is injected from here (its default, or the value a
report-parameter file gives with `--params`), never read from the notebook's saved parameters
cell, which is the explorer's own (JupyterLab autosaves it).  The committed notebooks'
parameters cells hold exactly these defaults (a test compares them).

In a notebook run by hand, :func:`from_namespace` reads the parameters by name after the
parameters cell ran and checks every one: a bad value is one line naming the parameter, what
it got and what it takes.

Light: no pandas, no plotting (``burstbench params`` imports it).

Long: every report notebook's parameters are declared here, each with its check and its
meaning, so that one file is the source make figures injects from (and the checks they need,
which keep a valid value as written: the figures rebuild byte for byte).
"""

from __future__ import annotations

import csv
import difflib
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from burstbench.core.checks import Param, ParamError, as_number, check_typed, strict_keys

#: The solve the burst decision's time model is fitted on unless told: the study's own
#: problem, Poisson 256 x 256 x 512 (5.0 GiB in tiles), in the decision's layout on this
#: machine (papermill_params/local-model.yaml measures it), the size the decision prices
#: (5.0 GiB on 1 node, 646 MiB a node on 8).  Fitted on 128^3 instead (then 414 MiB,
#: beside this VM's 300 MiB last-level cache), the efficiency followed the VM's memory
#: state, 0.57-0.81 over four runs of one day, and the large grids' predicted times came out
#: up to 44% longer than measured; on the study's problem it stayed at 0.79-0.89
#: (comparisons/README.md, "The refits of the day") until three later fits gave 0.40-0.42,
#: each where its run's Triad had met the VM's fast state and the solve had not: a solve is
#: now fitted at the Triad its process measures beside it (biccg_triad_beside; predict.py,
#: assumption 1).
MODEL_REFERENCE = {"vm": "local", "problem": "poisson256x256x512", "layout": "2x1"}

# -- checks that keep a valid value as written (the figures rebuild byte for byte) --------


def _number(name: str, zero: bool = True, unit: str = "") -> Callable[[Any], Any]:
    """A finite number of 0 or more (above 0 unless `zero`); a string holding one ('1e-7')
    is taken as that number; a number is kept as written (4 stays 4, not 4.0)."""
    what = ("a number of 0 or more" if zero else "a positive number") + (f" ({unit})"
                                                                          if unit else "")

    def check(v: Any) -> Any:
        x = as_number(v)
        if x is None or not math.isfinite(x) or x < 0 or (x == 0 and not zero):
            raise ParamError(f"{name} must be {what}, not {v!r}")
        return v if isinstance(v, (int, float)) else x

    return check


def _integer(name: str, minimum: int) -> Callable[[Any], int]:
    """An integer of at least `minimum` (an integral float or '1e3' is taken as one)."""
    def check(v: Any) -> int:
        x = as_number(v)
        if x is None or not math.isfinite(x) or x != int(x) or x < minimum:
            raise ParamError(f"{name} must be an integer of at least {minimum}, not {v!r}")
        return v if isinstance(v, int) else int(x)

    return check


def _text(name: str, what: str = "a string") -> Callable[[Any], str]:
    return check_typed(name, str, what)


def _flag(name: str) -> Callable[[Any], bool]:
    return check_typed(name, bool, "True or False")


def _numbers(name: str) -> Callable[[Any], list]:
    """A non-empty list of numbers of 0 or more."""
    def check(v: Any) -> list:
        one = _number(name)
        if not isinstance(v, list) or not v:
            raise ParamError(f"{name} must be a list of numbers of 0 or more, not {v!r}")
        try:
            return [one(x) for x in v]
        except ParamError:
            raise ParamError(f"{name} must be a list of numbers of 0 or more, not {v!r}") \
                from None

    return check


def _increasing(name: str, unit: str) -> Callable[[Any], list]:
    """A non-empty list of positive numbers, increasing."""
    def check(v: Any) -> list:
        out = _numbers(name)(v)
        if any(float(x) <= 0 for x in out) or any(float(a) >= float(b)
                                                   for a, b in zip(out, out[1:])):
            raise ParamError(f"{name} must be positive numbers ({unit}), increasing, not {v!r}")
        return out

    return check


def _probabilities(name: str) -> Callable[[Any], list]:
    """A non-empty list of probabilities, each strictly between 0 and 1, increasing: the
    replay's own check (burstbench.replay.policy.check_p_sooner)."""
    def check(v: Any) -> list:
        from burstbench.replay.policy import check_p_sooner

        return check_p_sooner(v, name)

    return check


def _range(name: str, unit: str, zero_means: str = "") -> Callable[[Any], Any]:
    """A number, [low, high] or [low, mode, high], each 0 or more, low <= mode <= high;
    with `zero_means`, 0 stands for that (said in the message)."""
    takes = (f"a number of 0 or more ({unit}), [low, high] or [low, mode, high]"
             + (f"; 0: {zero_means}" if zero_means else ""))

    def check(v: Any) -> Any:
        items = v if isinstance(v, list) else [v]
        parsed = [as_number(x) for x in items]
        xs = [x for x in parsed if x is not None and math.isfinite(x) and x >= 0]
        if not 1 <= len(items) <= 3 or (isinstance(v, list) and len(items) == 1) or \
                len(xs) < len(items):
            raise ParamError(f"{name} must be {takes}, not {v!r}")
        if any(a > b for a, b in zip(xs, xs[1:])) or (len(xs) == 3 and xs[0] > xs[2]):
            raise ParamError(f"{name} must be {takes}, low <= mode <= high, not {v!r}")
        return v if all(isinstance(x, (int, float)) for x in items) else (
            xs if isinstance(v, list) else xs[0])

    return check


def _wan(name: str) -> Callable[[Any], Any]:
    """The WAN: one number or range for every region (0: each region's published bounds),
    or {region: a positive number or range}, each region its own network."""
    one = _range(name, "MiB/s", "each region's published bounds (data/reference/"
                 "wan_paths.csv, gfarm_azure_gfrep.csv)")

    def check(v: Any) -> Any:
        if not isinstance(v, dict):
            return one(v)
        out = {}
        for region, x in v.items():
            got = _range(f"{name} for {region}", "MiB/s")(x)
            low = got[0] if isinstance(got, list) else got
            if not low > 0:
                raise ParamError(f"{name} for {region} must be positive (MiB/s), not {x!r}")
            out[str(region)] = got
        return out

    return check


def _fraction_range(name: str) -> Callable[[Any], Any]:
    """A fraction in (0, 1], or [low, mode, high] of them."""
    def check(v: Any) -> Any:
        out = _range(name, "a fraction of 1 or less")(v)
        items = out if isinstance(out, list) else [out]
        if any(not 0 < float(x) <= 1 for x in items):
            raise ParamError(f"{name} must be a fraction above 0 and at most 1, or [low, "
                             f"mode, high] of them, not {v!r}")
        return out

    return check


def _mapping(name: str, keys: tuple[str, ...]) -> Callable[[Any], dict]:
    """A mapping of exactly `keys`, each a string."""
    def check(v: Any) -> dict:
        strict_keys(name, v, keys)
        missing = [k for k in keys if k not in v]
        bad = [k for k in keys if k in v and not isinstance(v[k], str)]
        if missing or bad:
            raise ParamError(f"{name} must be a mapping of {', '.join(keys)}, each a string, "
                             f"not {v!r}")
        return v

    return check


def _user_job(v: Any) -> dict:
    """Your job, checked strictly as the decision reads it (burstbench.cost.burst)."""
    if v in ({}, None):
        return {}
    from burstbench.cost import job, user_job

    try:
        user_job.user_jobs(v, job.Data(1, 1), 1)
    except ParamError as exc:
        msg = str(exc)
        raise ParamError(msg if msg.startswith("user_job") else f"user_job: {msg}") from None
    return v


def _strings(name: str) -> Callable[[Any], list]:
    def check(v: Any) -> list:
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise ParamError(f"{name} must be a list of strings, not {v!r}")
        return v

    return check


def _side(name: str) -> Callable[[Any], dict]:
    """One side of explore's comparison: {} or a mapping of a table column (vm, run_id,
    host, ...) to the value its rows hold."""
    def check(v: Any) -> dict:
        if v in ({}, None):
            return {}
        if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
            raise ParamError(f"{name} must be a mapping such as {{\"vm\": \"local\"}} or "
                             f"{{\"run_id\": \"...\"}}, not {v!r}")
        return v

    return check


def _choice(name: str, allowed: tuple[str, ...]) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if v not in allowed:
            raise ParamError(f"{name} must be one of {', '.join(allowed)}, not {v!r}")
        return v

    return check


# -- the declarations -----------------------------------------------------------------------

#: Every report notebook's folders (`burstbench report`'s own options; never a --params key).
FOLDERS = (
    Param("runs_dir", "", "runs to read; empty: data/runs of this project", _text("runs_dir")),
    Param("reference_dir", "", "the study's tables; empty: data/reference",
          _text("reference_dir")),
    Param("figures_dir", "", "where figures and tables go; empty: build/mine/ (yours; make "
          "figures writes figures/)", _text("figures_dir")),
)
FOLDER_NAMES = tuple(p.name for p in FOLDERS)

COST = FOLDERS + (
    Param("usd_jpy", 145.0, "exchange rate for USD prices (the study: 145)",
          _number("usd_jpy", zero=False, unit="JPY per USD")),
    Param("region", "East US", "region of the prices in the figures and of the decision's "
          "answer (one of the regions data/reference/prices_vm.csv prices: East US or Japan "
          "East)", _text("region")),
    Param("spot_vm", "HB120rs_v3", "VM of the spot model (one with a spot price)",
          _text("spot_vm")),
    Param("job_nodes", 4, "nodes of the modelled job", _integer("job_nodes", 1)),
    Param("job_hours", 10.0, "hours of work of the modelled job",
          _number("job_hours", zero=False, unit="hours")),
    Param("checkpoint_h", 1.0, "checkpoint interval (hours)",
          _number("checkpoint_h", zero=False, unit="hours")),
    Param("restart_h", 0.0833, "hours from eviction to restart (the study: about 5 minutes "
          "from submission)", _number("restart_h", unit="hours")),
    Param("eviction_rates", [0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0],
          "evictions per hour to model", _numbers("eviction_rates")),
    Param("model_reference", MODEL_REFERENCE, "the solve the time model is fitted on",
          _mapping("model_reference", ("vm", "problem", "layout"))),
    Param("flow_system", "Flow Cloud System", "Flow's subsystem the VMs are compared with "
          "(its fee, its nodes)", _text("flow_system")),
    Param("flow_fraction", 0.793, "most likely Triad / theoretical on Flow (HC44rs's 203 of "
          "256 GB/s); ranges over the study's VMs' (0.57-0.79); or [low, mode, high]",
          _fraction_range("flow_fraction")),
    Param("flow_vm", "flow-cloud", "the label of Flow's own runs (data/runs/<flow_vm>/): where "
          "one exists, its Triad replaces the theoretical figure", _text("flow_vm")),
    Param("queue_wait_h", 1.0, "the queue wait on Flow the verdict is for (hours): burst, stay "
          "or undecided", _number("queue_wait_h", unit="hours")),
    Param("deploy_minutes", [4.0, 5.0, 10.0], "from submission to start on the VMs, billed: "
          "[low, mode, high] or a number (the study: about 5)",
          _range("deploy_minutes", "minutes")),
    Param("wan_mib_s", 0, "staging between Flow and the cloud, MiB/s: a number, [low, high] or "
          "[low, mode, high] for every region, or {region: one of those} each its own; 0: "
          "each region's published bounds (Japan East: Gfarm on Azure within a region to "
          "between regions, 23-117; East US: one TCP stream across the Pacific, 18-37)",
          _wan("wan_mib_s")),
    Param("job_solves", 100, "solves per job of each job class", _integer("job_solves", 1)),
    Param("job_input_gb", 10.0, "GB staged in per job (ingress: free)",
          _number("job_input_gb", unit="GB")),
    Param("job_output_gb", 30.0, "GB staged out per job (egress: priced)",
          _number("job_output_gb", unit="GB")),
    Param("keep_months", 0.0, "months the job's data stays on the cloud storage after the job "
          "(0: sent home)", _number("keep_months", unit="months")),
    Param("egress_free_gb", 0.0, "free egress allowance per job, GB (the study states none)",
          _number("egress_free_gb", unit="GB")),
    Param("pool_min_tib", 4.0, "Azure NetApp Files capacity pool minimum, TiB (the study's 4)",
          _number("pool_min_tib", zero=False, unit="TiB")),
    Param("pool_jobs_per_month", 30, "burst jobs a month sharing the study's always-on pool",
          _number("pool_jobs_per_month", zero=False, unit="jobs")),
    Param("g3_iterations", 0, "G3_circuit CG iterations to use; 0: those measured here "
          "(unpriced if none)", _integer("g3_iterations", 0)),
    Param("user_job", {}, "your job: {name, problem: {poisson: [nx, ny, nz]} or {n, nnz, "
          "iterations}, solves, nodes: [..], input_gb, output_gb, keep_months}, or {name, "
          "flow_node_hours, nodes}", _user_job),
    Param("spot_evictions_per_h", [0.02, 0.1, 0.3], "evictions per hour of the decision's spot "
          "rows: [low, mode, high] or a number", _range("spot_evictions_per_h", "per hour")),
    Param("spot_start_minutes", [0.0, 5.0, 60.0], "from submission to start of a spot row's "
          "VMs beyond deployment, waiting for free capacity: [low, mode, high] or a number "
          "(assumed: the study gives none)", _range("spot_start_minutes", "minutes")),
    Param("platform_jpy_per_month", 0, "the always-on CycleCloud server and master node, JPY "
          "a month, shared by pool_jobs_per_month jobs; 0: two 4-vCPU D-series v5 VMs at "
          "Table 4's D32s_v5 price / 8, 730 h, in the option's region", _number(
              "platform_jpy_per_month", unit="JPY per month")),
    Param("mc_draws", 4000, "Monte Carlo draws of the uncertain inputs",
          _integer("mc_draws", 100)),
    Param("mc_seed", 2023, "their seed: the figures rebuild byte for byte",
          _integer("mc_seed", 0)),
)

#: Notebook 150's parameters as they stand (the replay's own code reads them).
REPLAY = FOLDERS + (
    Param("replay_log", "../shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz", "the accounting log "
          "(relative to the project root, or absolute)", _text("replay_log")),
    Param("replay_format", "", "swf, sacct or pbs; empty: guessed from the content",
          _choice("replay_format", ("", "swf", "sacct", "pbs"))),
    Param("flow_system", "Flow Cloud System", "the on-premise system: its node-hour fee and "
          "node Triad", _text("flow_system")),
    Param("replay_procs_per_node", 0, "processors per node of the log's machine; 0: its header "
          "(MaxProcs / MaxNodes)", _integer("replay_procs_per_node", 0)),
    Param("replay_machine_nodes", 0, "nodes of the log's machine; 0: its header's MaxNodes, "
          "else the most its jobs held at once", _integer("replay_machine_nodes", 0)),
    Param("replay_shared_nodes", False, "jobs shared nodes: the queue counts processors, a "
          "burst job takes whole VM nodes", _flag("replay_shared_nodes")),
    Param("replay_p_sooner", [0.5, 0.8, 0.9, 0.95, 0.98], "a job bursts when P(the VM returns it "
          "sooner) is at least this (each between 0 and 1, increasing)",
          _probabilities("replay_p_sooner")),
    Param("replay_gain_h", [4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0], "a job bursts when "
          "the hours it is expected to save are at least this x its chance of coming back "
          "later (hours, increasing)", _increasing("replay_gain_h", "hours")),
    Param("replay_thresholds_h", [0.1667, 1.0, 4.0, 12.0, 24.0, 48.0],
          "predicted median waits (and queue-state waits) a job bursts above (hours, "
          "increasing)", _increasing("replay_thresholds_h", "hours")),
    Param("replay_learn", True, "the learned model (LightGBM) on top of the history; False: "
          "the history alone", _flag("replay_learn")),
    Param("region", "East US", "region of the prices (East US or Japan East)", _text("region")),
    Param("replay_billing", "payg", "payg or spot (spot: its price; evictions are not "
          "replayed)", _choice("replay_billing", ("payg", "spot"))),
    Param("replay_storage", "pool per job", "pool per job, or shared pool (the study's "
          "always-on 4 TiB)", _choice("replay_storage", ("pool per job", "shared pool"))),
    Param("replay_classes", [], "job classes: [{name, max_nodes, queue, input_gb, output_gb, "
          "keep_months, speed: memory | biccg | a ratio}]; empty: one class of every job",
          lambda v: v if isinstance(v, list) else _text("replay_classes", "a list")(v)),
    Param("job_input_gb", 10.0, "input staged to the VM per job (GB), where a class does not "
          "say", _number("job_input_gb", unit="GB")),
    Param("job_output_gb", 30.0, "output staged back per job (GB), where a class does not say",
          _number("job_output_gb", unit="GB")),
    Param("deploy_minutes", [4.0, 5.0, 10.0], "from submission to start on the VMs, billed: "
          "[low, mode, high] or a number", _range("deploy_minutes", "minutes")),
    Param("pool_min_tib", 4.0, "the smallest Azure NetApp Files pool a job takes (TiB)",
          _number("pool_min_tib", zero=False, unit="TiB")),
    Param("pool_jobs_per_month", 30.0, "burst jobs a month sharing the always-on pool "
          "(replay_storage: shared pool)", _number("pool_jobs_per_month", zero=False)),
    Param("egress_free_gb", 0.0, "free data transfer out per job (GB)",
          _number("egress_free_gb", unit="GB")),
    Param("wan_mib_s", 0, "staging between the centre and the cloud (MiB/s): 0 = the region's "
          "published bounds, or a number / range, or {region: one of those}",
          _wan("wan_mib_s")),
    Param("flow_fraction", 0.793, "most likely Triad / theoretical on the on-premise system; "
          "or [low, mode, high]", _fraction_range("flow_fraction")),
    Param("flow_vm", "flow-cloud", "the label of the on-premise system's own runs: where one "
          "exists, its Triad", _text("flow_vm")),
    Param("replay_draws", 40, "seeded draws of the uncertain inputs (the bands)",
          _integer("replay_draws", 1)),
    Param("mc_seed", 2023, "the draws' seed", _integer("mc_seed", 0)),
    Param("usd_jpy", 145.0, "exchange rate for USD prices (the study: 145)",
          _number("usd_jpy", zero=False, unit="JPY per USD")),
)

EXPLORE = (
    Param("folders", [], "more run folders beside data/runs, e.g. [\"/mnt/results\"] (your "
          "try-outs: [\"build/runs\"])", _strings("folders")),
    Param("include_tests", False, "also show runs of params files marked `test: true` "
          "(smoke.yaml, your try-outs)", _flag("include_tests")),
    Param("vms", [], "VMs to keep (empty: all)", _strings("vms")),
    Param("benchmarks", [], "of triad, pingpong, biccg, storage (empty: all)",
          _strings("benchmarks")),
    Param("a", {}, "one side, e.g. {\"vm\": \"local\"} or {\"run_id\": \"...\"}", _side("a")),
    Param("b", {}, "the other side (both empty: the two newest runs of a VM, or two VMs)",
          _side("b")),
    Param("new_vm", "", "the VM to place against the study (empty: the newest run's VM)",
          _text("new_vm")),
)

def _probability(name: str) -> Callable[[Any], Any]:
    """One probability strictly between 0 and 1."""
    def check(v: Any) -> Any:
        x = as_number(v)
        if x is None or not 0 < x < 1:
            raise ParamError(f"{name} must be a probability between 0 and 1 (not 0 or 1), "
                             f"not {v!r}")
        return v

    return check


ADVISE = (
    Param("snapshot", "data/advise/slurm-test-cluster.json", "a queue saved by `burstbench "
          "advise --json --save FILE` (relative to the project root, or absolute); empty: "
          "the live queue of `scheduler`", _text("snapshot")),
    Param("scheduler", "", "slurm or pbs: read the live queue (with snapshot empty)",
          _choice("scheduler", ("", "slurm", "pbs"))),
    Param("cloud", "cloud", "the cloud partition (Slurm) or queue (PBS): not the on-premise "
          "queue's", _text("cloud")),
    Param("vm", "", "the VM the cloud partition deploys; empty: per job, the likeliest to be "
          "sooner (with gain_h, the most expected hours per chance of later)", _text("vm")),
    Param("p_sooner", 0.9, "burst when P(the VM returns the job sooner) is at least this "
          "(0.9: the KTH replay's pick)", _probability("p_sooner")),
    Param("gain_h", 0, "burst instead when the hours the VM is expected to save are at "
          "least this x P(later) (the replay's gain policy, to compare: in a queue it thins "
          "it makes more later than p_sooner; KTH's best 64); 0: by p_sooner",
          _number("gain_h", unit="hours")),
    Param("classes", [{"partition": "*", "class": "test jobs", "speed": 1.0, "input_gb": 0,
                       "output_gb": 0}],
          "job classes: [{partition, account, name (shell patterns), max_nodes, class, "
          "input_gb, output_gb, speed: memory, biccg or a ratio}]; [] every job memory-bound",
          lambda v: v if isinstance(v, list) else _text("classes", "a list")(v)),
    Param("input_gb", 10.0, "a job's input staged to the cloud (GB) where no class says",
          _number("input_gb", unit="GB")),
    Param("output_gb", 30.0, "a job's output staged back (GB) where no class says",
          _number("output_gb", unit="GB")),
    Param("min_history", 3, "fewer finished jobs than this: the scheduler's estimate alone, "
          "uncalibrated (the command's default is 50)", _integer("min_history", 1)),
)

#: Each report notebook's parameters by its file name; a report notebook not named here
#: (a new benchmark's 1N0_report_<name>) has the folders alone.
NOTEBOOKS: dict[str, tuple[Param, ...]] = {
    "150_report_replay.ipynb": REPLAY,
    "190_report_cost.ipynb": COST,
    "200_explore.ipynb": EXPLORE,
    "210_advise.ipynb": ADVISE,
}


def schema(notebook: str) -> dict[str, Param]:
    """The parameters of the report notebook named `notebook` (a file name), in order."""
    return {p.name: p for p in NOTEBOOKS.get(Path(notebook).name, FOLDERS)}


def reported() -> dict[str, tuple[Param, ...]]:
    """The notebooks `burstbench report` runs (1N0_report_*) that declare more than the
    folders (200_explore and 210_advise are run by hand only)."""
    return {nb: ps for nb, ps in NOTEBOOKS.items() if nb.startswith("1")}


def keys() -> set[str]:
    """Every name a report-parameter file may set: every report notebook's parameters, less
    the folders (the report command's own options)."""
    return {p.name for params in reported().values() for p in params} - set(FOLDER_NAMES)


def defaults(notebook: str) -> dict[str, Any]:
    """The committed value of every parameter of `notebook` (what make figures injects)."""
    return {name: p.default for name, p in schema(notebook).items()}


def for_notebook(notebook: str, given: dict[str, Any]) -> dict[str, Any]:
    """Every parameter of `notebook`: its default, or the value in `given` (a report-parameter
    file's, and the command's folders) where `given` has one."""
    return {name: given.get(name, default) for name, default in defaults(notebook).items()}


# -- checking -----------------------------------------------------------------------------


def _regions(reference_dir: Path) -> dict[str, set[str]]:
    """{region: VMs with a spot price there} from prices_vm.csv; {} where it cannot be read
    (the report's notes say why)."""
    out: dict[str, set[str]] = {}
    try:
        with open(reference_dir / "prices_vm.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                region = (row.get("region") or "").strip()
                if region:
                    out.setdefault(region, set())
                    if row.get("billing") == "spot":
                        out[region].add(row.get("vm") or "")
    except (OSError, csv.Error, UnicodeDecodeError):
        return {}
    return out


def _systems(reference_dir: Path) -> list[str]:
    """The on-premise systems prices_onprem.csv prices; [] where it cannot be read."""
    try:
        with open(reference_dir / "prices_onprem.csv", newline="") as fh:
            return [row["system"] for row in csv.DictReader(fh) if row.get("system")]
    except (OSError, csv.Error, KeyError, UnicodeDecodeError):
        return []


def check_against_tables(values: dict[str, Any]) -> None:
    """The parameters that name a row of the reference tables (region, spot_vm,
    flow_system) name one that is there; ParamError, one line, listing those that are."""
    from burstbench.core import paths

    ref = Path(values["reference_dir"]) if values.get("reference_dir") else \
        paths.reference_dir()
    regions = _regions(ref)
    region = values.get("region")
    if "region" in values and regions and region not in regions:
        near = difflib.get_close_matches(str(region), sorted(regions), n=1)
        raise ParamError(f"region must be one of the priced regions ({', '.join(sorted(regions))}"
                         f"; data/reference/prices_vm.csv), not {region!r}"
                         + (f" (did you mean {near[0]}?)" if near else ""))
    if "spot_vm" in values and regions:
        spot = sorted(regions.get(str(region), set()) or set().union(*regions.values()))
        if values["spot_vm"] not in spot:
            raise ParamError(f"spot_vm must be a VM with a spot price in {region} ("
                             f"{', '.join(spot)}), not {values['spot_vm']!r}")
    systems = _systems(ref)
    if "flow_system" in values and systems and values["flow_system"] not in systems:
        raise ParamError(f"flow_system must be one of {', '.join(systems)} "
                         f"(data/reference/prices_onprem.csv), not {values['flow_system']!r}")


def validate(values: dict[str, Any], notebook: str, where: str) -> dict[str, Any]:
    """Every parameter of `notebook`, from `values` (its default where absent), checked:
    ParamError, one line, `where: <the parameter's own message>`, for a value it does not
    take or a name it does not have."""
    known = schema(notebook)
    unknown = [k for k in values if k not in known]
    if unknown:
        near = difflib.get_close_matches(unknown[0], list(known), n=1)
        raise ParamError(f"{where}: unknown parameter {unknown[0]!r} ("
                         + (f"did you mean {near[0]}?" if near
                            else f"the parameters are: {', '.join(known)}") + ")")
    out = {}
    for name, p in known.items():
        try:
            out[name] = p.check(values.get(name, p.default))
        except ParamError as exc:
            msg = str(exc)
            raise ParamError(f"{where}: {msg if msg.startswith(name) else f'{name}: {msg}'}") \
                from None
    try:
        check_against_tables(out)
    except ParamError as exc:
        raise ParamError(f"{where}: {exc}") from None
    return out


def from_namespace(namespace: dict[str, Any], notebook: str) -> dict[str, Any]:
    """A report notebook's parameters, read by name from the namespace its parameters cell
    (and an injected cell) ran in, every one checked (see validate).  A public name close to
    a parameter but not one (`qeue_wait_h`) is refused, naming it: a typo would otherwise
    leave the default in force, silently."""
    known = schema(notebook)
    values = {k: namespace[k] for k in known if k in namespace}
    stray = [k for k, v in namespace.items()
             if k not in known and not k.startswith("_") and not callable(v)
             and type(v).__name__ != "module"
             and difflib.get_close_matches(k, list(known), 1, 0.85)]
    return validate(values | {k: namespace[k] for k in stray}, notebook,
                    where=f"notebook {Path(notebook).name}")


def arguments(values: dict[str, Any], function: Callable) -> dict[str, Any]:
    """The parameters `function` takes by name (a report's entry point), from `values`."""
    import inspect

    takes = inspect.signature(function).parameters
    return {k: v for k, v in values.items() if k in takes}


def declared(notebooks: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """{notebook name: its parameters' defaults} for each of `notebooks`."""
    return {nb.name: defaults(nb.name) for nb in notebooks}
