"""The burst decision: the time model and the cost of a job against numbers worked out by
hand, the refusals it must make, and the report section drawn from the committed data."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import committed_runs, newer_run, report_root, reseal

from burstbench.cost import job, model, user_job
from burstbench.cost.predict import (
    Link,
    MatrixModel,
    NodeModel,
    SolveLayout,
    Traffic,
    fit_efficiency,
    iteration,
    predict,
)
from burstbench.cost.spot import spot_expected, spot_expected_arrays

ROOT = Path(__file__).resolve().parents[1]
#: The study's Azure NetApp Files prices in East US, single encryption (Table 5: JPY per 4
#: TiB-month) per TiB-month, and the tiers' throughput at 4 TiB (MiB/s) per TiB.
TIERS = [job.Tier("Standard", 64 / 4, 87579 / 4), job.Tier("Premium", 256 / 4, 174725 / 4),
         job.Tier("Ultra", 512 / 4, 233256 / 4)]


def test_the_byte_model_is_the_solvers():
    """bytes = 12 nnz + 24 n + (4 + f)(nnz - n) + (72 + f) n + 40 n in rows; 568 MB at 128^3
    with the single-precision factor (comparisons/README.md).  In tiles (the default) every
    row of 64^3 and 128^3 lies in a whole 4 x 4 x 2 tile on one or two ranks, and their
    sweeps move 44 n - (nnz - n) bytes fewer: 489 MB at 128^3."""
    rows = MatrixModel.poisson(64, 64, 64, swept_copies=False)
    assert (rows.n, rows.nnz) == (262144, 1810432)
    assert rows.bytes() == 12 * 1810432 + 24 * 262144 + 8 * (1810432 - 262144) + 76 * 262144 \
        + 40 * 262144 == 70_811_648
    assert MatrixModel.poisson(128, 128, 128, swept_copies=False).bytes(2) == 568_459_264
    tiles = MatrixModel.poisson(64, 64, 64)
    assert tiles.copied(1) == tiles.copied(2) == (262144, 1810432 - 262144)
    assert tiles.bytes() == tiles.bytes(2) == 70_811_648 + (1810432 - 262144) - 44 * 262144
    assert MatrixModel.poisson(128, 128, 128).bytes() == 488_669_184
    # a measured solve is counted as its record says it swept (no copied rows: rows)
    assert MatrixModel.named("poisson64x64x64", swept_copies=True) == tiles
    assert MatrixModel.named("poisson64x64x64", swept_copies=False) == rows


def test_a_prediction_worked_out_by_hand():
    """64^3, 100 iterations, one node of 2 ranks x 1 thread; Triad 30 GB/s on 2 cores x
    efficiency 0.8; ping-pong 1 us + size / 10 GB/s within the node.  Two ranks in slabs:
    one neighbour, one 64 x 64 plane of doubles; two Allreduces of 12 B on average, each
    2 log2(2) message times.  An iteration moves 60,825,600 bytes (in tiles: the byte
    model's test)."""
    m = NodeModel(name="m", cores=2, triad_gbs={1: 20.0, 2: 30.0}, measured=True,
                intra=Link(latency_us=1.0, bandwidth_gbs=10.0))
    p = predict(MatrixModel.poisson(64, 64, 64), m, SolveLayout(1, 2, 1), 100, 0.8)
    memory = 60_825_600 / (30e9 * 0.8)
    halo = 1 * (1e-6 + 8 * 64 * 64 / 10e9)
    reduce = 2 * 2 * (1e-6 + 12 / 10e9)
    assert (p.memory_s, p.halo_s, p.reduce_s) == pytest.approx((memory, halo, reduce))
    assert p.solve_s == pytest.approx(100 * (memory + halo + reduce), rel=1e-12)
    assert p.solve_s == pytest.approx(0.25426816, rel=1e-7)  # 100 x (2534.40 + 4.28 + 4.00) us
    one = predict(MatrixModel.poisson(64, 64, 64), m, SolveLayout(1, 1, 1), 100, 0.8)
    assert one.solve_s == pytest.approx(100 * 60_825_600 / (20e9 * 0.8))  # no communication
    assert fit_efficiency(MatrixModel.poisson(64, 64, 64), m, SolveLayout(1, 2, 1), 100,
                          p.solve_s) == pytest.approx(0.8)
    # the solver's own count replaces the rule: here, three neighbours' worth
    from burstbench.cost.predict import Traffic

    counted = predict(MatrixModel.poisson(64, 64, 64), m, SolveLayout(1, 2, 1), 100, 0.8,
                      Traffic(3, 3 * 32768, 2, 24))
    assert counted.halo_s == pytest.approx(3 * halo)


def test_the_slab_rule_is_what_the_solver_counts():
    """tests/test_biccg.py checks the kernel's counts; the model's rule gives the same."""
    p = MatrixModel.poisson(16, 16, 24)
    assert [(t.messages, t.message_bytes, t.reductions, t.reduction_bytes)
            for t in (p.traffic(1), p.traffic(2), p.traffic(3))] == [
        (0, 0, 0, 0), (1, 2048, 2, 24), (2, 4096, 2, 24)]


def test_a_message_is_priced_at_its_size_on_the_curve():
    """Log-log between measured points; past the latency curve, by the bandwidth curve;
    published: latency + size / bandwidth, the latency drawn within its range."""
    link = Link(latency_us=1.0, bandwidth_gbs=10.0,
                curve=((0, 1.0), (1024, 2.0), (65536, 20.0)),
                bandwidth_curve=((65536, 5.0), (1048576, 10.0)))
    assert link.time_us(0) == 1.0 and link.time_us(1024) == pytest.approx(2.0)
    assert link.time_us(8192) == pytest.approx(2 * math.sqrt(10))  # halfway in log
    assert link.time_us(524288) == pytest.approx(524288 / (5 * 2 ** 0.75 * 1e3))
    pub = Link(latency_us=2.0, bandwidth_gbs=10.0, latency_high_us=4.0)
    assert pub.time_us(1e4) == pytest.approx(3.0) and pub.time_us(1e4, 0.5) == 4.0


def test_a_latency_curve_without_osu_bw_still_prices_messages():
    """A ping-pong sweep stopped at its budget measured its latency up to the halo's size
    and no osu_bw: the machine has its link, the curve prices the halo, and past the curve
    the bandwidth of its largest message (512 KiB in 40 us: 13.1 GB/s), said in its
    source."""
    from burstbench.core.merits import frame
    from burstbench.cost import machines

    data = "data/runs/t/20260102T000000Z-bbbb"
    rows = [{"vm": "t", "merit": "message_time_us", "value": us, "unit": "us",
             "source": "measured here", "data": data, "placement": "same-socket",
             "message_size": size} for size, us in ((0, 1.0), (4096, 2.0), (524288, 40.0))]
    rows.append({"vm": "t", "merit": "latency_us", "value": 1.0, "unit": "us",
                 "source": "measured here", "data": data, "placement": "same-socket",
                 "message_size": 0})
    triad = pd.DataFrame({"threads": [1, 2], "value": [20.0, 30.0], "data": [data] * 2})
    m = machines.measured_machine("t", triad, frame(rows))
    assert m.inter is None and m.intra is not None
    assert m.intra.time_us(524288) == pytest.approx(40.0)
    assert m.intra.bandwidth_gbs == pytest.approx(524288 / 40.0 / 1e3)
    assert m.intra.time_us(2 * 524288) == pytest.approx(1.0 + 2 * 40.0)
    assert m.sources["pingpong"] == (f"measured here ({data}), same-socket; no osu_bw: "
                                     "bandwidth 13.11 GB/s from its 524,288 B latency")
    no_curve = frame([r for r in rows if r["merit"] == "latency_us"])
    assert machines.measured_machine("t", triad, no_curve).intra is None


def _pingpong_rows(placement, k: float, data: str, nodes: int = 1, tests=("latency", "bw")
                   ) -> list[dict]:
    """Merit rows of one placement measured here: its latency curve (k x 1, 2, 8 us at 0,
    4 KiB, 64 KiB), minimum latency k us and osu_bw 20/k GB/s."""
    base = {"vm": "t", "source": "measured here", "data": data, "placement": placement,
            "nodes": nodes}
    rows = []
    if "latency" in tests:
        rows += [base | {"merit": "message_time_us", "value": k * us, "unit": "us",
                         "message_size": size} for size, us in ((0, 1.0), (4096, 2.0),
                                                                (65536, 8.0))]
        rows.append(base | {"merit": "latency_us", "value": k, "unit": "us", "message_size": 0})
    if "bw" in tests:
        rows.append(base | {"merit": "bandwidth_gbs", "value": 20.0 / k, "unit": "GB/s",
                            "message_size": 1 << 22})
    return rows


@pytest.mark.parametrize("order", [1, -1])
def test_within_a_node_each_layout_is_priced_by_one_placements_curve(order):
    """Same-socket and across-sockets measured on one 4-core VM: a layout on one socket's
    worth of cores (2 x 1 of 4) is priced by the same-socket curve, one past half the node
    (2 x 2) by the across-sockets curve, whatever the rows' order; never a mix of the two
    (the first row of each size used to win)."""
    from burstbench.core.merits import frame
    from burstbench.cost import machines

    data = "data/runs/t/20260102T000000Z-bbbb"
    rows = _pingpong_rows("same-socket", 1.0, data) + _pingpong_rows("across-sockets", 3.0,
                                                                      data)
    triad = pd.DataFrame({"threads": [1, 4], "value": [20.0, 30.0], "data": [data] * 2})
    m = machines.measured_machine("t", triad, frame(rows[::order]))
    small, big = SolveLayout(1, 2, 1), SolveLayout(1, 2, 2)
    assert [m.within(big).time_us(s) for s in (0, 2048, 4096, 65536)] == pytest.approx(
        [3.0, 3.0 * 2 ** (11 / 12), 6.0, 24.0])  # log-log from 1 B
    assert [m.within(small).time_us(s) for s in (0, 4096, 65536)] == [1.0, 2.0, 8.0]
    assert (m.intra_sockets.latency_us, m.intra_sockets.bandwidth_gbs) == (
        3.0, pytest.approx(20.0 / 3))
    assert m.sources["sockets"] == f"measured here ({data}), across-sockets"
    assert m.sources["pingpong"] == f"measured here ({data}), same-socket"
    problem = MatrixModel.poisson(16, 16, 16)
    traffic = Traffic(2, 2 * 4096, 0, 0)  # two 4 KiB halo messages
    assert iteration(problem, m, small, 1.0, traffic)[1] == pytest.approx(2 * 2.0e-6)
    assert iteration(problem, m, big, 1.0, traffic)[1] == pytest.approx(2 * 6.0e-6)


def test_a_placement_that_cannot_price_leaves_the_next_one():
    """Same-socket's latency cut short (osu_bw only): within a node the across-sockets curve
    prices every layout; a table without placement labels is one unnamed placement (its
    source names none); a custom pair on two hosts is a link across nodes."""
    from burstbench.core.merits import frame
    from burstbench.cost import machines

    data = "data/runs/t/20260102T000000Z-bbbb"
    triad = pd.DataFrame({"threads": [1, 4], "value": [20.0, 30.0], "data": [data] * 2})
    cut = _pingpong_rows("same-socket", 1.0, data, tests=("bw",)) + \
        _pingpong_rows("across-sockets", 3.0, data)
    m = machines.measured_machine("t", triad, frame(cut))
    assert m.intra == m.intra_sockets and m.intra.time_us(4096) == 6.0
    bare = machines.measured_machine("t", triad, frame(_pingpong_rows(None, 2.0, data)))
    assert bare.intra.time_us(4096) == 4.0 and bare.sources["pingpong"] == \
        f"measured here ({data})"
    pair = machines.measured_machine("t", triad, frame(_pingpong_rows("mine", 5.0, data, 2)))
    assert pair.intra is None and pair.inter.time_us(4096) == pytest.approx(10.0)
    assert pair.sources["network"] == f"measured here ({data}), mine"


def test_a_published_triad_scales_down_with_cores_never_up():
    m = NodeModel(name="pub", cores=120, triad_gbs={24: 235.1}, measured=False)
    assert m.bandwidth(120) == 235.1 and m.bandwidth(12) == pytest.approx(235.1 / 2)


LINK = Link(latency_us=1.0, bandwidth_gbs=10.0)


@pytest.mark.parametrize("machine,layout,message", [
    (NodeModel(name="small", cores=2, triad_gbs={2: 30.0}, measured=True, intra=LINK),
     SolveLayout(1, 2, 2), "small: 2x2 needs 4 cores of a node, it has 2"),
    (NodeModel(name="noib", cores=48, triad_gbs={48: 300.0}, measured=False, intra=LINK,
             max_nodes=1), SolveLayout(2, 2, 24),
     "noib: no interconnect for 2 nodes (a VM without InfiniBand runs on one)"),
    (NodeModel(name="lone", cores=16, triad_gbs={16: 50.0}, measured=True), SolveLayout(1, 2, 8),
     "lone: no ping-pong within a node measured or published"),
    (NodeModel(name="none", cores=16, triad_gbs={}, measured=True), SolveLayout(1, 1, 16),
     "none: no Triad measured or published")])
def test_what_the_model_cannot_price_is_said(machine, layout, message):
    with pytest.raises(ValueError) as err:
        predict(MatrixModel.poisson(16, 16, 16), machine, layout, 10, 0.8)
    assert str(err.value) == message


def test_a_pool_per_job_as_azure_bills_it():
    """300 GB, a 4 TiB minimum, 100 MiB/s wanted: Standard must grow to 6.25 TiB (136,842
    JPY/month), Premium and Ultra stay at 4 TiB (174,725 and 233,256): Standard, billed 3
    hours for 2.88 (rounded up); the shared pool: 87,579 / 30 jobs."""
    data = job.Data(100, 200)
    pool = job.pool_per_job(data, TIERS, 4.0, 100.0)
    assert (pool.tier.name, pool.tib, pool.mib_s) == ("Standard", 6.25, 100.0)
    assert float(pool.jpy(2.88)) == pytest.approx(3 * 6.25 * 87579 / 4 / 730)
    assert float(pool.jpy(3.0)) == pytest.approx(3 * 6.25 * 87579 / 4 / 730)
    assert float(pool.jpy(1.0, keep_months=2)) == pytest.approx(
        6.25 * 87579 / 4 / 730 + 2 * 6.25 * 87579 / 4)
    fast = job.pool_per_job(data, TIERS, 4.0, 500.0)  # Ultra 4 TiB (512) beats the others
    assert (fast.tier.name, fast.tib) == ("Ultra", 4.0)
    shared = job.shared_pool(TIERS, "Standard", 4.0, 30)
    assert (shared.mib_s, float(shared.jpy(10.0))) == (64.0, pytest.approx(87579 / 30))


def test_a_pay_as_you_go_job_with_storage_and_egress_by_hand():
    """4 nodes at 522 JPY/node-h (HB120rs_v3, East US), 2 h of computing, 5 min to deploy,
    100 GB in and 200 GB out at 100 MiB/s through its own Standard 6.25 TiB pool; egress
    11.6 JPY/GB (10 TB for 116,000 JPY) past 50 GB free."""
    data = job.Data(100, 200)
    pool = job.pool_per_job(data, TIERS, 4.0, 100.0)
    j = job.vm_job(2.0, 4, 522.0, data, 100.0, pool, 11.6, deploy_h=5 / 60, free_egress_gb=50)
    stage_in = 100e9 / (100 * 2 ** 20) / 3600
    stage_out = 200e9 / (100 * 2 ** 20) / 3600
    hours = 5 / 60 + stage_in + 2.0 + stage_out
    assert j.hours == pytest.approx(hours) and hours == pytest.approx(2.878062, abs=1e-6)
    assert j.compute_jpy == pytest.approx(4 * hours * 522.0)
    assert j.storage_jpy == pytest.approx(3 * 6.25 * 87579 / 4 / 730)
    assert j.egress_jpy == pytest.approx(150 * 11.6)
    assert j.jpy == pytest.approx(4 * hours * 522.0 + 562.36 + 1740.0, abs=0.01)


def test_a_spot_job_by_hand():
    """10 h of work on 2 spot nodes at 52.2 JPY/node-h, checkpointed every hour, 0.1
    evictions per hour, 5 min to restart: each hour-long segment takes (1/0.1 + 1/12)
    (e^0.1 - 1) h of wall time and is billed e^0.1 - 1 over 0.1 hours.  The arrays the
    decision draws give the same."""
    e = spot_expected(10, 1.0, 0.1, 5 / 60)
    assert e["time_h"] == pytest.approx(10 * (10 + 1 / 12) * math.expm1(0.1))
    assert e["billed_h"] == pytest.approx(10 * math.expm1(0.1) / 0.1)
    wall, billed = spot_expected_arrays([10.0, 0.4], 1.0, [0.1, 0.0], 5 / 60)
    assert (wall[0], billed[0]) == (pytest.approx(e["time_h"]), pytest.approx(e["billed_h"]))
    assert (wall[1], billed[1]) == (0.4, 0.4)  # no eviction: the work itself


@pytest.mark.parametrize("values,message", [
    ((-1, 1, 1), "input_gb must be a number of 0 or more (GB), not -1"),
    ((1, -5, 1), "output_gb must be a number of 0 or more (GB), not -5"),
    ((1, math.inf, 1), "output_gb must be a number of 0 or more (GB), not inf"),
    ((1, 1, math.nan), "keep_months must be a number of 0 or more (months), not nan"),
    ((1, 1, -1), "keep_months must be a number of 0 or more (months), not -1")])
def test_data_sizes_must_not_be_negative(values, message):
    with pytest.raises(ValueError) as err:
        job.Data(*values)
    assert str(err.value) == message


def test_a_job_with_no_output_is_a_job():
    """output_gb: 0 (a job whose result stays small) is taken: nothing staged out, no
    egress; it was refused."""
    (jc,) = user_job.user_jobs({"name": "quiet", "problem": {"poisson": [8, 8, 8]},
                             "output_gb": 0}, job.Data(10, 30), 1)
    assert (jc.data.input_gb, jc.data.output_gb) == (10, 0)
    assert job.staging_hours(jc.data.output_gb, 50.0) == 0


def test_no_price_is_never_priced_as_zero():
    pool = job.pool_per_job(job.Data(1, 1), TIERS, 4.0, 10.0)
    with pytest.raises(ValueError, match="no price"):
        job.vm_job(1.0, 1, math.nan, job.Data(1, 1), 10.0, pool, 1.0)
    with pytest.raises(ValueError, match="no storage tier with a price"):
        job.pool_per_job(job.Data(1, 1), [], 4.0, 10.0)


def test_a_job_with_no_size_is_refused():
    from burstbench.cost.burst import JobClass

    with pytest.raises(ValueError) as err:
        JobClass("mine", 1, job.Data(1, 1, 1))
    assert str(err.value) == "job mine: no size (give a problem, or its node-hours on Flow)"


def test_the_error_range_holds_the_prediction_and_ignores_short_solves():
    """Errors from solves under MIN_SOLVE_S do not count; the fitted solve's 0 always does,
    so a model that only ever under-predicts still ranges from 0 to its worst."""
    v = pd.DataFrame({"reference": [True, False, False, False],
                      "measured_s": [5.0, 0.1, 3.0, 9.0],
                      "error": [0.0, -0.9, -0.2, -0.1]})
    assert model.Model(1.0, {}, v).error_range == (-0.2, 0.0)
    v["error"] = [0.0, -0.9, 0.3, -0.1]
    assert model.Model(1.0, {}, v).error_range == (-0.1, 0.3)
    short = v.assign(measured_s=[5.0, 0.1, 0.2, 0.3])  # none long: all of them count
    assert model.Model(1.0, {}, short).error_range == (-0.9, 0.3)
    assert model.Model(1.0, {}, short).validated
    assert not model.Model(1.0, {}, v[v["reference"]]).validated  # the fitted solve alone
    assert not model.Model(1.0, {}, pd.DataFrame()).validated  # nothing predicted


# -- what the decision does not know ----------------------------------------------------------

from burstbench.cost import burst  # noqa: E402
from burstbench.cost import uncertainty as u  # noqa: E402


def test_a_range_is_checked_and_its_draws_are_its_own():
    with pytest.raises(ValueError) as err:
        u.Range("x", 3, 2, 1, "", "")
    assert str(err.value) == "x: the range's low end 3 is above its high end 1"
    with pytest.raises(ValueError, match="a log-uniform range must be above 0"):
        u.Range.log_uniform("w", 0, 10, "MiB/s", "")
    a = u.Range("a", 0, 0.5, 1, "", "")
    ranges = {"a": a, "b": u.Range("b", 1, 2, 3, "", "")}
    first = u.draw(ranges, 50, 7)["a"]
    ranges["b"] = u.Range.known("b", 2, "", "")  # fixing another input changes nothing here
    assert np.array_equal(first, u.draw(ranges, 50, 7)["a"])
    assert not np.array_equal(first, u.draw(ranges, 50, 8)["a"])
    assert (u.draw(ranges, 5, 7)["b"] == 2).all()


def _option(pool_mib_s: float = 1e9) -> burst.Option:
    tier = job.Tier("T", pool_mib_s, 0.0)
    return burst.Option("vm", "r", "payg", 100.0, job.Pool(job.PER_JOB, tier, 1.0), None,
                           0.0)


def test_the_monte_carlo_against_a_case_worked_out_by_hand():
    """Only the WAN varies, log-uniform between 20 and 200 MiB/s; 36 GB in and out, no
    deployment, 1 h of computing on the VM, 0.5 h on Flow.  The VM is sooner at wait w when
    1 + 36e9 / (rate MiB) / 3600 < w + 0.5, i.e. rate > R(w): P = ln(200 / R) / ln(10)."""
    jc = burst.JobClass("j", 1, job.Data(18, 18), flow_node_hours=0.5)
    vm = burst.Parts(node_hours_h=1.0)
    flow = burst.Parts(node_hours_h=0.5)
    ranges = {u.ERROR: u.Range.known(u.ERROR, 0, "", ""),
              u.FLOW_FRACTION: u.Range.known(u.FLOW_FRACTION, 1, "", ""),
              u.WAN: u.Range.log_uniform(u.WAN, 20, 200, "MiB/s", ""),
              u.DEPLOY: u.Range.known(u.DEPLOY, 0, "min", ""),
              u.ITERATIONS: u.Range.known(u.ITERATIONS, 0, "", ""),
              u.EVICTIONS: u.Range.known(u.EVICTIONS, 0, "", ""),
              u.LATENCY: u.Range.known(u.LATENCY, 0, "", "")}
    s = burst.Settings(44.3, 0.0, draws=4000, seed=1, waits_h=(0.6, 1.0), queue_wait_h=0.6)
    x = u.draw(ranges, s.draws, s.seed)
    out = burst.evaluate(jc, vm, flow, lambda i: np.ones_like(i[u.ERROR]), _option(), s, x)
    row = burst.summarize(out, s)
    for w in (0.6, 1.0):
        need = 36e9 / 2 ** 20 / 3600 / (w + 0.5 - 1.0)  # the rate that just makes it
        exact = math.log(200 / need) / math.log(10)
        assert row[f"p_sooner_at_{burst.wait_label(w)}"] == pytest.approx(exact, abs=0.025)
    # the break-even's median: the time at the WAN's median rate (the geometric mean)
    assert row["break_even_p50_h"] == pytest.approx(
        1.0 + 36e9 / (math.sqrt(20 * 200) * 2 ** 20) / 3600 - 0.5, rel=0.02)
    assert row["verdict"] == "undecided"  # the 10-90% band, 0.56-0.88 h, holds 0.6 h
    assert burst.verdict(0.1, 0.5, 1.0) == "burst" and burst.verdict(1.5, 3, 1) == "stay"
    # the pool caps the rate: at 30 MiB/s every draw stages at 30 or less
    capped = burst.evaluate(jc, vm, flow, lambda i: np.ones_like(i[u.ERROR]), _option(30.0),
                               s, x)
    assert capped["staging_mib_s"].max() == 30.0
    assert burst.staging_limit(_option(30.0), x[u.WAN]).startswith("the pool (T 1 TiB")


def test_a_shared_input_is_the_same_draw_on_both_sides():
    """The model's error scales the VM's and Flow's predicted solves alike: with nothing else
    uncertain, the break-even is the difference of the two times, each / (1 + e)."""
    jc = burst.JobClass("j", 1, job.Data(1, 1), MatrixModel.poisson(8, 8, 8), 1)
    vm = burst.Parts(memory_s=1.0, it_low=3600, it_high=3600)  # 1 h at e = 0
    flow = burst.Parts(memory_s=2.0, it_low=3600, it_high=3600)  # 2 h at e = 0
    x = {u.ERROR: np.array([0.0, -0.5]), u.ITERATIONS: np.zeros(2), u.LATENCY: np.zeros(2),
         u.WAN: np.full(2, 1e9), u.DEPLOY: np.zeros(2), u.EVICTIONS: np.zeros(2),
         u.FLOW_FRACTION: np.ones(2)}
    out = burst.evaluate(jc, vm, flow, lambda i: np.ones(2), _option(), burst.Settings(
        1.0, 0.0), x)
    stage = 2e9 / (1e9 * 2 ** 20) / 3600
    assert out["break_even_h"] == pytest.approx([1 + stage - 2, 2 + stage - 4])


def test_iterations_of_a_layout_not_measured_carry_a_range():
    """Measured: 300 on 1 rank, 323 on 2 (growth x1.0767 per doubling); on 16 ranks,
    323 to 323 x 1.0767^3."""
    iters = pd.DataFrame({"problem": ["p", "p", "q"], "ranks": [1, 2, 1],
                          "value": [300.0, 323.0, 50.0]})
    assert model.iterations_for("p", 2, iters)[:2] == (323.0, 323.0)
    lo, hi, how = model.iterations_for("p", 16, iters)
    assert (lo, hi) == (323.0, pytest.approx(323 * (323 / 300) ** 3))
    assert "grown x1.077 per doubling of ranks (its own counts)" in how
    lo, hi, how = model.iterations_for("q", 4, iters)  # its own counts show no growth
    assert (lo, hi) == (50.0, pytest.approx(50 * (323 / 300) ** 2))
    assert "the largest any problem measured shows" in how
    assert math.isnan(model.iterations_for("r", 2, iters)[0])


def _committed_machines():
    from burstbench.cost import machines
    from burstbench.registry import benchmarks

    merits = [s.merits(ROOT / "data/runs", ROOT / "data/reference")
              for s in benchmarks().values() if s.merits is not None]
    problems: list[str] = []
    return merits, machines.machines(merits, ROOT / "data/reference", 0.793, problems), problems


def test_machines_from_the_committed_data():
    """HB120rs_v3 borrows HB120-16rs_v3's published ping-pong (the same HDR), its latency
    ranging 1.9-4.3 us; D96s_v5 has no InfiniBand and, within a node, the curve measured
    here stands in; Flow's Cloud System is 4 x 70.392 GB/s x the fraction."""
    _, m, _ = _committed_machines()
    hb = m["HB120rs_v3"]
    assert (hb.inter.latency_us, hb.inter.latency_high_us, hb.inter.bandwidth_gbs) == \
        (1.9, 4.3, 24.7)
    d96 = m["D96s_v5"]
    assert d96.max_nodes == 1 and d96.inter is None and d96.intra.curve
    assert "the curve measured here stands in" in d96.sources["pingpong"]
    flow = m["Flow Cloud System"]
    assert flow.bandwidth(80) == pytest.approx(4 * 70.392 * 0.793)
    assert flow.inter.latency_us == 1.5 and flow.cores == 80


def test_flow_measured_replaces_the_theoretical_figure():
    """A run labelled flow-cloud stands for Flow: its Triad, HC44rs's ping-pong where it
    measured none (said so); without one, the theoretical machine."""
    from burstbench.cost import machines

    _, m, _ = _committed_machines()
    m["flow-cloud"] = NodeModel(name="flow-cloud", cores=80, triad_gbs={80: 150.0}, measured=True,
                              sources={"triad": "measured here (data/runs/flow-cloud/x)"})
    problems: list[str] = []
    flow, measured = machines.flow_machine(m, "Flow Cloud System", "flow-cloud", problems)
    assert measured and flow.bandwidth(80) == 150.0 and flow.inter.latency_us == 1.5
    assert problems == ["Flow Cloud System measured as flow-cloud: no ping-pong within a node "
                        "measured: HC44rs's; no ping-pong across nodes measured: HC44rs's"]
    theory, measured = machines.flow_machine(m, "Flow Cloud System", "none", [])
    assert not measured and theory.bandwidth(80) == pytest.approx(4 * 70.392 * 0.793)


@pytest.mark.parametrize("user,message", [
    ({"node": [1, 2]}, "user_job: unknown key 'node' (did you mean nodes? the keys are: name, "
     "nodes, problem, solves, input_gb, output_gb, keep_months, flow_node_hours)"),
    ({"problem": {"poison": [8, 8, 8]}}, "user_job's problem: unknown key 'poison' (did you "
     "mean poisson? the keys are: poisson, n, nnz, iterations)"),
    ({"problem": {"poisson": [8, 8]}}, "user_job's problem: poisson must be three positive "
     "integers, not [8, 8]"),
    ({"nodes": [0]}, "user_job: nodes must be a list of positive integers, not [0]"),
    ({"input_gb": -50, "flow_node_hours": 1},
     "input_gb must be a number of 0 or more (GB), not -50")])
def test_a_users_job_is_parsed_strictly(user, message):
    with pytest.raises(ValueError) as err:
        user_job.user_jobs(user, job.Data(1, 1), 1)
    assert str(err.value) == message


def test_a_users_job_as_given():
    jobs = user_job.user_jobs({"name": "mine", "problem": {"poisson": [8, 8, 8],
                                                           "iterations": 20},
                               "nodes": [1, 4], "keep_months": 2}, job.Data(1, 2), 5)
    assert [(j.name, j.nodes, j.iterations, j.solves, j.data.keep_months) for j in jobs] == [
        ("mine, 1 node(s)", 1, 20, 5, 2), ("mine, 4 node(s)", 4, 20, 5, 2)]


@pytest.mark.parametrize("kw,message", [
    ({"queue_wait_h": -1}, "queue_wait_h must be 0 or more hours, not -1"),
    ({"wan_mib_s": -5}, "wan_mib_s must be positive, not -5"),
    ({"wan_mib_s": [100, 10]}, "WAN rate: the range's low end 100 is above its high end 10"),
    ({"pool_min_tib": -1}, "pool_min_tib must be 0 or more, not -1"),
    ({"deploy_minutes": [9, 5, 4]}, "deployment: the range's low end 9 is above its high end 4"),
    ({"user_job": {"node": [2]}}, "user_job: unknown key 'node' (did you mean nodes? the keys "
     "are: name, nodes, problem, solves, input_gb, output_gb, keep_months, flow_node_hours)")])
def test_the_report_refuses_bad_input_in_one_line(tmp_path, kw, message):
    from burstbench.report import decision as report

    with pytest.raises(ValueError) as err:
        report.decision_report(figures_dir=tmp_path, **kw)
    assert str(err.value) == message


def test_the_committed_decision_is_what_the_data_gives(tmp_path, monkeypatch):
    """Rebuilt from the data figures/ names alone (a run measured since is left out), the
    decision table, the sensitivity and the Figure 12 check equal figures/ byte for byte (a
    fixed seed); docs/decision.md's numbers are the table's as the committed runs give it (a
    run of the user's own, drawn by make report, changes figures/, not the page's claim)."""
    from burstbench.report import decision as report
    from burstbench.report import parameters

    # the notebook's parameters as make figures passes them: from the committed source
    params = parameters.arguments(parameters.defaults("190_report_cost.ipynb"),
                                  report.decision_report)

    def rebuild(name: str, committed: bool) -> tuple[Path, list[str]]:
        root = report_root(tmp_path / name, committed)
        monkeypatch.setenv("BURSTBENCH_ROOT", str(root))
        sec = report.decision_report(**params | {"figures_dir": root / "figures"})
        return root / "figures", sec.problems

    out, problems = rebuild("drawn", False)
    for name in ("burst_decision.csv", "burst_sensitivity.csv", "biccg_model_study.csv",
                 "burst_inputs.csv", "burst_decision_choices.md"):
        assert (out / name).read_bytes() == (ROOT / "figures" / name).read_bytes(), name
    assert all("no burst option priced" not in p for p in problems)
    rows = pd.read_csv(out / "burst_decision.csv")
    assert set(rows["verdict"].dropna()) <= {"burst", "stay", "undecided"}
    project = out.parent
    drawn = {str(p.relative_to(project)) for p in (project / "data/runs").glob("*/*/")}
    if committed_runs() not in (None, drawn):
        out, _ = rebuild("committed", True)
    readme = (ROOT / "docs" / "decision.md").read_text()
    block = readme[readme.index("<!-- decision numbers -->"):
                   readme.index("<!-- /decision numbers -->")]
    assert block.strip().endswith((out / "burst_decision_numbers.md").read_text().strip())


def test_the_model_is_fitted_on_the_merit_runs_solve_not_a_newer_incomplete_one(tmp_path):
    """A newer local run whose BICCG table no longer matches its manifest (its solves
    halved): the figures of merit pass it over, and so does the model's fit, whose
    efficiency stays what the committed runs give."""
    from burstbench.cost import machines
    from burstbench.registry import benchmarks

    runs = report_root(tmp_path, committed=True) / "data" / "runs"
    ref_dir = ROOT / "data" / "reference"
    reference = {"vm": "local", "problem": "poisson128x128x128", "layout": "2x1"}

    def fitted() -> tuple[model.Model, list[str]]:
        merits = [s.merits(runs, ref_dir) for s in benchmarks().values() if s.merits]
        problems: list[str] = []
        return model.fit(merits, machines.machines(merits, ref_dir, 0.793, problems),
                         reference), [p for m in merits for p in m.problems]

    before, _ = fitted()
    old, new = newer_run(runs / "local", "biccg")
    table = pd.read_csv(new / "biccg.csv", dtype={"run_id": str})
    table.loc[table["metric"] == "solve_time", "value"] /= 2
    table.to_csv(new / "biccg.csv", index=False)
    after, notes = fitted()
    assert any(n.startswith(f"local: biccg's figures of merit (cost, burst decision) come "
                            f"from its newest complete run {old}, not from {new.name} "
                            "(incomplete: ") for n in notes)
    assert after.efficiency == before.efficiency


def test_the_model_is_fitted_on_the_study_problem_else_on_the_largest_grid_measured():
    """By default the fit is the study's 256 x 256 x 512 (2x1 on local); with that
    problem's rows gone, the largest grid left measured there (160^3) stands in, and
    fallback() names both; a reference measured gives no note."""
    import dataclasses

    from burstbench.cost import machines
    from burstbench.registry import benchmarks
    from burstbench.report.parameters import MODEL_REFERENCE

    ref_dir = ROOT / "data" / "reference"
    merits = [s.merits(ROOT / "data" / "runs", ref_dir) for s in benchmarks().values()
              if s.merits]
    of = machines.machines(merits, ref_dir, 0.793, [])
    fitted = model.fit(merits, of, MODEL_REFERENCE)
    assert fitted.reference["problem"] == "poisson256x256x512"
    assert model.fallback(fitted, MODEL_REFERENCE) == ""
    study = [dataclasses.replace(m, table=m.table[m.table["problem"] != "poisson256x256x512"])
             if "problem" in m.table else m for m in merits]
    instead = model.fit(study, of, MODEL_REFERENCE)
    assert instead.reference["problem"] == "poisson160x160x160"
    assert instead.reference["label"] == "2x1" and instead.reference["vm"] == "local"
    assert model.fallback(instead, MODEL_REFERENCE) == (
        "the time model's reference, poisson256x256x512 2x1 on local, was not measured: "
        "fitted on the largest grid measured there, poisson160x160x160 "
        f"({instead.reference['data']}); measure the reference (papermill_params/"
        "local-model.yaml measures the default one)")
    files = [dataclasses.replace(m, table=m.table[~m.table["problem"].map(
        lambda p: isinstance(p, str) and MatrixModel.is_grid(p))]) if "problem" in m.table
        else m for m in merits]  # a matrix file (poisson2d_1259) is no grid to stand in
    for merits_, ref in ((study, {"vm": "no-such-vm", "problem": "poisson256x256x512",
                                  "layout": "2x1"}), (files, MODEL_REFERENCE)):
        with pytest.raises(ValueError, match=r"^the model's reference .* was not measured, "
                                             "nor any Poisson grid there to stand in for it$"):
            model.fit(merits_, of, ref)


def test_the_model_is_fitted_at_the_triad_measured_beside_its_solve():
    """The committed merits without the Triads measured beside the solves: the fit is at
    its run's Triad; with one beside the fitted solve at twice its run's (triad_beside_gbs),
    the efficiency halves (the memory twice as fast, the solve as it was measured), the
    fitted solve is still predicted as measured, its row says which Triad priced it, and
    the model says where it was fitted."""
    import dataclasses

    from burstbench.core.merits import Merits, frame
    from burstbench.cost import machines
    from burstbench.registry import benchmarks
    from burstbench.report.parameters import MODEL_REFERENCE

    ref_dir = ROOT / "data" / "reference"
    merits = [s.merits(ROOT / "data" / "runs", ref_dir) for s in benchmarks().values()
              if s.merits]
    assert any(len(m.of("triad_beside_gbs")) for m in merits)  # the committed fit has them
    merits = [dataclasses.replace(m, table=m.table[m.table["merit"] != "triad_beside_gbs"])
              for m in merits]
    of = machines.machines(merits, ref_dir, 0.793, [])
    before = model.fit(merits, of, MODEL_REFERENCE)
    r = before.reference
    row = before.validation[before.validation["reference"]].iloc[0]
    assert not row["triad_beside"] and before.triad_how.startswith("its run's Triad, ")
    run_triad = row["triad_gbs"]
    beside = {k: r[k] for k in ("vm", "run_id", "problem", "label", "nodes", "ranks", "threads",
                                "impl")} | {"merit": "triad_beside_gbs", "value": 2 * run_triad,
                                            "unit": "GB/s", "data": r["data"]}
    after = model.fit([*merits, Merits(frame([beside]))], of, MODEL_REFERENCE)
    assert after.efficiency == pytest.approx(before.efficiency / 2, rel=1e-12)
    fitted = after.validation[after.validation["reference"]].iloc[0]
    assert fitted["triad_beside"] and fitted["triad_gbs"] == pytest.approx(2 * run_triad)
    assert fitted["error"] == pytest.approx(0.0, abs=1e-12)
    assert after.triad_how == (f"the Triad measured beside the solve, {2 * run_triad:.1f} GB/s "
                               f"on 2 core(s); its run's: {run_triad:.1f}")
    others = after.validation[~after.validation["reference"]]
    assert not others["triad_beside"].any()


def test_a_multi_node_solve_of_the_fitted_layout_is_validation_not_the_fit():
    """The committed merits and, in the fitted solve's run, the same layout on 2 nodes (an
    interconnect measured to price it): only the 1-node solve is the fit; the 2-node one
    checks the model (it was matched by run, problem and label, and read as the fit too)."""
    from burstbench.core.merits import Merits, frame
    from burstbench.cost import machines
    from burstbench.registry import benchmarks

    ref_dir = ROOT / "data" / "reference"
    merits = [s.merits(ROOT / "data" / "runs", ref_dir) for s in benchmarks().values()
              if s.merits]
    reference = {"vm": "local", "problem": "poisson128x128x128", "layout": "2x1"}
    wide = []
    for name in ("solve_time_s", "iterations"):
        d = machines.merit(merits, name)
        one = d[(d["vm"] == "local") & (d["problem"] == reference["problem"])
                & (d["label"] == "2x1") & (d["nodes"] == 1) & (d["impl"] == "c")]
        wide += one.assign(nodes=2, ranks=4).to_dict("records")
    assert wide
    network = [r | {"vm": "local"} for r in _pingpong_rows("across-nodes", 5.0, "x", nodes=2)]
    merits.append(Merits(frame(wide + network)))
    fitted = model.fit(merits, machines.machines(merits, ref_dir, 0.793, []), reference)
    v = fitted.validation
    assert v["reference"].sum() == 1
    assert v.loc[v["reference"], "layout"].tolist() == ["1n 2x1"]
    assert (v["layout"] == "2n 2x1").any() and fitted.validated


@pytest.mark.parametrize("kw", [{}, {"wan_mib_s": 50, "flow_fraction": [0.7, 0.8, 0.9]}])
def test_the_decision_names_every_file_it_reads(tmp_path, monkeypatch, kw):
    """Each decision table's entry (its Data line in figures/README.md) names every run and
    reference table the decision read, and nothing it did not (what pandas opened is
    recorded), also where the WAN and Flow's fraction are given and their tables unread;
    on the committed runs."""
    from burstbench.report import decision as report

    root = report_root(tmp_path, committed=True).resolve()
    monkeypatch.setenv("BURSTBENCH_ROOT", str(root))
    read: set[str] = set()
    real = pd.read_csv

    def recording(path, *args, **kwargs):
        p = Path(path).resolve().relative_to(root)
        read.add(str(p.parent if p.parts[:2] == ("data", "runs") else p))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", recording)
    sec = report.decision_report(figures_dir=tmp_path / "figures", **kw)
    assert any(r.startswith("data/runs/") for r in read) and \
        "data/reference/prices_vm.csv" in read
    assert ("data/reference/gfarm_azure_gfrep.csv" in read) == (not kw)
    named = {e.title: e.runs for e in sec.entries}
    for title in ("The burst decision's inputs: the uncertain ones and the fixed assumptions",
                  "Burst decision: P(sooner), break-even band, verdict, time and whole cost "
                  "per job, VM, region, billing and storage scenario",
                  "What decides the break-even wait, per job class",
                  "BICCG model against the study's Figure 12: HB120rs_v3 and HC44rs, Poisson "
                  "256x256x512, 1-32 nodes (this project's range), without and with L3 "
                  "tiers"):
        assert set(named[title]) == read, title


def test_a_job_no_option_can_price_is_said_in_one_line(tmp_path):
    """Every VM refused (a job on 64 nodes of a problem never measured at any rank count):
    one line, no empty figure."""
    from burstbench.report import decision as report

    report.decision_report(figures_dir=tmp_path, user_job={
        "name": "nowhere", "problem": {"poisson": [9, 9, 9]}, "nodes": [64]})
    rows = pd.read_csv(tmp_path / "burst_decision.csv")
    assert set(rows.loc[rows["job"] == "nowhere, 64 node(s)", "status"]) == {
        "no prediction: poisson9x9x9: no iteration count"}
    choices = (tmp_path / "burst_decision_choices.md").read_text()
    assert "- **nowhere, 64 node(s)**: nothing priced (no prediction: poisson9x9x9: no " \
        "iteration count)." in choices


def test_a_model_no_other_solve_validates_is_not_drawn_as_exact_without_a_word(tmp_path):
    """The committed runs with every C solve but the fitted one dropped (their iteration
    counts kept, so the jobs are still priced), as a runs folder of budget runs alone
    gives (the study's grid among the dropped: 128^3 stands in for it, with a note): the
    model's error is unknown, and the report says so where it would have given
    its range (no 'nan'), the inputs table says it is drawn as none, and a note says what
    to measure."""
    import json
    import shutil

    from burstbench.report import decision as report

    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "data/runs/local", runs / "local")
    for csv in runs.glob("local/*/biccg.csv"):
        t = pd.read_csv(csv, dtype={"run_id": str})
        fitted = (t["problem"] == "poisson128x128x128") & (t["label"] == "2x1") & \
            (csv.parent.name == "20261124T010255Z-ae37")
        t[~((t["metric"] == "solve_time") & (t["impl"] == "c") & ~fitted)].to_csv(
            csv, index=False)
        if "manifest" in json.loads((csv.parent / "provenance.json").read_text()
                                    )["benchmarks"]["biccg"]:  # runs before manifests: none
            reseal(csv.parent, "biccg")
    figs = tmp_path / "figs"
    sec = report.decision_report(runs, figures_dir=figs, mc_draws=200)
    assert ("the time model's reference, poisson256x256x512 2x1 on local, was not measured: "
            "fitted on the largest grid measured there, poisson128x128x128 "
            f"({runs / 'local/20261124T010255Z-ae37'}); measure the reference "
            "(papermill_params/local-model.yaml measures the default one)") in sec.problems
    assert ("the time model is fitted on the only BICCG solve measured (poisson128x128x128 "
            "2x1 on local): no other solve validates it, so its error is unknown and the "
            "decision draws none; measure BICCG's other configurations (after a budget, the "
            "same command measures what was left)") in sec.problems
    assert len(pd.read_csv(figs / "biccg_model_validation.csv")) == 1
    inputs = pd.read_csv(figs / "burst_inputs.csv").set_index("input")
    assert inputs.loc["model error", "source"] == \
        "unknown, drawn as none: no solve but the fitted one to validate on"
    caption = next(e.caption for e in sec.entries
                   if e.title == "BICCG time model: predicted against measured")
    assert "was fitted on one solve (poisson128x128x128, 2x1, local), the only one " \
        "measured: no other solve checks it, so its error is unknown" in caption
    choices = (figs / "burst_decision_choices.md").read_text()
    assert "The time model's error is unknown (no solve but the one it was fitted on " \
        "validates it) and is not drawn: these answers are surer than their data" in choices
    assert (pd.read_csv(figs / "burst_decision.csv")["status"] == "priced").any()
    for text in [e.caption for e in sec.entries] + [choices]:
        assert not re.search(r"\bnan\b|nan%", text), text[:80]


