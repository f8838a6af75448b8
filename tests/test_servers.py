"""Servers (burstbench.core.servers): the tasks of one session measured in turn by one
process, each answer what a fresh process would have printed; a server that fails, hangs
or is stopped is killed whole, and a sweep leaves none behind."""

from __future__ import annotations

import json
import sys
import time

import pytest

from burstbench.core import contention, runner, servers

TRIAD = (sys.executable, "-m", "kernels_ext.triad", "--size", "100000", "--ntimes", "2",
         "--threads", "1")
#: A server that never says it is ready, nor answers.
MUTE = (sys.executable, "-c", "import sys, time\nfor _ in sys.stdin: time.sleep(600)")


def task(argv: tuple[str, ...] = TRIAD, session: str = "s", timeout: float = 120,
         key: str = "k") -> runner.Task:
    return runner.Task(key, {}, argv, (("OMP_PROC_BIND", "close"),), timeout, session=session)


def alive(pid: int) -> bool:
    return pid in runner._parents()


def test_a_session_is_served_by_one_process_whose_answers_are_a_fresh_ones():
    fresh_out, _ = runner.launch(task(session=""))
    with servers.Servers() as live:
        answers = []
        for k in ("a", "b"):
            out, err = live.launch(task(key=k))
            answers.append((out, err, live.pids()))
        (pid,) = answers[0][2]
    assert answers[1][2] == [pid]  # the same process answered both
    assert not alive(pid)  # and the end of the sweep ended it
    want = [{k for k in json.loads(line)} for line in fresh_out.splitlines()]
    for out, err, _ in answers:
        recs = [json.loads(line) for line in out.splitlines()]
        assert [set(r) for r in recs] == want
        assert [r["function"] for r in recs] == ["Copy", "Scale", "Add", "Triad"]
        assert all(r["validated"] and r["env"] == {"OMP_PROC_BIND": "close"} for r in recs)
        # each answer's own warnings, not the ones before it
        assert err.count("smaller than 4x the last-level cache") == 1


def test_a_server_that_fails_is_a_failed_task_and_the_next_task_starts_another():
    bad = (*TRIAD[:3], "--size=-5", *TRIAD[5:])
    with servers.Servers() as live:
        with pytest.raises(runner.TaskFailed,
                           match="^error: size must be a positive number of elements, not -5$"):
            live.launch(task(bad))
        assert live.pids() == []
        live.launch(task(key="next"))
        assert len(live.pids()) == 1


def test_a_server_past_its_timeout_is_killed_and_said_so():
    with servers.Servers() as live:
        live.launch(task(MUTE[:2] + ("import sys\nprint('#done', flush=True)\n"
                                      "for _ in sys.stdin: print('#done', flush=True)",),
                         session="quick"))
        (quick,) = live.pids()
        began = time.monotonic()
        with pytest.raises(runner.TaskFailed,
                           match=r"^no result within the timeout of 0\.5 s; stopped$"):
            live.launch(task(MUTE, session="mute", timeout=0.5))
        assert time.monotonic() - began < 30  # a hang guard: killed, not waited on
        assert live.pids() == [quick]  # the hung one is gone, the other serves on
    assert not alive(quick)


def test_servers_make_room_for_a_new_one_when_memory_runs_low(monkeypatch):
    free = {"MemTotal": 100 << 30, "MemAvailable": 90 << 30}
    monkeypatch.setattr(servers, "_memory", lambda: (free["MemAvailable"], free["MemTotal"]))
    with servers.Servers() as live:
        live.launch(task(session="one"))
        live.launch(task(session="two"))
        one, two = live.pids()
        free["MemAvailable"] = 10 << 30  # less than RESERVE (20 GiB) would be left
        live.launch(task(session="three"))
        assert not alive(one) and not alive(two)  # the least recently used first, until
        assert len(live.pids()) == 1  # no server is left to close


def test_a_servers_cpu_time_is_counted_as_the_sweeps_own():
    """Between requests a server is a live child no one has waited for: its CPU time is
    not in RUSAGE_CHILDREN, so sample() must be told of it, or a sweep's own measurement
    would flag itself contended."""
    with servers.Servers() as live:
        live.launch(task())
        (pid,) = live.pids()
        spent = contention.cpu_seconds(pid)
        assert spent > 0
        assert contention.sample(live.pids()).own - contention.sample().own == \
            pytest.approx(spent, abs=0.02)


