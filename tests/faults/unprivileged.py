"""Run the agent app as ``nobody`` from any checkout, world-readable or not.

::

    app = UnprivilegedApp.build(tmp_dir)          # once per session (as root)
    subprocess.run(app.command(root, "--runs", "2"), ...)

A checkout under a 0700 directory (a home directory, ``mktemp -d``) is unreadable to ``nobody``:
the app, this project's sources (an editable install points into the checkout) and the virtualenv's
packages alike. ``build`` runs the app once as root to learn what it imports, then copies that into
a world-readable directory beside a copy of the app: this project's packages whole (so a module
imported only on an error path is there too), each third-party top-level package imported (with
every ``*.dist-info``: entry points load the SDK's context), laid out by module name. ``nobody``
then runs the base interpreter on the copy; the system's standard library is readable anyway.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

AGENT_APP = Path(__file__).with_name("agent_app.py")
NOBODY = 65534
_OWN = "otel_session"
_RECORD_IMPORTS = """
import atexit, json, runpy, sys
out, app = sys.argv[1], sys.argv[2]
def record():
    with open(out, "w") as file:
        json.dump({name: m.__file__ for name, m in list(sys.modules.items()) if getattr(m, "__file__", None)}, file)
atexit.register(record)
sys.argv = sys.argv[2:]
runpy.run_path(app, run_name="__main__")
"""


def unprivileged(command: list[str]) -> list[str]:
    """``command`` as ``nobody`` (no groups)."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]


@dataclass
class UnprivilegedApp:
    directory: Path
    python: str

    def command(self, root: Path, *options: str) -> list[str]:
        """The agent app with ``options``, recording into ``root``, as ``nobody``."""
        return unprivileged([self.python, "-s", str(self.directory / AGENT_APP.name), "--dir", str(root), *options])

    @classmethod
    def build(cls, directory: Path, env: dict[str, str]) -> UnprivilegedApp:
        python = _reachable_python()
        scratch = directory / "discover"
        scratch.mkdir(parents=True)
        imports_file = scratch / "imports.json"
        subprocess.run(
            [sys.executable, "-c", _RECORD_IMPORTS, str(imports_file), str(AGENT_APP), "--dir", str(scratch / "b")],
            check=True, capture_output=True, timeout=120, env=env,
        )
        imported = json.loads(imports_file.read_text())
        shutil.rmtree(scratch)
        app_dir = directory / "app"
        app_dir.mkdir()
        shutil.copy2(AGENT_APP, app_dir)
        _copy_imports(imported, app_dir)
        for path in [directory, *directory.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return cls(app_dir, python)


def _reachable_python() -> str:
    """This interpreter's base (the venv's python is a link inside the checkout), or the system's
    of the same version (same ABI) when the base is not reachable either (pyenv under /root)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(sys._base_executable), f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    for candidate in candidates:
        if os.path.isfile(candidate) and _world_reachable(Path(candidate)):
            return candidate
    pytest.skip(f"no python{version} that nobody can run (tried {', '.join(candidates)})")


def _world_reachable(path: Path) -> bool:
    """Every directory on the way searchable by others, the file itself readable and executable."""
    if (path.stat().st_mode & 0o005) != 0o005:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in path.parents)


def _copy_imports(modules: dict[str, str], target: Path) -> None:
    """Each imported module's top-level package (or module) outside the standard library, with the
    ``*.dist-info`` beside it; this project's packages by module name (an editable install maps
    ``otel_session.collector`` to ``collector/``)."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix, "installed_base": sys.base_prefix}
    stdlib = tuple(os.path.realpath(sysconfig.get_path(key, vars=base)) + os.sep for key in ("stdlib", "platstdlib"))
    site_dirs: set[Path] = set()
    for name, file in sorted(modules.items()):
        real = Path(os.path.realpath(file))
        parts = name.split(".")
        if name == "__main__" or "__editable__" in name or str(real).startswith(stdlib):
            continue
        if parts[0] == _OWN:
            if real.stem == "__init__":
                _copy_files(real.parent, target.joinpath(*parts))
            continue
        site = real.parents[len(parts) if real.stem == "__init__" else len(parts) - 1]
        site_dirs.add(site)
        top = site / parts[0]
        if top.is_dir():
            shutil.copytree(top, target / parts[0], dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(real, target / real.name)
    for site in site_dirs:
        for info in site.glob("*.dist-info"):
            shutil.copytree(info, target / info.name, dirs_exist_ok=True)


def _copy_files(source: Path, destination: Path) -> None:
    """The files of one package directory (its subpackages are copied as packages of their own)."""
    destination.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.is_file() and path.suffix != ".pyc":
            shutil.copy2(path, destination / path.name)
