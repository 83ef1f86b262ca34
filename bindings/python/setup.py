"""The distc Python package, built by pip against an installed libdistc.

    cmake --install build --prefix /opt/distc
    DISTC_PREFIX=/opt/distc /usr/bin/python3 -m pip install --no-build-isolation bindings/python

libdistc is found through pkg-config: DISTC_PREFIX names the prefix (its
lib*/pkgconfig is searched), else PKG_CONFIG_PATH or the system's paths. The
module `distc._distc` is generated with SWIG (the flags CMake uses, in
swig.flags) from that prefix's headers and linked with a run path to its
library, so nothing needs LD_LIBRARY_PATH. The CMake build (bindings/python/
CMakeLists.txt) makes the same package without pip.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = ["pydistc_args.c", "pydistc_tensors.c", "pydistc_callbacks.c", "pydistc_options.c"]


def pkg_config(*args):
    env = dict(os.environ)
    prefix = os.environ.get("DISTC_PREFIX")
    if prefix:
        found = glob.glob(os.path.join(prefix, "lib*", "pkgconfig")) + glob.glob(
            os.path.join(prefix, "lib", "*", "pkgconfig"))
        env["PKG_CONFIG_PATH"] = os.pathsep.join(found + [env.get("PKG_CONFIG_PATH", "")])
    try:
        return subprocess.check_output(["pkg-config"] + list(args) + ["distc"], env=env,
                                       text=True, stderr=subprocess.PIPE).strip()
    except FileNotFoundError:
        sys.exit("distc: pkg-config is missing (Debian: apt-get install pkg-config)")
    except subprocess.CalledProcessError:
        where = "under DISTC_PREFIX=" + prefix if prefix else "on PKG_CONFIG_PATH or the system's paths"
        sys.exit("distc: no libdistc %s: install it (cmake --install build --prefix P) and set "
                 "DISTC_PREFIX=P" % where)


class BuildWithSwig(build_ext):
    """Generates the SWIG wrapper first, from the installed headers only."""

    def run(self):
        swig = shutil.which("swig") or sys.exit("distc: swig is missing (Debian: apt-get install swig)")
        includedir = pkg_config("--variable=includedir")
        # SWIG follows #includes (-includeall) and must see distc's headers
        # alone, not the rest of a system include directory.
        headers = os.path.join(self.build_temp, "distc-headers")
        os.makedirs(headers, exist_ok=True)
        for name in ("distc.h", "distc"):
            link = os.path.join(headers, name)
            if not os.path.lexists(link):
                os.symlink(os.path.join(includedir, name), link)
        with open(os.path.join(HERE, "swig.flags")) as f:
            flags = f.read().split()
        wrapper = os.path.join(self.build_temp, "distc_wrap.c")
        subprocess.check_call([swig, "-python"] + flags + ["-I" + headers, "-I" + HERE, "-outdir",
                               self.build_temp, "-o", wrapper, os.path.join(HERE, "distc.i")])
        for ext in self.extensions:
            ext.sources = [wrapper] + [os.path.join(HERE, s) for s in SOURCES]
        super().run()


libdir = pkg_config("--variable=libdir")
setup(
    name="distc",
    version=pkg_config("--modversion"),
    description="distc: distributed communication with a stable C ABI (rendezvous stores, "
                "process groups, a DDP reducer)",
    packages=["distc"],
    package_dir={"distc": os.path.join(HERE, "distc")},
    ext_modules=[Extension(
        "distc._distc",
        sources=[],  # set by BuildWithSwig
        include_dirs=[HERE, pkg_config("--variable=includedir")],
        libraries=["distc"],
        library_dirs=[libdir],
        runtime_library_dirs=[libdir],
    )],
    cmdclass={"build_ext": BuildWithSwig},
    python_requires=">=3.8",
    install_requires=[],
)