def _runs_with_flow(tmp_path: Path) -> Path:
    """The committed runs, and one of their Triad-only runs relabelled as Flow's own
    (flow-cloud): Flow measured with this project, no BICCG on it."""
    import json
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "data/runs/local", runs / "local")
    src = ROOT / "data/runs/local/20261123T151343Z-dd60"
    dst = runs / "flow-cloud" / src.name
    shutil.copytree(src, dst)
    table = pd.read_csv(dst / "triad.csv")
    table["vm"] = "flow-cloud"
    table.to_csv(dst / "triad.csv", index=False)
    prov = json.loads((dst / "provenance.json").read_text())
    prov["vm"] = "flow-cloud"
    (dst / "provenance.json").write_text(json.dumps(prov))
    return runs


def test_flow_measured_with_this_project_is_used_and_said(tmp_path):
    """A run labelled flow-cloud: its Triad replaces the theoretical figure on Flow's side
    (no fraction drawn), each row says so, and the report says it has no BICCG."""
    from burstbench.report import decision as report

    figs = tmp_path / "figs"
    sec = report.decision_report(_runs_with_flow(tmp_path), figures_dir=figs, mc_draws=200)
    rows = pd.read_csv(figs / "burst_decision.csv")
    priced = rows[rows["status"] == "priced"]
    assert priced["flow_source"].str.startswith("measured: measured as flow-cloud").all()
    inputs = pd.read_csv(figs / "burst_inputs.csv").set_index("input")
    assert inputs.loc["Flow's Triad fraction", "drawn"] == "fixed"
    assert ("Flow Cloud System measured as flow-cloud: its Triad is used; no BICCG solve was "
            "measured on it, so the model's error is the other machines' validation"
            ) in sec.problems
    assert "flow-cloud" not in set(rows["vm"])  # Flow is not offered as a VM to burst to


