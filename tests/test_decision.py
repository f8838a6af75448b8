"""The burst decision: the time model and the cost of a job against numbers worked out by
hand, the refusals it must make, and the report section drawn from the committed data."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from burstbench.cost import decision, job
from burstbench.cost.predict import Layout, Machine, Problem, fit_efficiency, predict
from burstbench.cost.spot import spot_expected

ROOT = Path(__file__).resolve().parents[1]
#: The study's Azure NetApp Files prices in East US, single encryption (Table 5: JPY per 4
#: TiB-month) per TiB-month, and the tiers' throughput at 4 TiB (MiB/s) per TiB.
TIERS = [job.Tier("Standard", 64 / 4, 87579 / 4), job.Tier("Premium", 256 / 4, 174725 / 4),
         job.Tier("Ultra", 512 / 4, 233256 / 4)]


def test_the_byte_model_is_the_solvers():
    """bytes = 12 nnz + 24 n + (4 + f)(nnz - n) + (72 + f) n + 40 n; 568 MB at 128^3 with the
    single-precision factor (benchmarks/README.md)."""
    p = Problem.poisson(64, 64, 64)
    assert (p.n, p.nnz) == (262144, 1810432)
    assert p.bytes == 12 * 1810432 + 24 * 262144 + 8 * (1810432 - 262144) + 76 * 262144 \
        + 40 * 262144 == 70_811_648
    assert Problem.poisson(128, 128, 128).bytes == 568_459_264


def test_a_prediction_worked_out_by_hand():
    """64^3, 100 iterations, one node of 2 ranks x 1 thread; Triad 30 GB/s on 2 cores x
    efficiency 0.8; ping-pong 1 us and 10 GB/s within the node."""
    m = Machine("m", 2, {1: 20.0, 2: 30.0}, True, latency_us=1.0, bandwidth_gbs=10.0)
    p = predict(Problem.poisson(64, 64, 64), m, Layout(1, 2, 1), 100, 0.8)
    memory = 70_811_648 / (30e9 * 0.8)
    halo = 2 * (1e-6 + 8 * 64 * 64 / 10e9)  # two neighbours, a 64 x 64 slab face each
    reduce = 3 * 2 * 1 * 1e-6  # three Allreduces, 2 log2(2) latencies
    assert (p.memory_s, p.halo_s, p.reduce_s) == pytest.approx((memory, halo, reduce))
    assert p.solve_s == pytest.approx(100 * (memory + halo + reduce), rel=1e-12)
    assert p.solve_s == pytest.approx(0.29650389, rel=1e-7)
    one = predict(Problem.poisson(64, 64, 64), m, Layout(1, 1, 1), 100, 0.8)
    assert one.solve_s == pytest.approx(100 * 70_811_648 / (20e9 * 0.8))  # no communication
    assert fit_efficiency(Problem.poisson(64, 64, 64), m, Layout(1, 2, 1), 100,
                          p.solve_s) == pytest.approx(0.8)


def test_a_published_triad_scales_down_with_cores_never_up():
    m = Machine("pub", 120, {24: 235.1}, False)
    assert m.bandwidth(120) == 235.1 and m.bandwidth(12) == pytest.approx(235.1 / 2)


@pytest.mark.parametrize("machine,layout,message", [
    (Machine("small", 2, {2: 30.0}, True, 1.0, 10.0), Layout(1, 2, 2),
     "small: 2x2 needs 4 cores of a node, it has 2"),
    (Machine("noib", 48, {48: 300.0}, False, 1.0, 10.0, max_nodes=1), Layout(2, 2, 24),
     "noib: no interconnect for 2 nodes (a VM without InfiniBand runs on one)"),
    (Machine("lone", 16, {16: 50.0}, True), Layout(1, 2, 8),
     "lone: no ping-pong within a node measured or published"),
    (Machine("none", 16, {}, True), Layout(1, 1, 16), "none: no Triad measured or published")])
def test_what_the_model_cannot_price_is_said(machine, layout, message):
    with pytest.raises(ValueError) as err:
        predict(Problem.poisson(16, 16, 16), machine, layout, 10, 0.8)
    assert str(err.value) == message


def test_a_pay_as_you_go_job_with_storage_and_egress_by_hand():
    """4 nodes at 522 JPY/node-h (HB120rs_v3, East US), 2 h of computing, 5 min to deploy,
    100 GB in and 200 GB out at 100 MiB/s, kept 2 months; egress 11.6 JPY/GB (10 TB for
    116,000 JPY)."""
    data = job.Data(100, 200, 2)
    j = job.vm_job(2.0, 4, 522.0, data, 100.0, TIERS, 11.6, deploy_h=5 / 60)
    stage_in = 100e9 / (100 * 2 ** 20) / 3600
    stage_out = 200e9 / (100 * 2 ** 20) / 3600
    hours = 5 / 60 + stage_in + 2.0 + stage_out
    assert j.hours == pytest.approx(hours) and hours == pytest.approx(2.878062, abs=1e-6)
    assert j.compute_jpy == pytest.approx(4 * hours * 522.0)
    # while it runs: 100 MiB/s is 6.25 TiB Standard (136,842 JPY/month), 1.5625 TiB Premium
    # (68,252), 0.78125 TiB Ultra (45,558): Ultra, for 2.88 of 730 hours; then 300 GB
    # (0.2728 TiB) on Standard for 2 months
    assert (j.storage.tier, j.storage.tib, j.storage.keep_tier) == ("Ultra", 0.78125,
                                                                    "Standard")
    run = 0.78125 * 233256 / 4 * hours / 730
    keep = 300e9 / 2 ** 40 * 87579 / 4 * 2
    assert j.storage.jpy == pytest.approx(run + keep) and keep == pytest.approx(11947.9, abs=0.1)
    assert j.egress_jpy == pytest.approx(2320.0)
    assert j.jpy == pytest.approx(4 * hours * 522.0 + run + keep + 2320.0)
    assert j.jpy == pytest.approx(20456.9, abs=0.5)


def test_a_spot_job_by_hand():
    """10 h of work on 2 spot nodes at 52.2 JPY/node-h, checkpointed every hour, 0.1
    evictions per hour, 5 min to restart: each hour-long segment takes (1/0.1 + 1/12)
    (e^0.1 - 1) h of wall time and is billed e^0.1 - 1 over 0.1 hours."""
    e = spot_expected(10, 1.0, 0.1, 5 / 60)
    assert e["time_h"] == pytest.approx(10 * (10 + 1 / 12) * math.expm1(0.1))
    assert e["billed_h"] == pytest.approx(10 * math.expm1(0.1) / 0.1)
    data = job.Data(1, 1, 0.5)
    j = job.vm_job(e["time_h"], 2, 52.2, data, 50.0, TIERS, 13.0, deploy_h=0.1,
                   billed_compute_h=e["billed_h"])
    stage = 1e9 / (50 * 2 ** 20) / 3600
    assert j.hours == pytest.approx(0.1 + 2 * stage + 10.604734, abs=1e-6)
    billed = 0.1 + 2 * stage + 10.5170918
    assert j.compute_jpy == pytest.approx(2 * billed * 52.2, rel=1e-7)
    run = 50 / 128 * 233256 / 4 * j.hours / 730  # Ultra 0.39 TiB reaches 50 MiB/s cheapest
    keep = 2e9 / 2 ** 40 * 87579 / 4 * 0.5
    assert j.storage.jpy == pytest.approx(run + keep) and j.egress_jpy == 13.0
    assert j.jpy == pytest.approx(1476.8, abs=0.5)


@pytest.mark.parametrize("values,message", [
    ((0, 1, 1), "input_gb must be a positive number, not 0"),
    ((1, -5, 1), "output_gb must be a positive number, not -5"),
    ((1, 1, math.nan), "months must be a positive number, not nan")])
def test_data_sizes_must_be_positive(values, message):
    with pytest.raises(ValueError) as err:
        job.Data(*values)
    assert str(err.value) == message


def test_no_price_is_never_priced_as_zero():
    with pytest.raises(ValueError, match="no price"):
        job.vm_job(1.0, 1, math.nan, job.Data(1, 1, 1), 10.0, TIERS, 1.0)
    with pytest.raises(ValueError, match="no storage tier with a price"):
        job.storage(job.Data(1, 1, 1), 10.0, [], 1.0)


def test_a_job_with_no_size_is_refused():
    from burstbench.cost.decision import JobClass

    with pytest.raises(ValueError) as err:
        JobClass("mine", 1, job.Data(1, 1, 1))
    assert str(err.value) == "job mine: no size (give a problem, or its node-hours on Flow)"


def test_the_error_range_holds_the_prediction_and_ignores_short_solves():
    """Errors from solves under MIN_SOLVE_S do not count; the fitted solve's 0 always does,
    so a model that only ever under-predicts still ranges from 0 to its worst."""
    v = pd.DataFrame({"reference": [True, False, False, False],
                      "measured_s": [5.0, 0.1, 3.0, 9.0],
                      "error": [0.0, -0.9, -0.2, -0.1]})
    assert decision.Model(1.0, {}, v).error_range == (-0.2, 0.0)
    v["error"] = [0.0, -0.9, 0.3, -0.1]
    assert decision.Model(1.0, {}, v).error_range == (-0.1, 0.3)
    short = v.assign(measured_s=[5.0, 0.1, 0.2, 0.3])  # none long: all of them count
    assert decision.Model(1.0, {}, short).error_range == (-0.9, 0.3)
