"""The machines the burst decision prices, read from figures of merit (burstbench.core.merits,
by name: whichever benchmark measured them) and data/reference/: VMs measured here (Triad by
threads, ping-pong curves by placement, their storage's bandwidth), the study's VMs (their
published best Triad and ping-pong), and Flow's systems (theoretical bandwidth x a fraction,
or a run of Flow measured with this project)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from burstbench.core.merits import Merits, merit, newest
from burstbench.core.reference import read_reference, vm_key
from burstbench.cost.predict import Link, NodeModel

#: Each link's placements in the order tried ("*": any other of its kind, by name): across
#: nodes (a custom placement on two hosts too); between ranks of a node, on one socket first
#: and across its sockets only where nothing else was measured; across a node's sockets.
ORDER = {"inter": ("across-nodes", "*"), "intra": ("same-socket", "*", "across-sockets"),
         "sockets": ("across-sockets",)}


def _kind(d: pd.DataFrame) -> pd.Series:
    """Each row's link: 'inter' (across-nodes, or a placement on two nodes), 'sockets'
    (across-sockets) or 'intra' (any other within a node, a table without placements)."""
    placement = _placements(d)
    nodes = pd.to_numeric(d["nodes"], errors="coerce").fillna(1) if "nodes" in d else 1
    return pd.Series("intra", index=d.index).mask(placement == "across-sockets", "sockets") \
        .mask((placement == "across-nodes") | (nodes > 1), "inter")


def _placements(d: pd.DataFrame) -> pd.Series:
    """Each row's placement label, "" where none is known."""
    return d["placement"].fillna("").astype(str) if "placement" in d else \
        pd.Series("", index=d.index, dtype=str)


def _link(rows: pd.DataFrame, vm: str, kind: str) -> Link | None:
    """A VM's ping-pong of one `kind` (ORDER's keys; 'intra' takes 'sockets' rows last) from
    one placement's rows, the first in ORDER that makes a link: curves of two placements
    are never mixed."""
    d = rows[rows["vm"].map(vm_key) == vm_key(vm)]
    d = d[_kind(d) != "inter"] if kind == "intra" else d[_kind(d) == kind]
    names, order = _placements(d), ORDER[kind]

    def rank(p: str) -> tuple[int, str]:
        key = p if p in order else "*"
        return (order.index(key) if key in order else len(order), p)
    for p in sorted(set(names), key=rank):
        if (link := _placement_link(d[names == p], p)) is not None:
            return link
    return None


def _placement_link(d: pd.DataFrame, placement: str) -> Link | None:
    """One placement's link: its curve where measured, else its published latency (with the
    top of its range) and bandwidth.  A latency curve without osu_bw (a sweep stopped at its
    budget after what the decision prices first: the latency up to the halo's size) takes
    its bandwidth from its largest message."""
    lat, bw = d[d["merit"] == "latency_us"], d[d["merit"] == "bandwidth_gbs"]
    curve = d[d["merit"] == "message_time_us"].sort_values("message_size")
    if lat.empty or (bw.empty and not (curve["message_size"] > 0).any()):
        return None
    source = f"{lat['source'].iloc[0]} ({lat['data'].iloc[0]})"
    if placement and lat["source"].iloc[0] == "measured here":
        source += f", {placement}"
    if bw.empty:
        last = curve.iloc[-1]
        bandwidth = float(last["message_size"]) / float(last["value"]) / 1e3  # B/us -> GB/s
        source += (f"; no osu_bw: bandwidth {bandwidth:.2f} GB/s from its "
                   f"{int(last['message_size']):,} B latency")
    else:
        bandwidth = float(bw["value"].max())
    bwc = d[d["merit"] == "message_bandwidth_gbs"].sort_values("message_size")
    high = lat["latency_high_us"].iloc[0] if "latency_high_us" in lat else None
    return Link(latency_us=float(lat["value"].min()), bandwidth_gbs=bandwidth,
                curve=tuple(zip(curve["message_size"].astype(float), curve["value"])),
                bandwidth_curve=tuple(zip(bwc["message_size"].astype(float), bwc["value"])),
                latency_high_us=float(high) if high is not None and pd.notna(high) else None,
                source=source)


