"""Builds tessera._tessera against an installed libtessera (docs/python.md).

The header and library are found with pkg-config (`cmake --install BUILD
--prefix DIR` writes DIR/lib/pkgconfig/tessera.pc; put that directory on
PKG_CONFIG_PATH when DIR is not a system prefix). The extension records the
library's directory as its run path, so `import tessera` needs no
LD_LIBRARY_PATH.
"""
import shlex
import subprocess

from setuptools import Extension, setup


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "tessera"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("tessera: pkg-config cannot find libtessera (install it with `cmake --install build "
                         "--prefix DIR` and put DIR/lib/pkgconfig on PKG_CONFIG_PATH): %s" % e)
    return shlex.split(out)


cflags = pkg_config("--cflags")
libs = pkg_config("--libs")
libdir = pkg_config("--variable=libdir")[0]

setup(ext_modules=[Extension(
    "tessera._tessera",
    sources=["src/_tessera.c"],
    include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
    library_dirs=[f[2:] for f in libs if f.startswith("-L")],
    libraries=[f[2:] for f in libs if f.startswith("-l")],
    runtime_library_dirs=[libdir],
    extra_compile_args=["-std=c17", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
)])