def test_no_server_outlives_an_interrupted_sweep(monkeypatch):
    calls = []
    real = servers.Servers._send

    def interrupt_second(server):
        calls.append(server.proc.pid)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real(server)

    monkeypatch.setattr(servers.Servers, "_send", staticmethod(interrupt_second))
    with pytest.raises(KeyboardInterrupt), servers.Servers() as live:
        live.launch(task(session="a"))
        live.launch(task(session="b"))
    assert len(calls) == 2 and not any(alive(p) for p in calls)


def stamping(path, name: str, ready_after: float = 0.0) -> tuple[str, ...]:
    """A server that appends 'NAME ready T' to `path` once set up (after `ready_after`
    seconds), then 'NAME measured T' for each request, T its clock."""
    return (sys.executable, "-c", f"""
import sys, time
def stamp(what):
    with open({str(path)!r}, "a") as fh:
        fh.write(f"{name} {{what}} {{time.time()}}\\n")
time.sleep({ready_after})
stamp("ready")
print("#done", flush=True)
for _ in sys.stdin:
    stamp("measured")
    print("#done", flush=True)
""")


def test_the_next_sessions_servers_start_beside_the_first_and_all_are_ready_before_it_measures(
        tmp_path, monkeypatch):
    """expect(): the first task's server starts with the next session's (2 CPUs: one
    more), and its request is sent only once both said they are ready: a start never
    overlaps a measurement.  The second session is then served by the server already
    started; a third starts when its turn comes.  Each server ends after its session's
    last task."""
    monkeypatch.setattr(servers.sysinfo, "process_cpus", lambda: {0, 1})
    log = tmp_path / "log"
    tasks = [task(stamping(log, "a"), session="a", key="a1"),
             task(stamping(log, "b", ready_after=1.0), session="b", key="b1"),
             task(stamping(log, "c"), session="c", key="c1"),
             task(stamping(log, "a"), session="a", key="a2")]
    with servers.Servers() as live:
        live.expect(tasks)
        live.launch(tasks[0])
        assert len(live.pids()) == 2  # a's and b's
        a_pid, b_pid = live.live["a"].proc.pid, live.live["b"].proc.pid
        live.launch(tasks[1])  # b: served by the one started beside a, its only task
        assert live.pids() == [a_pid] and not alive(b_pid)
        live.launch(tasks[2])
        assert len(live.pids()) == 1 and a_pid in live.pids()  # c's only task ended it
        live.launch(tasks[3])
        assert live.pids() == [] and not alive(a_pid)
    events = [line.split() for line in log.read_text().splitlines()]
    assert [(n, w) for n, w, _ in events] == [
        ("a", "ready"), ("b", "ready"), ("a", "measured"), ("b", "measured"),
        ("c", "ready"), ("c", "measured"), ("a", "measured")]
    # measured once b was ready (the order above), not after a fixed polling delay: the
    # wait is a select on the servers' pipes that returns when one is ready (runner.POLL_S,
    # 0.25 s, at most), so 3 s leaves room for a loaded machine and catches a fixed delay of
    # 3 s or more
    assert float(events[2][2]) - float(events[1][2]) < 3


def test_a_next_sessions_server_that_fails_to_start_is_dropped_and_its_own_task_says_why(
        monkeypatch):
    monkeypatch.setattr(servers.sysinfo, "process_cpus", lambda: {0, 1})
    bad = (*TRIAD[:3], "--impl=fortran", *TRIAD[3:])
    tasks = [task(session="good", key="g"), task(bad, session="bad", key="b"),
             task(session="good", key="g2")]
    with servers.Servers() as live:
        live.expect(tasks)
        live.launch(tasks[0])
        assert len(live.pids()) == 1  # the bad one ended before it was ready: dropped
        with pytest.raises(runner.TaskFailed, match="invalid choice: 'fortran'"):
            live.launch(tasks[1])
        assert len(live.pids()) == 1


