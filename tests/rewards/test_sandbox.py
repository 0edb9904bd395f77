"""The sandbox contains what a hostile or broken program does, and the host goes on (real namespaces)."""

import os
import time
import uuid

import pytest

from rlsim.rewards.sandbox import SandboxLimits, run_program

LIMITS = SandboxLimits(wall_s=3, cpu_s=2, memory_mb=512, max_processes=16)


def test_a_passing_and_a_failing_program():
    assert run_program("assert sum(range(4)) == 6", LIMITS).passed
    bad = run_program("assert 1 == 2", LIMITS)
    assert not bad.passed and bad.exit_code == 1 and "AssertionError" in bad.stderr_tail


def test_an_endless_loop_is_stopped_by_the_cpu_limit_or_the_wall_clock():
    t0 = time.monotonic()
    result = run_program("while True: pass", LIMITS)
    assert not result.passed and time.monotonic() - t0 < LIMITS.wall_s + 2


def test_a_sleeping_program_is_killed_at_the_wall_clock():
    result = run_program("import time; time.sleep(60)", LIMITS)
    assert result.timed_out and not result.passed and result.seconds < LIMITS.wall_s + 2


def test_a_fork_bomb_is_bounded_and_ended():
    probe = (
        "import os\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            import time; time.sleep(30)\n        n += 1\nexcept OSError:\n    print('stopped at', n)\n"
    )
    result = run_program(probe, LIMITS)
    assert "stopped at" in result.stdout_tail
    assert int(result.stdout_tail.split()[-1]) < LIMITS.max_processes
    bomb = run_program("import os\nwhile True:\n    try: os.fork()\n    except OSError: pass\n", LIMITS)
    assert bomb.timed_out and bomb.seconds < LIMITS.wall_s + 2


def test_a_memory_hog_gets_a_memory_error():
    result = run_program("x = bytearray(4 << 30)", LIMITS)
    assert not result.passed and "MemoryError" in result.stderr_tail


@pytest.mark.parametrize("folder", ["/tmp", os.getcwd()])
def test_writes_outside_its_folder_fail_and_inside_it_work(folder):
    target = os.path.join(folder, f"rlsim-escape-{uuid.uuid4().hex}")
    result = run_program(f"open({target!r}, 'w').write('x')", LIMITS)
    assert not result.passed and "Read-only file system" in result.stderr_tail
    assert not os.path.exists(target)
    assert run_program("open('mine.txt', 'w').write('x'); assert open('mine.txt').read() == 'x'", LIMITS).passed


def test_no_network_and_no_way_back_to_a_writable_root():
    sock = run_program("import socket; socket.create_connection(('127.0.0.1', 22), timeout=1)", LIMITS)
    assert not sock.passed and "Network is unreachable" in sock.stderr_tail
    remount = run_program("import ctypes; l = ctypes.CDLL(None, use_errno=True)\n"
                          "assert l.mount(None, b'/', None, 32 | 4096, None) != 0\n", LIMITS)  # fmt: skip
    assert remount.passed  # MS_REMOUNT|MS_BIND back to writable is refused: no capability is left


def test_the_folder_is_removed_and_unconfined_runs_work():
    import glob
    import tempfile

    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "rlsim-sandbox-*")))
    run_program("open('f', 'w').write('x' * 1000)", LIMITS)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "rlsim-sandbox-*"))) <= before
    assert run_program("import socket", SandboxLimits(isolate=False)).passed
