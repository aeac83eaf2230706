"""Kill anywhere: `mtkit train` killed at random moments (during updates, validation and
checkpoint writes) and resumed each time ends bitwise equal to an uninterrupted run, and every
checkpoint file on disk loads at every moment."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from subprocess_helpers import REPO, SLOW_MTKIT, assert_same_run
from training_helpers import train_args

from mtkit.checkpoint import load_checkpoint
from mtkit.errors import MtkitError
from mtkit.training.state import LAST, numbered_checkpoints

OPTIONS = [
    "--max-tokens",
    "256",
    "--max-updates",
    "40",
    "--save-every",
    "2",
    "--keep-last",
    "3",
    "--validate-every",
    "5",
    "--set",
    "validate_bleu=false",
    "--set",
    "log_every=1",
]
RUN_FILES = re.compile(  # everything a run directory holds, besides hidden temporaries
    r"^(checkpoint_(\d+|last|best)\.pt|config\.yaml|metrics\.jsonl|tensorboard)$"
)


def start(args: list[str], group: bool = False, **delays: float) -> subprocess.Popen:
    """`mtkit ARGS` in a subprocess: `python -m mtkit`, or slow_mtkit.py with test delays;
    ``group``: in a process group of its own (its pid the group's), as a job is."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.update({f"MTKIT_TEST_{k.upper()}": str(v) for k, v in delays.items()})
    launcher = [str(SLOW_MTKIT)] if delays else ["-m", "mtkit"]
    return subprocess.Popen(
        [sys.executable, *launcher, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        process_group=0 if group else None,
    )


def wait_for(condition, process: subprocess.Popen, timeout: float = 60.0) -> bool:
    """Poll ``condition`` until it holds (True) or the process has exited (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.005)
    raise AssertionError("timed out")


def log_inode(run_dir: Path) -> int:
    """metrics.jsonl's inode: a starting run replaces the file (dropping a killed run's records
    after its checkpoint), so a new inode means the records are the new process's."""
    try:
        return (run_dir / "metrics.jsonl").stat().st_ino
    except FileNotFoundError:
        return 0


def logged_update(run_dir: Path, stale_inode: int = -1) -> int:
    """The last update in metrics.jsonl (0 before any, or while it is ``stale_inode``)."""
    try:
        with open(run_dir / "metrics.jsonl") as log:
            if os.fstat(log.fileno()).st_ino == stale_inode:
                return 0
            found = re.findall(r'"update": (\d+)', log.read())
    except FileNotFoundError:
        return 0
    return int(found[-1]) if found else 0


def resume_point(run_dir: Path) -> int:
    path = run_dir / LAST
    return load_checkpoint(path)["update"] if path.exists() else 0


class Watcher(threading.Thread):
    """Loads every checkpoint_*.pt of a run directory, over and over, with mtkit's loader."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.stop = run_dir, threading.Event()
        self.loaded, self.failures, self.strays = 0, [], set()

    def run(self) -> None:
        while not self.stop.is_set():
            for path in sorted(self.run_dir.glob("*")) if self.run_dir.is_dir() else []:
                if not RUN_FILES.match(path.name) and not path.name.startswith("."):
                    self.strays.add(path.name)  # hidden temporaries are the only other files
                if path.name.startswith("checkpoint_"):
                    self.check(path)
            time.sleep(0.002)

    def check(self, path: Path) -> None:
        try:  # hold the file open: renames and pruning cannot change what we read
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return  # pruned since the listing
        try:
            ckpt = load_checkpoint(f"/proc/self/fd/{fd}")
            number = re.fullmatch(r"checkpoint_(\d+)\.pt", path.name)
            if number and ckpt["update"] != int(number.group(1)):
                self.failures.append(f"{path.name} holds update {ckpt['update']}")
            self.loaded += 1
        except MtkitError as err:
            self.failures.append(f"{path.name}: {err}")
        finally:
            os.close(fd)


def test_kill_anywhere_then_resume_is_bitwise_identical(tmp_path: Path, tiny_dataset: Path):
    straight_dir, run_dir = tmp_path / "straight", tmp_path / "killed"
    args = train_args(tiny_dataset, run_dir, *OPTIONS)
    straight = start(train_args(tiny_dataset, straight_dir, *OPTIONS))  # runs alongside
    rng = random.Random(6)
    watcher = Watcher(run_dir)
    watcher.start()
    kills = []
    try:
        # 1. during startup (imports, data, model), at a random moment
        process = start(args)
        time.sleep(rng.uniform(0.3, 1.5))
        process.kill()
        kills.append(("startup", process.wait(), resume_point(run_dir)))
        # 2. while the first checkpoint is being written, part of it on disk
        process = start(args, write_pause=60)

        def temporary() -> list[Path]:
            return [p for p in run_dir.glob(".checkpoint_*.tmp") if p.stat().st_size > 16384]

        assert wait_for(temporary, process), process.stderr.read().decode()
        process.kill()
        partial = temporary()
        kills.append(("mid-write", process.wait(), resume_point(run_dir)))
        assert partial and not set(partial) & set(numbered_checkpoints(run_dir))  # not taken
        # 3. at random moments of training: updates, validation, checkpoint writes
        for _ in range(5):
            before = resume_point(run_dir)
            target, stale = before + rng.randint(1, 6), log_inode(run_dir)
            process = start(args, update_delay=0.03)
            if wait_for(lambda t=target, i=stale: logged_update(run_dir, i) >= t, process):
                time.sleep(rng.uniform(0.0, 0.1))
                process.kill()
            kills.append(("random", process.wait(), resume_point(run_dir)))
        # 4. SIGTERM: a checkpoint of the update in progress, exit 128 + 15
        target, stale = resume_point(run_dir) + 2, log_inode(run_dir)
        process = start(args, update_delay=0.03)
        assert wait_for(lambda: logged_update(run_dir, stale) >= target, process)
        process.send_signal(signal.SIGTERM)
        assert process.wait() == 128 + signal.SIGTERM, process.stderr.read().decode()
        assert resume_point(run_dir) == logged_update(run_dir) >= target
        kills.append(("SIGTERM", 143, resume_point(run_dir)))
        # 5. to the end
        process = start(args)
        assert process.wait(timeout=120) == 0, process.stderr.read().decode()
    finally:
        watcher.stop.set()
        watcher.join()
        straight.wait(timeout=120)
    assert [code for _, code, _ in kills[:7]] == [-signal.SIGKILL] * 7, kills
    points = [point for _, _, point in kills]
    assert points == sorted(points) and points[-1] < 40, kills  # progress, never lost
    assert not watcher.failures, watcher.failures
    assert watcher.loaded > 20 and not watcher.strays, (watcher.loaded, watcher.strays)
    assert straight.returncode == 0, straight.stderr.read().decode()
    a, _ = assert_same_run(straight_dir, run_dir)
    assert a["update"] == 40
    assert not list(run_dir.glob(".*.tmp"))  # the killed writes' temporaries were removed


def test_a_sigterm_to_the_whole_job_stops_a_run_with_loader_workers(tmp_path, tiny_dataset):
    """Schedulers (Slurm, a shell's job control) signal a job's whole process group: the
    DataLoader workers (auto on CUDA) ignore it, and the training process checkpoints the
    update in progress and exits 128 + 15, as it does without workers."""
    run_dir = tmp_path / "run"
    args = train_args(tiny_dataset, run_dir, *OPTIONS, "--set", "num_workers=2")
    process = start(args, group=True, update_delay=0.03)
    assert wait_for(lambda: logged_update(run_dir) >= 3, process), process.stderr.read().decode()
    os.killpg(process.pid, signal.SIGTERM)
    assert process.wait(timeout=60) == 128 + signal.SIGTERM, process.stderr.read().decode()
    assert resume_point(run_dir) == logged_update(run_dir) >= 3