def measured_machine(vm: str, triad: pd.DataFrame, pingpong: pd.DataFrame,
                     ladder: pd.DataFrame | None = None) -> NodeModel:
    """A VM measured here: Triad by threads from `triad` (one run's rows), its ladder of
    working sets (`ladder`: that run's memory_bandwidth_gbs_at_bytes rows), the machine
    its run names (CPU, last-level cache), its ping-pong within a node (on one socket,
    and across its sockets) and across nodes where measured."""
    by_threads = {int(t): float(v) for t, v in zip(triad["threads"], triad["value"])}
    here = pingpong[pingpong["source"] == "measured here"]
    intra, sockets, inter = (_link(here, vm, k) for k in ("intra", "sockets", "inter"))
    steps: dict[int, tuple[tuple[float, float], ...]] = {}
    if ladder is not None and len(ladder):
        for t, d in ladder.groupby("threads"):
            steps[int(t)] = tuple(sorted(zip(d["bytes"].astype(float), d["value"].astype(float))))
    first = triad.iloc[0]
    return NodeModel(name=vm, cores=max(by_threads), triad_gbs=by_threads, measured=True,
                   intra=intra, inter=inter, intra_sockets=sockets, ladder=steps,
                   rule_bytes=_number(first.get("bytes")),
                   cache_bytes=_number(first.get("llc_bytes")), cpu=str(first.get("cpu") or ""),
                   sources={"triad": f"measured here ({triad['data'].iloc[0]})",
                            "pingpong": intra.source if intra else "none measured",
                            "sockets": sockets.source if sockets else "none measured",
                            "network": inter.source if inter else "none"})


def _number(v) -> float:
    """A table's cell as a number, 0 where missing."""
    v = pd.to_numeric(v, errors="coerce")
    return float(v) if pd.notna(v) else 0.0


def ladders(merits: list[Merits]) -> pd.DataFrame:
    """Every run's Triad ladder rows (memory_bandwidth_gbs_at_bytes), by run_id."""
    return merit(merits, "memory_bandwidth_gbs_at_bytes")


