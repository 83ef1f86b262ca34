"""Every collective, dtype and reduce op through the package, with ranks as
threads for 1-4 ranks, with NumPy arrays and with PyTorch tensors (checks.py holds the checks; test_processes.py runs
them again in real processes)."""
import pytest

import checks
from conftest import run_threads


@pytest.fixture(params=["numpy", "torch"])
def mode(request):
    checks.MODE = request.param
    yield request.param
    checks.MODE = "numpy"


@pytest.mark.parametrize("size", [1, 2, 3, 4])
@pytest.mark.parametrize("check", checks.ALL, ids=lambda f: f.__name__[len("check_"):])
def test_collective(check, size, mode):
    run_threads(size, check)