def test_a_server_started_beside_one_that_failed_answers_its_own_task(monkeypatch):
    """The first session's server fails before it is ready, so its task fails before the
    one started beside it was waited for: that one's ready line must not be taken for the
    answer to its own task later."""
    monkeypatch.setattr(servers.sysinfo, "process_cpus", lambda: {0, 1})
    dead = (sys.executable, "-c", "import sys; sys.exit('error: broken')")
    tasks = [task(dead, session="dead", key="d"), task(session="good", key="g")]
    with servers.Servers() as live:
        live.expect(tasks)
        with pytest.raises(runner.TaskFailed, match="broken"):
            live.launch(tasks[0])
        out, _ = live.launch(tasks[1])
    assert [json.loads(line)["function"] for line in out.splitlines()] == \
        ["Copy", "Scale", "Add", "Triad"]


def planned(sessions: str, reps: int, keeps: int = 10, priority: dict | None = None,
            ranked: bool = False) -> list[runner.Task]:
    """A plan's tasks as a sweep orders them: each round visits every session (one letter
    each); `priority` maps a session to its priority, `ranked` sorts by it (a budget's
    pass)."""
    tasks = [runner.Task(f"{s}{r}", {}, ("x",), session=s, keeps=keeps,
                         priority=(priority or {}).get(s, 1))
             for r in range(1, reps + 1) for s in sessions]
    return sorted(tasks, key=lambda t: t.priority) if ranked else tasks


def keys(tasks: list[runner.Task]) -> str:
    return " ".join(t.key for t in tasks)


def test_sessions_that_fit_side_by_side_keep_the_plans_order():
    tasks = planned("abc", 2)
    assert servers.in_blocks(tasks, room=30) == (tasks, 1)
    # a task without a session, or one that says nothing of its memory: the order stands
    for odd in (runner.Task("z", {}, ("x",)), runner.Task("z", {}, ("x",), session="z")):
        assert servers.in_blocks(tasks + [odd], room=1) == (tasks + [odd], 1)


def test_sessions_that_do_not_fit_are_measured_a_block_at_a_time_their_repetitions_alternating():
    order, blocks = servers.in_blocks(planned("abcde", 3), room=25)  # 2 of 10 bytes fit
    assert blocks == 3
    assert keys(order) == ("a1 b1 a2 b2 a3 b3 "  # each block alternates its sessions
                           "c1 d1 c2 d2 c3 d3 "
                           "e1 e2 e3")


def test_blocks_are_of_even_sizes():
    """13 sessions with room for 5: three blocks of 5, 4 and 4, not 5, 5 and 3."""
    order, blocks = servers.in_blocks(planned("abcdefghijklm", 1), room=50)
    assert blocks == 3
    firsts = [t.session for t in order]
    assert firsts == list("abcdefghijklm")  # one repetition: the order itself stands
    order, _ = servers.in_blocks(planned("abcdefghijklm", 2), room=50)
    assert keys(order) == ("a1 b1 c1 d1 e1 a2 b2 c2 d2 e2 "
                           "f1 g1 h1 i1 f2 g2 h2 i2 "
                           "j1 k1 l1 m1 j2 k2 l2 m2")


def test_a_budgets_ranked_pass_is_blocked_per_priority_so_what_is_needed_comes_first():
    ranked = planned("abc", 2, priority={"b": 0}, ranked=True)
    assert keys(ranked) == "b1 b2 a1 c1 a2 c2"
    order, blocks = servers.in_blocks(ranked, room=25)
    assert (keys(order), blocks) == ("b1 b2 a1 c1 a2 c2", 2)  # b alone, then a and c
    # the plan's own order (no budget) is one level: b alternates with the others
    order, blocks = servers.in_blocks(planned("abc", 2, priority={"b": 0}), room=25)
    assert (keys(order), blocks) == ("a1 b1 a2 b2 c1 c2", 2)


def test_a_session_larger_than_the_room_is_a_block_of_its_own():
    order, blocks = servers.in_blocks(planned("ab", 2, keeps=100), room=25)
    assert (keys(order), blocks) == ("a1 a2 b1 b2", 2)