def test_a_wan_measured_to_the_other_site_replaces_the_published_bounds(tmp_path):
    """storage_replicate_remote: the replication's tries are the WAN's range; a rate given
    by the user still wins."""
    from burstbench.cost import inputs as decision_inputs

    fitted = model.Model(1.0, {}, pd.DataFrame({"reference": [True], "measured_s": [2.0],
                                                "error": [0.0]}))
    wan = pd.DataFrame({"vm": ["local"], "merit": ["wan_mib_s"], "value": [40.0],
                        "low": [35.0], "high": [48.0], "run_id": ["r1"],
                        "data": ["data/runs/local/r1"]})
    args = (fitted, 0.793, False, ROOT / "data/reference")
    r = decision_inputs.ranges(*args, 0, 5, 0.1, [], wan)[u.WAN]
    assert (r.low, r.mode, r.high) == (35.0, 40.0, 48.0)
    assert r.source.startswith("measured: gfrep to the other site's I/O node (data/runs/local/r1")
    assert decision_inputs.ranges(*args, 77, 5, 0.1, [], wan)[u.WAN].fixed
    published = decision_inputs.ranges(*args, 0, 5, 0.1, [], None)[u.WAN]
    assert (round(published.low, 1), round(published.high, 1)) == (23.4, 116.6)


