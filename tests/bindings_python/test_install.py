"""`cmake --install` puts the package under <prefix>/<DISTC_PYTHON_INSTALL_DIR>;
it imports from there (finding libdistc through its RPATH, even after the
prefix moves) and works."""
import glob
import os
import shutil
import subprocess
import sys

from conftest import BUILD

CODE = ("import distc, numpy as np\n"
        "pg = distc.ProcessGroup(distc.HashStore(), 0, 1)\n"
        "a = np.arange(3.0); pg.all_reduce(a); pg.close()\n"
        "print(distc.__version__, distc.__file__)\n")


def test_installed_package_imports_and_runs(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], check=True, capture_output=True)
    pkgs = glob.glob(str(prefix / "lib" / "python3*" / "*-packages" / "distc" / "_distc*.so"))
    assert pkgs, "no _distc module under the prefix"
    moved = tmp_path / "moved"
    shutil.move(str(prefix), str(moved))
    site = os.path.dirname(os.path.dirname(pkgs[0].replace(str(prefix), str(moved))))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = site
    p = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert str(moved) in p.stdout
