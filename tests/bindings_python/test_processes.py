"""The collective checks again with every rank a spawned process (2 and 4
ranks): the package as separate interpreters use it, through a TCP store."""
import pytest

import checks
from conftest import run_procs


def all_checks(pg):
    checks.MODE = "torch" if pg.size() == 4 else "numpy"  # one of each, to keep it short
    for check in checks.ALL:
        check(pg)
    return pg.rank()


@pytest.mark.parametrize("size", [2, 4])
def test_every_check_in_processes(size):
    assert run_procs(size, all_checks, join_s=240) == list(range(size))
