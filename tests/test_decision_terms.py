"""Issue 50: the break-even taken apart, what flips a verdict, each region's own network,
and a time model validated only on the build it was fitted on; each against a number
worked out by hand."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from burstbench.cost import burst, job, model
from burstbench.cost import uncertainty as u
from burstbench.cost.flips import GB_OUT, bisect, flip_points

ROOT = Path(__file__).resolve().parents[1]
MIB = 2 ** 20


def _known(**values: float) -> dict[str, u.Range]:
    """Every input of the decision known (not drawn), at `values` where given, else 0
    (Flow's fraction 1)."""
    base = {u.ERROR: 0.0, u.FLOW_FRACTION: 1.0, u.WAN: 50.0, u.DEPLOY: 6.0,
            u.ITERATIONS: 0.0, u.EVICTIONS: 0.0, u.LATENCY: 0.0, u.SPOT_START: 0.0}
    base |= {getattr(u, k): v for k, v in values.items()}
    return {k: u.Range.known(k, v, "MiB/s" if k == u.WAN else "", "") for k, v in base.items()}


def _case(billing: str = "payg"):
    """1 h of computing on the VM, 0.5 h on Flow, 18 GB in and 36 GB out, a pool far
    faster than the WAN; the evaluator bound to it as burst.decide binds one."""
    jc = burst.JobClass("j", 1, job.Data(18, 36), flow_node_hours=0.5)
    vm, flow = burst.Parts(node_hours_h=1.0), burst.Parts(node_hours_h=0.5)
    opt = burst.Option("vm", "r", billing, 100.0,
                       job.Pool(job.PER_JOB, job.Tier("T", 1e6, 0.0), 1.0), None, 0.0)
    s = burst.Settings(44.3, 0.0, draws=100, seed=1, queue_wait_h=1.0)

    def ev(x, data=None):
        return burst.evaluate(replace(jc, data=data) if data else jc, vm, flow,
                              lambda i: np.ones_like(i[u.ERROR]), opt, s, x)
    return jc, ev, s


def test_the_break_even_adds_up_from_its_terms_worked_out_by_hand():
    """deployment 6 min = 0.1 h; staging in 18e9 B / (50 MiB/s) = 0.095367 h; staging out
    36e9 B / (50 MiB/s) = 0.190735 h; computing 1 - 0.5 = 0.5 h: the break-even 0.886102 h."""
    _, ev, s = _case()
    out = ev(u.modes(_known()))
    stage_in, stage_out = 18e9 / (50 * MIB) / 3600, 36e9 / (50 * MIB) / 3600
    assert (stage_in, stage_out) == pytest.approx((0.0953674, 0.1907349), rel=1e-6)
    expect = {"deploy_h": 0.1, "stage_in_h": stage_in, "stage_out_h": stage_out,
              "compute_diff_h": 0.5}
    for k, v in expect.items():
        assert out[k][0] == pytest.approx(v, rel=1e-12), k
    assert out["break_even_h"][0] == pytest.approx(0.886102, abs=1e-6)
    assert out["break_even_h"][0] == pytest.approx(sum(out[k][0] for k in expect), rel=1e-12)
    row = burst.summarize(ev(u.draw(_known(), s.draws, s.seed)), s)
    assert (row["be_stage_out_low_h"], row["be_stage_out_h"], row["be_stage_out_high_h"]) == \
        pytest.approx((stage_out,) * 3)


def test_a_spot_rows_wait_for_capacity_is_deployment_and_is_not_billed():
    """30 min waiting for free capacity: the deployment term grows by 0.5 h, the computing
    term does not, the break-even by 0.5 h; the nodes are not billed for it."""
    _, ev, _ = _case("spot")
    waited = ev(u.modes(_known(SPOT_START=30.0)))
    at_once = ev(u.modes(_known()))
    assert waited["deploy_h"][0] == pytest.approx(0.1 + 0.5)
    assert waited["compute_diff_h"][0] == pytest.approx(at_once["compute_diff_h"][0])
    assert waited["break_even_h"][0] - at_once["break_even_h"][0] == pytest.approx(0.5)
    assert waited["compute_jpy"][0] == pytest.approx(at_once["compute_jpy"][0])


def test_a_flip_point_by_bisection_is_its_closed_form():
    """The break-even is 0.6 h + 54e9 B / rate: at a 1 h wait it flips where the rate is
    54e9 / (0.4 h x 3600 x MiB) = 35.7628 MiB/s, bursting above; with 50 MiB/s it flips at
    0.4 h x 3600 x 50 MiB - 18 GB = 57.4978 GB out, staying above."""
    jc, ev, _ = _case()
    flips = {f.input: f for f in flip_points(ev, _known(), [u.WAN, GB_OUT],
                                                   jc.data, 1.0)}
    rate = 54e9 / (0.4 * 3600 * MIB)
    assert flips[u.WAN].at == pytest.approx(rate, rel=1e-9) == pytest.approx(35.7628, rel=1e-5)
    assert flips[u.WAN].burst_above and flips[u.WAN].verdict_at_modes == "burst"
    assert flips[u.WAN].text() == "burst while WAN rate is at least 35.8 MiB/s"
    out_gb = 0.4 * 3600 * 50 * MIB / 1e9 - 18
    assert flips[GB_OUT].at == pytest.approx(out_gb, rel=1e-9)
    assert flips[GB_OUT].text() == "stay above 57.5 GB out"


def test_a_flip_point_that_does_not_exist_is_said_not_raised():
    """At a 0.5 h wait, deployment and computing alone (0.6 h) are longer: no WAN rate
    makes it burst, and the answer says so."""
    jc, ev, _ = _case()
    (f,) = flip_points(ev, _known(), [u.WAN], jc.data, 0.5)
    assert f.at is None and f.verdict_at_modes == "stay"
    assert f.text() == "no WAN rate up to 10 GiB/s makes it burst"
    assert bisect(lambda x: x - 2.0, 0.0, 1.0) is None
    assert bisect(lambda x: x - 0.25, 0.0, 1.0) == pytest.approx(0.25)


def test_each_region_stages_over_its_own_network(tmp_path):
    """Given 20 MiB/s to East US and 80 to Japan East, the same option stages at 20 and at
    80: 30 GB out takes 30e9 / (20 MiB/s) = 0.397 h and 0.099 h; the table says which."""
    from burstbench.report import decision as report

    report.decision_report(figures_dir=tmp_path, mc_draws=200,
                           wan_mib_s={"East US": 20, "Japan East": 80})
    d = pd.read_csv(tmp_path / "burst_decision.csv")
    d = d[(d["status"] == "priced") & (d["billing"] == "payg")
          & (d["storage_scenario"] == "pool per job") & (d["vm"] == "HB120-16rs_v3")
          & (d["nodes"] == 8)].set_index("region")
    assert d.loc["East US", "staging_mib_s"] == 20.0
    assert d.loc["Japan East", "staging_mib_s"] == 80.0
    assert d.loc["East US", "be_stage_out_h"] == round(30e9 / (20 * MIB) / 3600, 3) == 0.397
    assert d.loc["Japan East", "be_stage_out_h"] == round(30e9 / (80 * MIB) / 3600, 3)
    inputs = pd.read_csv(tmp_path / "burst_inputs.csv").set_index("input")
    assert float(inputs.loc["WAN rate to East US", "mode"]) == 20.0
    assert float(inputs.loc["WAN rate to Japan East", "mode"]) == 80.0


@pytest.mark.parametrize("wan,message", [
    ({"East US": 0}, "wan_mib_s for East US must be positive, not 0"),
    ({"Japan East": [-1, 10]}, "wan_mib_s for Japan East must be positive, not -1"),
    ({"Mars": 10}, "wan_mib_s: no region 'Mars' (the regions priced: East US, Japan East)")])
def test_a_regions_wan_given_wrong_is_refused_in_one_line(tmp_path, wan, message):
    from burstbench.report import decision as report

    with pytest.raises(ValueError) as err:
        report.decision_report(figures_dir=tmp_path, mc_draws=100, wan_mib_s=wan)
    assert str(err.value) == message


def test_the_published_wan_across_the_pacific_is_one_tcp_streams():
    """East US: 3 MiB / 170 ms to 6 MiB / 162 ms (wan_paths.csv) = 17.65-37.04 MiB/s, below
    the gfrep rates; Japan East: the gfrep rates (23.4-116.6), its bound not binding."""
    from burstbench.cost import inputs

    r = inputs.wan_ranges(("East US", "Japan East"), 0, ROOT / "data/reference", [])
    east, japan = r["WAN rate to East US"], r["WAN rate to Japan East"]
    assert (east.low, east.high) == pytest.approx((3 / 0.170, 6 / 0.162))
    assert (round(japan.low, 1), round(japan.high, 1)) == (23.4, 116.6)
    assert "162 ms" in east.source and "nothing measured from Flow to East US" in east.source


def test_a_run_of_another_solver_build_does_not_validate_the_model(tmp_path):
    """The runs of 23-24 November: the fitted solve's build (901cba971062536d, bd19 and ae37)
    validates; the runs of 23 November ran earlier builds and are listed, not used. Then
    one of the fitted build's runs relabelled as another build: its solves leave the band."""
    from burstbench.core import paths
    from burstbench.cost import machines
    from burstbench.registry import all_merits

    def fitted(runs: Path) -> model.Model:
        merits = all_merits(runs, paths.reference_dir(), [])
        m = machines.machines(merits, paths.reference_dir(), 0.793, [])
        return model.fit(merits, m, {"vm": "local", "problem": "poisson128x128x128",
                                     "layout": "2x1"})

    runs = tmp_path / "runs"
    for run in sorted((ROOT / "data/runs/local").glob("2026112[34]T*")):  # these runs only
        shutil.copytree(run, runs / "local" / run.name)
    v = fitted(runs).validation
    old = v[v["run_id"].str.startswith("20261123")]
    assert len(old) and not old["used"].any()
    assert old["not_used"].str.startswith("another build of the solver").all()
    used = v[v["used"] & ~v["reference"]]
    assert sorted(zip(used["run_id"], used["problem"], used["layout"])) == [
        ("20261124T004012Z-bd19", "poisson128x128x128", "1n 2x1"),
        ("20261124T004012Z-bd19", "poisson256x256x512", "1n 2x1")]
    assert fitted(runs).error_range == (min(used["error"].min(), 0.0),
                                        max(used["error"].max(), 0.0))
    prov = runs / "local/20261124T004012Z-bd19/provenance.json"
    p = json.loads(prov.read_text())
    p["builds"]["biccg"]["source_digest"] = "0000000000000000"
    prov.write_text(json.dumps(p))
    again = fitted(runs)
    assert not again.validated and again.error().fixed
    assert model.not_used("0000000000000000", "901cba971062536d", 2, 1, 2, 93.0) == (
        "another build of the solver (0000000000000000; fitted: 901cba971062536d)")
    assert model.not_used("b", "b", 1, 1, 2, 93.0) == (
        "a layout the decision does not price (1 rank(s) x 1 thread(s) a node; it prices "
        "2 x 1 here)")
    assert model.not_used("b", "b", 2, 1, 2, 0.2).startswith("shorter than 1 s")
    assert model.not_used("", "b", 2, 1, 2, 9.0) == "no build recorded in its run's provenance"
