"""Build ssd-chat's frozen app and installer: PyInstaller, then the frozen ``--self-test``, then NSIS.

Usage (from anywhere, with the project's virtual environment active)::

    python installer/build.py                  # freeze, self-test, makensis if it is installed
    python installer/build.py --skip-nsis      # freeze and self-test only
    python installer/build.py --nsis-only      # package an existing dist/ssd-chat with makensis
    python installer/build.py --nsis-only path/to/onedir --require-nsis

Outputs, under ``dist/`` (or ``--dist``): the onedir folder ``ssd-chat/``, the installer
``ssd-chat-<version>-setup.exe`` and, on macOS, ``ssd-chat.app`` zipped as
``ssd-chat-<version>-macos.zip``. Exits non-zero, with a one-line reason, on any failure.
Like qutebrowser's ``build_release.py``, nothing is packaged until the frozen binary has passed
its smoke test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "installer" / "ssd-chat.spec"
NSI = ROOT / "installer" / "ssd-chat.nsi"
APP_NAME = "ssd-chat"
SELF_TEST_TIMEOUT_S = 600
NSIS_HINT = "Debian/Ubuntu: apt-get install nsis; Windows: choco install nsis"


class BuildError(Exception):
    """A build step failed; the message says which and why."""


def project_version(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The ``[project] version`` from pyproject.toml."""
    try:
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(f"cannot read the version from {pyproject}: {exc}") from exc