def of_run(rows: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """The rows of one run (none where the table has no run_id)."""
    return rows[rows["run_id"] == run_id] if "run_id" in rows else rows.iloc[0:0]


def pingpong_rows(merits: list[Merits]) -> pd.DataFrame:
    return pd.concat([merit(merits, m) for m in ("latency_us", "bandwidth_gbs",
                                                 "message_time_us", "message_bandwidth_gbs")],
                     ignore_index=True)


def machines(merits: list[Merits], ref_dir: Path, flow_fraction: float,
             problems: list[str], flow_vm: str = "") -> dict[str, NodeModel]:
    """Every machine the model can price: VMs measured here (Triad by threads, ping-pong
    curves by placement), the study's VMs (their published best Triad, osu.csv or a VM of
    the same interconnect, vm_sizes.csv's cores; within a node, where nothing is
    published, the curve measured here stands in), and Flow's systems: theoretical
    bandwidth x `flow_fraction` (InfiniBand EDR priced at HC44rs's published ping-pong),
    or, for the system a run labelled `flow_vm` measured, that run's machine."""
    out: dict[str, NodeModel] = {}
    pp = pingpong_rows(merits)
    at = merit(merits, "memory_bandwidth_gbs_at_threads")
    steps = ladders(merits)
    for vm, d in newest(at).groupby("vm", sort=False):
        out[vm] = measured_machine(vm, d, pp, of_run(steps, d["run_id"].iloc[0]))
    stand_in = next((m.intra for m in out.values() if m.intra is not None), None)
    sizes = read_reference(ref_dir, "vm_sizes.csv", ["vm", "physical_cores", "interconnect"],
                           problems)
    best = merit(merits, "memory_bandwidth_gbs")
    published = pp[pp["source"] != "measured here"]
    for r in sizes.itertuples():
        if r.vm in out:
            continue
        b = best[(best["vm"].map(vm_key) == vm_key(r.vm)) & (best["source"] != "measured here")]
        if b.empty:
            continue
        ib = str(r.interconnect).lower() != "none"
        twin = [r.vm] + [s.vm for s in sizes.itertuples()
                         if s.interconnect == r.interconnect and s.vm != r.vm]
        net = next(((v, lk) for v in twin if (lk := _link(published, v, "inter")) is not None),
                   None)
        inter = None
        src = "none published"
        if ib and net:
            v, inter = net
            src = inter.source if v == r.vm else \
                f"{v}'s ({r.interconnect}, the same interconnect)"
        intra = inter or stand_in
        threads = int(b["threads"].iloc[0]) if pd.notna(b["threads"].iloc[0]) else \
            int(r.physical_cores)
        l3 = _number(getattr(r, "l3_cache_mb_per_socket", 0)) * _number(
            getattr(r, "sockets", 1)) * 2**20  # Table 1's MB: binary, as AMD's 768 MB
        out[r.vm] = NodeModel(
            name=r.vm, cores=int(r.physical_cores),
            triad_gbs={threads: float(b["value"].iloc[0])}, measured=False, intra=intra,
            inter=inter if ib else None, max_nodes=None if ib else 1, cache_bytes=l3,
            cpu=str(getattr(r, "cpu", "") or ""),
            sources={"triad": "the study's best (data/reference/triad_best.csv)",
                     "pingpong": src if inter else
                     f"none published: the curve measured here stands in "
                     f"({stand_in.source if stand_in else 'none'})",
                     "network": src if ib else "no InfiniBand"})
    peaks = read_reference(ref_dir, "cache_peaks.csv", ["vm", "l3_bytes_per_cycle_per_core",
                                                        "all_core_ghz", "source"], problems)
    for r in peaks.itertuples():
        m = out.get(r.vm)
        top = _number(r.l3_bytes_per_cycle_per_core) * _number(r.all_core_ghz)
        if m is not None and not m.measured and top > 0:
            out[r.vm] = replace(m, cache_peak_gbs=top * m.cores, sources=m.sources | {
                "cache": f"{top * m.cores:,.0f} GB/s at most: {r.source} "
                         "(data/reference/cache_peaks.csv)"})
    flow = read_reference(ref_dir, "flow_systems.csv", ["system", "cpus_per_node",
                          "memory_bandwidth_theoretical_gbs_per_cpu", "interconnect"],
                          problems)
    fees = read_reference(ref_dir, "prices_onprem.csv", ["system", "cores"], problems)
    hc = _link(published, "HC44rs", "inter")
    for f in flow.itertuples():
        cores = fees.loc[fees["system"] == f.system, "cores"]
        if cores.empty:
            continue
        gbs = float(f.memory_bandwidth_theoretical_gbs_per_cpu) * float(f.cpus_per_node)
        edr = "EDR" in str(f.interconnect)
        said = "HC44rs's (InfiniBand EDR, as Flow's)" if edr else \
            f"{f.interconnect}: none published"
        out[f.system] = NodeModel(
            name=f.system, cores=int(cores.iloc[0]),
            triad_gbs={int(cores.iloc[0]): gbs * flow_fraction}, measured=False,
            intra=hc if edr else None, inter=hc if edr else None,
            sources={"triad": f"theoretical {gbs:g} GB/s x {flow_fraction:g} "
                              "(data/reference/flow_systems.csv)",
                     "theoretical_gbs": str(gbs), "pingpong": said, "network": said})
    return out


def flow_machine(machine_of: dict[str, NodeModel], flow_system: str, flow_vm: str,
                 problems: list[str]) -> tuple[NodeModel, bool]:
    """(Flow's machine, measured?): the run labelled `flow_vm` where one exists (its Triad;
    its ping-pong where measured, else the theoretical machine's), else the theoretical
    one."""
    if flow_system not in machine_of:
        raise ValueError(f"no Flow system {flow_system!r} in flow_systems.csv and "
                         "prices_onprem.csv")
    theory = machine_of[flow_system]
    run = machine_of.get(flow_vm) if flow_vm else None
    if run is None:
        return theory, False
    notes = []
    intra, inter = run.intra, run.inter
    if intra is None:
        intra = theory.intra
        notes.append("no ping-pong within a node measured: HC44rs's")
    if inter is None:
        inter = theory.inter
        notes.append("no ping-pong across nodes measured: HC44rs's")
    if notes:
        problems.append(f"{flow_system} measured as {flow_vm}: " + "; ".join(notes))
    return NodeModel(name=flow_system, cores=run.cores, triad_gbs=run.triad_gbs, measured=True,
                   intra=intra, inter=inter, intra_sockets=run.intra_sockets,
                   ladder=run.ladder, rule_bytes=run.rule_bytes, cache_bytes=run.cache_bytes,
                   cpu=run.cpu,
                   sources=run.sources | {"triad": f"measured as {flow_vm}: "
                                          f"{run.sources['triad']}"}), True


def storage_rates(merits: list[Merits]) -> dict[str, tuple[float, str]]:
    """Per VM measured here, the slower of its best write and best read bandwidth (MiB/s)
    over its storage targets, its merit run (store.merit_runs), reads from memory never
    (storage's merits), and where it was measured: what its staging cannot outrun."""
    out: dict[str, tuple[float, str]] = {}
    rows = newest(pd.concat([merit(merits, "storage_write_mib_s"),
                             merit(merits, "storage_read_mib_s")], ignore_index=True))
    for vm, d in rows.groupby("vm", sort=True):
        best = {m: g.loc[g["value"].idxmax()] for m, g in d.groupby("merit")}
        if len(best) == 2:
            slow = min(best.values(), key=lambda r: r["value"])
            out[str(vm)] = (float(slow["value"]), f"{slow['target']} "
                            f"{slow['merit'].split('_')[1]}, measured here")
    return out