def test_the_region_chooses_the_answers_options(tmp_path, monkeypatch):
    """`region` was taken and never used: every answer was East US's.  Now the table still
    holds both regions' options, and the answer (leading and cheapest option, the figure's
    curves, the sensitivity) is the region's."""
    from burstbench.report import decision as report
    from burstbench.report import parameters

    root = report_root(tmp_path, committed=True)
    monkeypatch.setenv("BURSTBENCH_ROOT", str(root))
    args = parameters.arguments(parameters.defaults("190_report_cost.ipynb"),
                                report.decision_report)
    answers = {}
    for region in ("East US", "Japan East"):
        out = root / "figures" / region.replace(" ", "")
        report.decision_report(**args | {"figures_dir": out, "region": region})
        rows = pd.read_csv(out / "burst_decision.csv")
        assert {"East US", "Japan East"} <= set(rows["region"].dropna())
        answers[region] = (out / "burst_decision_choices.md").read_text()
    for region, other in (("East US", "Japan East"), ("Japan East", "East US")):
        text = answers[region]
        assert text.startswith(f"## What would have been chosen in {region}\n")
        assert f", {region}, pool per job)" in text and f", {other}, " not in text
        assert f" {other} " not in text.split("Cheapest burst")[1].split("\n")[0]


def test_a_jobs_later_setups_are_priced_apart_from_its_first():
    """3 solves of 100 iterations at 1 s each: with the first setup 10 iterations and the
    later ones 2, (300 + 10 + 2 x 2) s; with no later setup measured, each as the first:
    (300 + 3 x 10) s; a job of one solve has no later setup."""
    x = {u.ERROR: np.zeros(1), u.ITERATIONS: np.zeros(1), u.LATENCY: np.zeros(1)}
    apart = burst.Parts(memory_s=1.0, it_low=100, it_high=100, solves=3, setup_iterations=10,
                        later_setup_iterations=2)
    assert apart.hours(x) * 3600 == pytest.approx([314.0])
    alike = burst.Parts(memory_s=1.0, it_low=100, it_high=100, solves=3, setup_iterations=10)
    assert alike.hours(x) * 3600 == pytest.approx([330.0])
    one = burst.Parts(memory_s=1.0, it_low=100, it_high=100, solves=1, setup_iterations=10,
                      later_setup_iterations=2)
    assert one.hours(x) * 3600 == pytest.approx([110.0])