def unmet_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The ``[project] dependencies`` that this environment does not satisfy (what would be frozen).

    PyInstaller bundles whatever is installed, so a stale environment (say, a PySide6 that
    pyproject.toml has since excluded) would ship silently; this turns that into an error.
    """
    from importlib import metadata

    from packaging.requirements import Requirement  # a dependency of PyInstaller

    problems = []
    for spec in tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{req.name} is not installed (pyproject.toml wants {spec!r})")
            continue
        if not req.specifier.contains(installed, prereleases=True):
            problems.append(f"{req.name} {installed} is installed but pyproject.toml wants {spec!r}")
    return problems


def windows_version(version: str) -> str:
    """Four dot-separated numbers for Windows version info: ``1.2.3rc1`` -> ``1.2.3.0``."""
    nums = [int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3]]
    return ".".join(str(n) for n in [*nums, 0, 0, 0, 0][:4])


def installer_name(version: str) -> str:
    return f"{APP_NAME}-{version}-setup.exe"


def exe_path(onedir: Path, name: str) -> Path:
    return onedir / (f"{name}.exe" if sys.platform == "win32" else name)


def _run(cmd: Sequence[str], step: str, cwd: Path | None = None) -> None:
    print(f"==> {step}: {' '.join(cmd)}", flush=True)
    try:
        subprocess.run(list(cmd), check=True, cwd=cwd)
    except FileNotFoundError as exc:
        raise BuildError(f"{step}: {cmd[0]} not found") from exc
    except subprocess.CalledProcessError as exc:
        raise BuildError(f"{step} failed with exit code {exc.returncode}") from exc


def freeze(dist: Path, work: Path, *, clean: bool) -> Path:
    """Run PyInstaller with the spec; return the onedir folder."""
    cmd = [sys.executable, "-m", "PyInstaller", "--noconfirm"]
    cmd += ["--distpath", str(dist), "--workpath", str(work)]
    if clean:
        cmd.append("--clean")
    start = time.monotonic()
    _run([*cmd, str(SPEC)], "PyInstaller", cwd=ROOT)
    onedir = dist / APP_NAME
    if not exe_path(onedir, f"{APP_NAME}-cli").is_file():
        raise BuildError(f"PyInstaller finished but {exe_path(onedir, APP_NAME + '-cli')} is missing")
    print(f"    frozen in {time.monotonic() - start:.0f} s: {onedir}", flush=True)
    return onedir


def self_test(onedir: Path, timeout_s: float = SELF_TEST_TIMEOUT_S) -> str:
    """Run the frozen ``ssd-chat-cli --self-test`` with a throwaway data folder; return its output."""
    cli = exe_path(onedir, f"{APP_NAME}-cli")
    if not cli.is_file():
        raise BuildError(f"no frozen executable at {cli}: freeze first")
    with tempfile.TemporaryDirectory(prefix="ssd-chat-build-") as profile:
        # A temporary profile: the smoke test must not read or write the builder's own data.
        env = {**os.environ, "SSD_CHAT_DATA_DIR": profile}
        for var in ("PYTHONPATH", "PYTHONHOME", "LLAMA_CPP_LIB_PATH"):  # use only what is bundled
            env.pop(var, None)
        print(f"==> frozen self-test: {cli} --self-test", flush=True)
        try:
            proc = subprocess.run([str(cli), "--self-test"], env=env, cwd=profile, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"frozen self-test did not finish within {timeout_s:.0f} s") from exc
    print(proc.stdout, end="" if proc.stdout.endswith("\n") else "\n", flush=True)
    if proc.returncode != 0:
        raise BuildError(f"frozen self-test failed with exit code {proc.returncode} (output above)")
    return proc.stdout


def find_makensis() -> str | None:
    found = shutil.which("makensis")
    if found:
        return found
    if sys.platform == "win32":  # the NSIS installer does not put itself on PATH
        for base in (os.environ.get("ProgramFiles(x86)"), os.environ.get("ProgramFiles")):
            if base and (Path(base) / "NSIS" / "makensis.exe").is_file():
                return str(Path(base) / "NSIS" / "makensis.exe")
    return None


def build_installer(onedir: Path, dist: Path, version: str, makensis: str) -> Path:
    """Compile ``installer/ssd-chat.nsi`` around ``onedir``; return the setup exe."""
    if not onedir.is_dir() or not any(onedir.iterdir()):
        raise BuildError(f"nothing to package: {onedir} is missing or empty")
    dist.mkdir(parents=True, exist_ok=True)
    out = dist / installer_name(version)
    out.unlink(missing_ok=True)
    # "-" options work with makensis on every platform ("/" only on Windows); -WX: warnings fail.
    _run([makensis, "-V2", "-WX", f"-DVERSION={version}", f"-DVIVERSION={windows_version(version)}",
          f"-DSRCDIR={onedir.resolve().as_posix()}", f"-DOUTFILE={out.resolve()}", str(NSI)], "makensis")
    if not out.is_file():
        raise BuildError(f"makensis finished but {out} is missing")
    return out


def zip_app(dist: Path, version: str) -> Path:
    """Zip ``ssd-chat.app`` with ditto, which keeps the symlinks and permissions a .app needs."""
    app = dist / f"{APP_NAME}.app"
    if not app.is_dir():
        raise BuildError(f"PyInstaller did not produce {app}")
    out = dist / f"{APP_NAME}-{version}-macos.zip"
    out.unlink(missing_ok=True)
    _run(["ditto", "-c", "-k", "--sequesterRsrc", "--keepParent", str(app), str(out)], "zip .app")
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder (default: dist/)")
    p.add_argument("--work", type=Path, default=ROOT / "build" / "pyinstaller",
                   help="PyInstaller's work folder (default: build/pyinstaller)")
    p.add_argument("--clean", action="store_true", help="empty PyInstaller's cache first")
    p.add_argument("--skip-nsis", action="store_true", help="do not build the installer")
    p.add_argument("--require-nsis", action="store_true",
                   help="fail (rather than skip) when makensis is missing")
    p.add_argument("--skip-self-test", action="store_true",
                   help="package without running the frozen self-test")
    p.add_argument("--nsis-only", nargs="?", type=Path, const=Path(), default=None, metavar="ONEDIR",
                   help="only run makensis on an existing onedir folder (default: <dist>/ssd-chat)")
    args = p.parse_args(argv)
    if args.nsis_only is not None and args.skip_nsis:
        p.error("--nsis-only and --skip-nsis contradict each other")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    dist: Path = args.dist.resolve()
    outputs: list[str] = []
    try:
        version = project_version()
        print(f"ssd-chat {version} on {sys.platform}", flush=True)
        if args.nsis_only is not None:
            onedir = (args.nsis_only if args.nsis_only != Path() else dist / APP_NAME).resolve()
        else:
            unmet = unmet_requirements()
            if unmet:
                raise BuildError("this environment does not match pyproject.toml (pip install -e .[dev]): "
                                 + "; ".join(unmet))
            onedir = freeze(dist, args.work.resolve(), clean=args.clean)
            outputs.append(f"onedir:    {onedir}")
            if not args.skip_self_test:
                self_test(onedir)
            if sys.platform == "darwin":
                outputs.append(f"macOS app: {zip_app(dist, version)}")
        if not args.skip_nsis:
            makensis = find_makensis()
            if makensis:
                setup = build_installer(onedir, dist, version, makensis)
                outputs.append(f"installer: {setup} ({setup.stat().st_size / 2**20:.1f} MiB)")
            elif args.require_nsis or args.nsis_only is not None:
                raise BuildError(f"makensis not found ({NSIS_HINT})")
            else:
                print(f"==> makensis not found: installer skipped ({NSIS_HINT})")
    except BuildError as exc:
        print(f"build.py: error: {exc}", file=sys.stderr, flush=True)
        return 1
    print("==> done")
    for line in outputs:
        print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
