"""Worker pools that end with the command: :func:`mtkit.processes.stop_now`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# A worker writes the start of a 1 MB result and is then stopped, as a signal to the main process
# can stop a worker in the middle of a write; the main process must still exit at once.
HALF_A_RESULT = """
import multiprocessing, os, struct, sys, time
from concurrent.futures import ProcessPoolExecutor
from mtkit.processes import stop_now, stop_with_parent

def half_a_result(flag):
    results = sys._getframe(1).f_locals["result_queue"]  # concurrent.futures' _process_worker
    os.write(results._writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 1000)
    open(flag, "w").close()
    time.sleep(60)

if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    pool = ProcessPoolExecutor(1, mp_context=context, initializer=stop_with_parent)
    pool.submit(half_a_result, sys.argv[1])
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    time.sleep(0.1)  # the pool's manager thread reads the half message, and waits for the rest
    stop_now(pool)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks a pool")
def test_stop_now_with_half_a_result_in_the_pipe(tmp_path: Path) -> None:
    script = tmp_path / "half.py"
    script.write_text(HALF_A_RESULT)
    try:
        done = subprocess.run(
            [sys.executable, str(script), str(tmp_path / "written")],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit after stop_now (its pool waits for a whole result)")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
