"""Launching MPI: each launcher's arguments, srun's PMI plugin, the batch job's hosts, and
what an MPI that cannot build does to the ping-pong sweep and the kernels' exit status."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import OMPI_MPICC, OMPI_MPIEXEC, mpi_compiler_problem

from burstbench import params
from burstbench.benchmarks import biccg, pingpong
from burstbench.benchmarks.pingpong import tasks as pingpong_tasks
from burstbench.core import launch, mpi
from burstbench.core.launch import Layout
from kernels_ext.common.errors import BadInput, BuildError, first_error_line

MPICC = str(Path(sys.executable).parent / "mpicc")
needs_mpich = pytest.mark.skipif(not os.access(MPICC, os.X_OK),
                                 reason="no mpicc in the environment (pip install mpich)")
ONE_NODE = Layout(2, 2, cpus=(0, 1))  # the ping-pong's same-socket pair
TWO_NODES = Layout(4, 2, threads=3, hosts=("a", "b"))  # BICCG's 2x3 on two nodes


def command(name: str, layout: Layout, **kw) -> tuple[list[str], dict[str, str]]:
    lau = launch.launcher(name, **kw)
    return lau.args(layout), lau.env(layout)


# -- each launcher's arguments -----------------------------------------------------------

@pytest.mark.parametrize("name,one_node,two_nodes", [
    ("hydra", (["-bind-to", "user:0,1", "-n", "2"], {}),
     (["-hosts", "a,b", "-ppn", "2", "-bind-to", "core:3", "-n", "4"], {})),
    ("intel", (["-n", "2"], {"I_MPI_PIN_PROCESSOR_LIST": "0,1"}),
     (["-hosts", "a,b", "-ppn", "2", "-n", "4"],
      {"I_MPI_PIN_DOMAIN": "3", "I_MPI_PIN_CELL": "core"})),
    ("openmpi", (["--cpu-list", "0,1", "--bind-to", "cpu-list:ordered", "-n", "2"], {}),
     (["--host", "a:2,b:2", "--map-by", "ppr:2:node:PE=3", "--bind-to", "core", "-n", "4"],
      {})),
    ("slurm", (["-N", "1", "--ntasks-per-node", "2", "--cpu-bind=map_cpu:0,1", "-n", "2"], {}),
     (["-N", "2", "--ntasks-per-node", "2", "--nodelist", "a,b", "--cpus-per-task", "3",
       "--distribution=block:block", "--cpu-bind=cores", "-n", "4"], {})),
    ("none", (["-n", "2"], {}), (["-n", "4"], {})),
])
def test_each_launcher_on_one_and_two_nodes(name, one_node, two_nodes):
    assert command(name, ONE_NODE) == one_node
    assert command(name, TWO_NODES) == two_nodes


def test_the_ping_pong_across_nodes_puts_one_rank_on_each():
    far = pingpong_tasks.pair("across-nodes", "across-nodes", None, ("a", "b")).layout
    assert far == Layout(2, 1, hosts=("a", "b")) and far.nodes == 2
    assert command("hydra", far)[0] == ["-hosts", "a,b", "-ppn", "1", "-bind-to", "core:1",
                                        "-n", "2"]
    assert command("openmpi", far)[0][:2] == ["--host", "a:1,b:1"]
    same_host = pingpong_tasks.pair("x", "custom", (0, 1), ("a", "a")).layout
    assert same_host.hosts == ("a",) and same_host.per_node == 2


def test_the_registry_is_what_the_parameters_accept():
    assert set(launch.LAUNCHERS) == set(mpi.LAUNCHERS)
    with pytest.raises(params.ParamError, match="launcher 'srun' is not one of"):
        launch.launcher("srun")


# -- srun's --mpi plugin -----------------------------------------------------------------

def fake_srun(tmp_path: Path, plugins: list[str]) -> str:
    """An srun that answers --mpi=list as Slurm 22.05 does."""
    srun = tmp_path / "srun"
    lines = "".join(f"\t{p}\\n" for p in plugins)
    srun.write_text(f"#!/bin/sh\nprintf 'MPI plugin types are...\\n{lines}'\n")
    srun.chmod(0o755)
    return str(srun)


def test_srun_gets_pmi2_for_the_mpich_family(tmp_path):
    srun = fake_srun(tmp_path, ["none", "pmi2"])
    assert command("slurm", ONE_NODE, mpiexec=srun, family="mpich")[0][0] == "--mpi=pmi2"


@pytest.mark.parametrize("offered,expected", [
    (["pmix", "none", "cray_shasta", "pmi2"], "--mpi=pmix"),
    (["none", "pmix_v4"], "--mpi=pmix"),
    (["none", "pmi2"], None),  # no PMIx here: leave it to the cluster's MpiDefault
])
def test_srun_gets_pmix_for_open_mpi_where_offered(tmp_path, offered, expected):
    args = command("slurm", ONE_NODE, mpiexec=fake_srun(tmp_path, offered),
                   family="openmpi")[0]
    assert [a for a in args if a.startswith("--mpi")] == ([expected] if expected else [])


@pytest.mark.parametrize("given", [{"args": ["--mpi=none"]}, {"args": ["--mpi", "pmix"]},
                                   {"env": {"SLURM_MPI_TYPE": "pmi2"}}])
def test_srun_keeps_the_plugin_the_combination_names(given):
    args = command("slurm", ONE_NODE, family="mpich", **given)[0]
    assert not any(a.startswith("--mpi") for a in args)


@pytest.mark.parametrize("given", [{"args": ["--distribution=cyclic"]},
                                   {"args": ["--distribution", "block:cyclic"]},
                                   {"args": ["-m", "cyclic"]}, {"args": ["-mplane=2"]},
                                   {"args": ["--dist=cyclic"]},  # getopt's abbreviation
                                   {"env": {"SLURM_DISTRIBUTION": "block:cyclic"}}])
def test_srun_keeps_the_distribution_the_combination_names(given):
    """Only a distribution of the combination's own: srun takes the last option given, and
    the launcher's come after the combination's."""
    args = command("slurm", TWO_NODES, **given)[0]
    assert not any(a.startswith(("--distribution", "-m")) for a in args)
    assert "--distribution=block:block" in command("slurm", TWO_NODES, args=["--mpi=none"])[0]


def test_srun_without_a_family_or_without_slurm(tmp_path):
    assert not command("slurm", ONE_NODE)[0][0].startswith("--mpi")
    assert launch.srun_mpi_plugins(str(tmp_path / "no-srun")) == frozenset()


@pytest.fixture
def slurm_conf(tmp_path, monkeypatch):
    """A minimal slurm.conf: enough for scontrol and srun to answer without a controller."""
    if shutil.which("scontrol") is None or shutil.which("srun") is None:
        pytest.skip("Slurm's client commands are not installed (apt-get install slurm-client)")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\n"
                    "PartitionName=p Nodes=n1\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    launch.srun_mpi_plugins.cache_clear()
    yield conf
    launch.srun_mpi_plugins.cache_clear()


def test_the_real_srun_lists_its_plugins(slurm_conf):
    assert "pmi2" in launch.srun_mpi_plugins(shutil.which("srun"))


# -- node lists --------------------------------------------------------------------------

FORMS = {"n[1-2]-ib": ["n1-ib", "n2-ib"],
         "rack[1-2]-node[01-02]": ["rack1-node01", "rack1-node02", "rack2-node01",
                                   "rack2-node02"],
         "node[01-03,07],gpu1": ["node01", "node02", "node03", "node07", "gpu1"],
         "cn5": ["cn5"]}


@pytest.mark.parametrize("text", FORMS)
def test_node_lists_with_scontrol(slurm_conf, text):
    """Slurm 22.05's scontrol rejects n[1-2]-ib (on stderr, exit status 0): our own parser
    answers then."""
    assert launch.expand_nodelist(text) == FORMS[text]


@pytest.mark.parametrize("text", FORMS)
def test_node_lists_without_scontrol(tmp_path, monkeypatch, text):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert shutil.which("scontrol") is None
    assert launch.expand_nodelist(text) == FORMS[text]


@pytest.mark.parametrize("text, why", [
    ("n[1-2", "'[' without ']'"), ("n1]", "']' without '['"), ("a,,b", "an empty name"),
    ("n[1-[2]]", "brackets inside brackets"), ("n[x]", "'x' is not a number or a range"),
    ("n[5-2]", "the range 5-2 runs down"), ("n[]", "'' is not a number or a range")])
def test_node_list_syntax_errors_are_named(text, why):
    with pytest.raises(params.ParamError) as err:
        launch.parse_nodelist(text)
    assert str(err.value) == f"node list '{text}' cannot be read: {why}"


def test_node_list_numbers_keep_the_width_of_their_first_bound():
    assert launch.parse_nodelist("c[8-11],d[098-101]") == \
        ["c8", "c9", "c10", "c11", "d098", "d099", "d100", "d101"]
    assert launch.parse_nodelist(" a , b[1] ") == ["a", "b1"]


def test_scontrol_is_asked_first(tmp_path, monkeypatch):
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\necho from-scontrol\n")
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert launch.expand_nodelist("n[1-2]") == ["from-scontrol"]


def test_an_unreadable_node_list_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(params.ParamError, match=r"node list 'n\[3-1\]' cannot be read: the "
                                                r"range 3-1 runs down"):
        launch.expand_nodelist("n[3-1]")


def test_hosts_from_the_scheduler(tmp_path):
    nodefile = tmp_path / "nodes"
    nodefile.write_text("cn1\ncn1\ncn2\ncn2\n")
    assert launch.scheduler_hosts({"PBS_NODEFILE": str(nodefile)}) == ["cn1", "cn2"]
    assert launch.scheduler_hosts({"SLURM_JOB_NODELIST": "node[01-03,07],gpu1"}) == \
        ["node01", "node02", "node03", "node07", "gpu1"]
    assert launch.scheduler_hosts({}) == []


def test_too_many_nodes_is_a_note_outside_a_job_and_an_error_inside():
    outside = launch.job_hosts([], "biccg_hosts", {})
    assert outside.shortfall(1, "biccg_nodes") == ""
    assert "2 nodes asked for, 1 host(s) known (give biccg_hosts" in \
        outside.shortfall(2, "biccg_nodes")
    inside = launch.job_hosts([], "biccg_hosts", {"SLURM_JOB_NODELIST": "n[1-2]"})
    assert inside.names == ("n1", "n2") and inside.shortfall(2, "biccg_nodes") == ""
    with pytest.raises(params.ParamError, match=r"biccg_nodes: 4 nodes asked for, but this job "
                                                r"\(\$SLURM_JOB_NODELIST\) has 2"):
        inside.shortfall(4, "biccg_nodes")
    given = launch.job_hosts(["a"], "biccg_hosts", {"PBS_NODEFILE": "/no/such/file"})
    with pytest.raises(params.ParamError, match="but biccg_hosts has 1"):
        given.shortfall(2, "biccg_nodes")


def test_a_one_node_job_skips_the_ping_pong_across_nodes_with_a_note(monkeypatch):
    """across-nodes is in the default placements ("where possible"): a one-node job measures
    the others and says why it skipped this one, unlike an explicit biccg_nodes count."""
    P = params.validate({"pingpong_placements": ["same-socket", "across-nodes"]}, "pingpong")
    for env in ({"SLURM_JOB_NODELIST": "cn1"}, {}):
        monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        placements, notes = pingpong_tasks.resolve_placements(P)
        assert [p.kind for p in placements] == ["same-socket"]
        assert "skipped pingpong_placements across-nodes: 2 nodes asked for, 1 host(s)" in \
            notes[-1]


def test_a_one_node_job_refuses_biccg_on_two(monkeypatch):
    monkeypatch.setenv("PBS_NODEFILE", "/no/such/nodefile")
    P = params.validate({"biccg_problems": [{"poisson": [4, 4, 4]}], "biccg_nodes": [1, 2]},
                        "biccg")
    with pytest.raises(params.ParamError, match=r"biccg_nodes: 2 nodes asked for, but this job "
                                                r"\(\$PBS_NODEFILE\) has 1"):
        biccg.plan(P)


def test_placements_from_topology():
    two_sockets = [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1), (4, 0, 0)]  # cpu 4: HT sibling
    assert launch.placement_cpus("same-socket", two_sockets) == (0, 1)
    assert launch.placement_cpus("across-sockets", two_sockets) == (0, 2)
    one_socket = [(0, 0, 0), (1, 0, 1)]
    assert launch.placement_cpus("across-sockets", one_socket) is None
    assert launch.placement_cpus("same-socket", [(0, 0, 0)]) is None


# -- an MPI that cannot build ------------------------------------------------------------

def test_the_first_error_line_is_the_cause():
    out = ("h.c:1:10: fatal error: mpi.h: No such file or directory\n    1 | #include <mpi.h>\n"
           "compilation terminated.\n")
    assert first_error_line(out) == "h.c:1:10: fatal error: mpi.h: No such file or directory"
    assert first_error_line("\nsomething odd\n") == "something odd"


@needs_mpich
def test_failed_builds_exit_alike_from_every_kernel(cli):
    """A variant the compiler rejects is BuildError (4) from the Triad and the ping-pong alike;
    a compiler that is not installed is BadInput (2) from both."""
    bad = "--flags=-O2 -fno-such-flag"
    triad = cli("-m", "kernels_ext.triad", "--info", "--compiler", "gcc", bad)
    pp = cli("-m", "kernels_ext.pingpong", "--info", "--compiler", MPICC, bad)
    assert triad.returncode == pp.returncode == BuildError.exit_code, triad.stderr + pp.stderr
    assert "-fno-such-flag" in pp.stderr and "Traceback" not in pp.stderr
    absent = [cli("-m", f"kernels_ext.{k}", "--info", "--compiler", "mpiicx")
              for k in ("triad", "pingpong")]
    assert [p.returncode for p in absent] == [BadInput.exit_code] * 2, absent[1].stderr


def pp_params(tmp_path: Path, combos: list[dict]) -> dict:
    return params.validate({"vm": "t", "runs_dir": str(tmp_path), "pingpong_tests": ["latency"],
                            "pingpong_placements": ["same-socket"],
                            "pingpong_combinations": combos}, "pingpong")


@needs_mpich
def test_an_optional_combination_that_cannot_build_is_skipped(tmp_path):
    broken = {"mpiexec": "mpiexec", "mpicc": MPICC, "flags": "-O2 -fno-such-flag",
              "label": "broken"}
    pl = pingpong.plan(pp_params(tmp_path, [{"mpiexec": "mpiexec"}, broken | {"optional": True}]))
    (note,) = [n for n in pl.notes if "broken" in n]
    assert "cannot build the kernel" in note and "error: unrecognized command-line option" \
        in note and len(note.splitlines()) == 1
    assert {t.config["variant"] for t in pl.tasks} != {"broken"}
    with pytest.raises(params.ParamError, match="pingpong_combinations: broken: .* cannot build"):
        pingpong.plan(pp_params(tmp_path, [broken]))


@pytest.mark.skipif(not os.access(OMPI_MPICC, os.X_OK) or not mpi_compiler_problem(OMPI_MPICC),
                    reason="needs Debian's openmpi-bin without libopenmpi-dev")
def test_open_mpi_without_headers_is_skipped_by_the_local_params(tmp_path):
    combo = {"mpiexec": OMPI_MPIEXEC, "launcher": "openmpi", "mpicc": OMPI_MPICC,
             "optional": True}
    pl = pingpong.plan(pp_params(tmp_path, [{"mpiexec": "mpiexec"}, combo]))
    assert any("mpi.h: No such file or directory" in n for n in pl.notes), pl.notes
