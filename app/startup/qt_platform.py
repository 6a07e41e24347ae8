"""When Qt's platform plugin cannot load: name the missing system libraries and the command that installs them.

With no display at all (Linux, neither ``DISPLAY`` nor ``WAYLAND_DISPLAY`` set, and a window system platform)
the app says so first and exits before Qt tries, so Qt's guesses about libraries do not come first.
Otherwise Qt ends the process (``qFatal``) when no platform plugin loads. On Linux the usual cause is a
library that the xcb plugin needs and the system lacks; Qt's own message then names only
``xcb-cursor0``, often wrongly. So, until the application object exists, a message handler
watches for that fatal message, runs ``ldd`` on the plugin, and prints which libraries are
missing and the one command that installs them on this distribution, then exits with code 1.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from PySide6.QtCore import QLibraryInfo, QMessageLogContext, QtMsgType, qInstallMessageHandler

PLUGIN_FAILURE = re.compile(r"platform plugin", re.IGNORECASE)
NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)
QT_OWN = ("libQt6", "libpyside6", "libshiboken6")  # PySide6's own files: reinstalling it brings them back
EXIT_CODE = 1

# Package names where a soname does not follow the distribution's usual rule (Debian's rule is below).
FEDORA = {"libxcb-icccm": "xcb-util-wm", "libxcb-keysyms": "xcb-util-keysyms", "libxcb-cursor": "xcb-util-cursor",
          "libxcb-image": "xcb-util-image", "libxcb-render-util": "xcb-util-renderutil", "libxcb-util": "xcb-util",
          "libxkbcommon-x11": "libxkbcommon-x11", "libxkbcommon": "libxkbcommon", "libX11-xcb": "libX11-xcb",
          "libX11": "libX11", "libEGL": "libglvnd-egl", "libGL": "libglvnd-glx", "libGLX": "libglvnd-glx",
          "libfontconfig": "fontconfig", "libfreetype": "freetype", "libdbus-1": "dbus-libs"}
ARCH = {**{k: v for k, v in FEDORA.items() if v.startswith("xcb-util") or v.startswith("libxkbcommon")},
        "libX11-xcb": "libx11", "libX11": "libx11", "libEGL": "libglvnd", "libGL": "libglvnd", "libGLX": "libglvnd",
        "libfontconfig": "fontconfig", "libfreetype": "freetype2", "libdbus-1": "dbus"}
DEBIAN = {"libglib-2.0": "libglib2.0-0", "libGL": "libgl1", "libEGL": "libegl1"}
WINDOW_PLATFORMS = ("xcb", "wayland", "wayland-egl")  # Qt platforms that need a display server
DISPLAY_VARS = ("DISPLAY", "WAYLAND_DISPLAY")
INSTALLERS = {"debian": "sudo apt-get install -y", "fedora": "sudo dnf install -y", "arch": "sudo pacman -S --needed",
              "suse": "sudo zypper install -y"}


def plugin_file(platform: str = "xcb") -> Path | None:
    """The platform plugin Qt loads: from ``QT_QPA_PLATFORM_PLUGIN_PATH``, ``QT_PLUGIN_PATH`` or PySide6's own."""
    folders = [Path(os.environ["QT_QPA_PLATFORM_PLUGIN_PATH"])] if os.environ.get("QT_QPA_PLATFORM_PLUGIN_PATH") \
        else []
    folders += [Path(p) / "platforms" for p in os.environ.get("QT_PLUGIN_PATH", "").split(os.pathsep) if p]
    folders.append(Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms")
    return next((f / f"libq{platform}.so" for f in folders if (f / f"libq{platform}.so").is_file()), None)


def missing_libraries(ldd_output: str) -> list[str]:
    """The libraries ``ldd`` reports as "not found", each once, in its order."""
    return list(dict.fromkeys(NOT_FOUND.findall(ldd_output)))


def run_ldd(path: Path) -> str:
    """``ldd``'s report on ``path`` ("" when ldd is not there)."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return ""
    done = subprocess.run([ldd, str(path)], capture_output=True, text=True, timeout=30, check=False)
    return done.stdout + done.stderr


def distribution(os_release: str) -> str | None:
    """``debian``, ``fedora``, ``arch`` or ``suse`` from the text of /etc/os-release (ID and ID_LIKE)."""
    words = " ".join(m.group(1).strip("\"'") for m in re.finditer(r"^ID(?:_LIKE)?=(.*)$", os_release, re.M)).split()
    for family, names in (("debian", ("debian", "ubuntu")), ("fedora", ("fedora", "rhel", "centos")),
                          ("arch", ("arch",)), ("suse", ("suse", "opensuse"))):
        if any(w == n or w.startswith(f"{n}-") for w in words for n in names):
            return family
    return None


def package_for(soname: str, family: str) -> str:
    """The package that provides ``soname`` (``libxcb-icccm.so.4`` → ``libxcb-icccm4`` on Debian)."""
    stem, _, version = soname.partition(".so")
    version = version.lstrip(".").split(".")[0]
    if family in ("fedora", "arch"):
        table = FEDORA if family == "fedora" else ARCH
        return table.get(stem, "libxcb" if stem.startswith("libxcb") else stem)
    if stem in DEBIAN:
        return DEBIAN[stem]
    name = stem.lower()
    return f"{name}-{version}" if name[-1:].isdigit() else f"{name}{version}"


def install_command(libraries: Sequence[str], family: str | None) -> str | None:
    """The one command that installs the system packages for ``libraries`` (None on an unknown system)."""
    if family is None or not libraries:
        return None
    return f"{INSTALLERS[family]} " + " ".join(dict.fromkeys(package_for(lib, family) for lib in libraries))


def diagnosis(plugin: Path | None, ldd_output: str, os_release: str) -> str:
    """What to tell the user: the plugin, the libraries it lacks, and how to get them."""
    if plugin is None:
        return "ssd-chat: Qt's xcb platform plugin (libqxcb.so) was not found; reinstall PySide6."
    missing = missing_libraries(ldd_output)
    if not missing:
        return (f"ssd-chat: Qt could not start its platform plugin; ldd finds every library {plugin.name} needs, so "
                "check that a display is available (DISPLAY or WAYLAND_DISPLAY).")
    system = [lib for lib in missing if not lib.startswith(QT_OWN)]
    own = [lib for lib in missing if lib.startswith(QT_OWN)]
    lines = [f"ssd-chat: Qt's platform plugin cannot load: {plugin} needs these libraries, which are missing:"]
    lines += [f"    {lib}" for lib in missing]
    command = install_command(system, distribution(os_release))
    if command:
        lines.append(f"Install them with:\n    {command}")
    elif system:
        lines.append("Install the packages of your distribution that provide them (see README, 'System packages').")
    if own:
        lines.append("PySide6's own libraries are missing: pip install --force-reinstall PySide6-Essentials")
    return "\n".join(lines)


def no_display(env: Mapping[str, str], platform: str = sys.platform) -> str | None:
    """The line to print when Qt would need a display and none is set (None: there is one, or none is needed)."""
    if platform != "linux" or any(env.get(name) for name in DISPLAY_VARS):
        return None
    wanted = [p.split(":")[0] for p in env.get("QT_QPA_PLATFORM", "").split(";") if p.split(":")[0]]
    if any(p not in WINDOW_PLATFORMS for p in wanted):  # offscreen, vnc, eglfs...: no display server needed
        return None
    return ("ssd-chat: no display to open the window on: neither DISPLAY nor WAYLAND_DISPLAY is set. Start it from "
            "a desktop session (or over ssh -X); a machine without a screen can use QT_QPA_PLATFORM=offscreen "
            "or Xvfb.")


def _read_os_release() -> str:
    try:
        return Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        return ""


class PluginWatch:
    """The message handler in place while the application object is created (a context manager)."""

    def __init__(self, out: TextIO | None = None, exit_: Callable[[int], object] = os._exit) -> None:
        self.out = out or sys.stderr
        self.exit = exit_

    def __enter__(self) -> PluginWatch:
        problem = no_display(os.environ)
        if problem is not None:  # before Qt tries: its own first lines would blame libraries
            print(problem, file=self.out, flush=True)
            self.exit(EXIT_CODE)
        qInstallMessageHandler(self.handle)
        return self

    def __exit__(self, *exc: object) -> None:
        qInstallMessageHandler(None)

    def handle(self, kind: QtMsgType, _context: QMessageLogContext, message: str) -> None:
        """Print Qt's message; on the fatal "no platform plugin" one, add the diagnosis and exit."""
        print(message, file=self.out, flush=True)
        if kind == QtMsgType.QtFatalMsg and PLUGIN_FAILURE.search(message):
            if sys.platform == "linux":
                platform = os.environ.get("QT_QPA_PLATFORM", "xcb").split(";")[0].split(":")[0] or "xcb"
                plugin = plugin_file(platform)
                text = diagnosis(plugin, run_ldd(plugin) if plugin else "", _read_os_release())
            else:  # macOS and Windows: the PySide6 wheel carries what its plugins need
                text = "ssd-chat: Qt could not load its platform plugin; reinstall PySide6-Essentials."
            print(text, file=self.out, flush=True)
            self.exit(EXIT_CODE)  # before Qt aborts: no core dump, a plain exit code