def test_the_later_setup_is_fitted_on_the_reference_solves_later_solves():
    """The committed merits without any later setup: the later priced as the first, and the
    fixed assumptions say it was not measured; with the fitted solve's later setup at 30%
    of its first: 30% of the first's iterations, and the source names the run."""
    import dataclasses

    from burstbench.core.merits import Merits, frame
    from burstbench.cost import machines
    from burstbench.registry import benchmarks
    from burstbench.report.parameters import MODEL_REFERENCE

    ref_dir = ROOT / "data" / "reference"
    merits = [s.merits(ROOT / "data" / "runs", ref_dir) for s in benchmarks().values()
              if s.merits]
    merits = [dataclasses.replace(m, table=m.table[m.table["merit"] != "later_setup_time_s"])
              if len(m.table) else m for m in merits]
    of = machines.machines(merits, ref_dir, 0.793, [])
    once = model.fit(merits, of, MODEL_REFERENCE)
    assert once.setup_iterations > 0 and once.later_setup_iterations is None
    assert once.later_setup == once.setup_iterations
    (first, f_value, f_src), (later, l_value, l_src) = once.setup_rows()
    assert (first, later) == ("setup, a job's first solve", "setup, a job's later solves")
    assert f_value == l_value == f"{once.setup_iterations:.1f}"
    assert l_src.startswith("not measured (poisson256x256x512 2x1 on local (data/runs/local/")
    assert l_src.endswith(") solved once a process): priced as the first; "
                          "papermill_params/local-model.yaml measures it (biccg_solves: 2)")
    r = once.reference
    setup = machines.merit(merits, "setup_time_s")
    mine = setup[(setup["run_id"] == r["run_id"]) & (setup["problem"] == r["problem"])
                 & (setup["label"] == r["label"]) & (setup["nodes"] == 1)]
    assert len(mine) == 1
    merits.append(Merits(frame([row | {"merit": "later_setup_time_s",
                                       "value": 0.3 * row["value"]}
                                for row in mine.to_dict("records")])))
    twice = model.fit(merits, of, MODEL_REFERENCE)
    assert twice.later_setup_iterations == pytest.approx(0.3 * once.setup_iterations)
    assert twice.setup_iterations == once.setup_iterations
    assert twice.setup_rows()[1][2] == (f"its later solves in one process (biccg_solves), "
                                        f"poisson256x256x512 2x1 on local ({r['data']})")
