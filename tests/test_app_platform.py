"""A Qt platform plugin that cannot load: the app names the missing libraries and the command that installs them."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QMessageLogContext, QtMsgType

from app.startup import qt_platform
from app.startup.qt_platform import (
    PluginWatch,
    diagnosis,
    distribution,
    install_command,
    missing_libraries,
    no_display,
)

linux_only = pytest.mark.skipif(sys.platform != "linux" or shutil.which("ldd") is None, reason="ldd: Linux only")

# What `ldd libqxcb.so` printed on a stock Debian 12 desktop (issue 16), shortened.
DEBIAN_LDD = """\
\tlinux-vdso.so.1 (0x00007ffd5d1f5000)
\tlibQt6XcbQpa.so.6 => /opt/venv/PySide6/Qt/plugins/platforms/../../lib/libQt6XcbQpa.so.6 (0x00007f3a)
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f3b)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxkbcommon-x11.so.0 => /lib/x86_64-linux-gnu/libxkbcommon-x11.so.0 (0x00007f3c)
\tlibxcb-icccm.so.4 => not found
"""
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'


def test_the_message_names_the_missing_libraries_and_one_install_command() -> None:
    assert missing_libraries(DEBIAN_LDD) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    text = diagnosis(Path("/opt/libqxcb.so"), DEBIAN_LDD, DEBIAN)
    assert "libxcb-icccm.so.4" in text and "libxcb-keysyms.so.1" in text and "libxcb-cursor" not in text
    assert text.splitlines()[-1].strip() == "sudo apt-get install -y libxcb-icccm4 libxcb-keysyms1"
    ubuntu = 'ID=ubuntu\nID_LIKE=debian\n'
    assert distribution(ubuntu) == "debian" and distribution('ID="rocky"\nID_LIKE="rhel centos fedora"') == "fedora"
    assert distribution("ID=manjaro\nID_LIKE=arch\n") == "arch" and distribution('ID="opensuse-leap"') == "suse"
    libs = ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxkbcommon-x11.so.0", "libxcb-shape.so.0"]
    assert install_command(libs, "fedora") == "sudo dnf install -y xcb-util-wm xcb-util-keysyms libxkbcommon-x11 libxcb"
    assert install_command(libs, "arch") == \
        "sudo pacman -S --needed xcb-util-wm xcb-util-keysyms libxkbcommon-x11 libxcb"
    assert install_command(libs, "debian") == \
        "sudo apt-get install -y libxcb-icccm4 libxcb-keysyms1 libxkbcommon-x11-0 libxcb-shape0"
    unknown = diagnosis(Path("/opt/libqxcb.so"), DEBIAN_LDD, "ID=nixos\n")
    assert "libxcb-icccm.so.4" in unknown and "README" in unknown and "sudo" not in unknown


def _lonely_plugin(tmp_path: Path) -> Path:
    """PySide6's xcb plugin copied alone: its RUNPATH no longer reaches Qt's libraries, so it cannot load."""
    plugin = qt_platform.plugin_file("xcb")
    assert plugin is not None, "PySide6 ships libqxcb.so on Linux"
    folder = tmp_path / "platforms"
    folder.mkdir()
    shutil.copy(plugin, folder / plugin.name)
    return folder


@linux_only
def test_the_watch_explains_qts_fatal_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QT_QPA_PLATFORM_PLUGIN_PATH", str(_lonely_plugin(tmp_path)))
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    out, codes = io.StringIO(), list[int]()
    watch = PluginWatch(out, codes.append)
    watch.handle(QtMsgType.QtWarningMsg, QMessageLogContext(), "Could not load the Qt platform plugin \"xcb\"")
    assert codes == [], "only the fatal message ends the app"
    watch.handle(QtMsgType.QtFatalMsg, QMessageLogContext(),
                 "This application failed to start because no Qt platform plugin could be initialized.")
    assert codes == [1]
    text = out.getvalue()
    assert f"{tmp_path / 'platforms' / 'libqxcb.so'} needs these libraries, which are missing:" in text
    assert "    libQt6XcbQpa.so.6\n" in text and "pip install --force-reinstall PySide6-Essentials" in text


@linux_only
def test_the_app_started_with_a_plugin_that_cannot_load_says_why(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "xcb", "QT_QPA_PLATFORM_PLUGIN_PATH": str(_lonely_plugin(tmp_path)),
           "SSD_CHAT_DATA_DIR": str(tmp_path / "data"), "DISPLAY": os.environ.get("DISPLAY") or ":0"}
    done = subprocess.run([sys.executable, "-m", "app"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1, (done.returncode, done.stderr)  # not 134: no abort, no core dump
    assert "no Qt platform plugin could be initialized" in done.stderr  # Qt's own message stays
    assert "needs these libraries, which are missing:" in done.stderr and "libQt6XcbQpa.so.6" in done.stderr
    assert "Traceback" not in done.stderr


def test_no_display_is_named_where_a_window_system_would_need_one() -> None:
    assert no_display({}, "linux") is not None and "DISPLAY" in (no_display({}, "linux") or "")
    assert no_display({"QT_QPA_PLATFORM": "wayland;xcb"}, "linux") is not None
    assert no_display({"QT_QPA_PLATFORM": "xcb:nograb"}, "linux") is not None
    assert no_display({"DISPLAY": ":0"}, "linux") is None
    assert no_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert no_display({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None  # the tests, a headless run
    assert no_display({}, "darwin") is None and no_display({}, "win32") is None


@pytest.mark.skipif(sys.platform != "linux", reason="DISPLAY: Linux only")
def test_without_a_display_the_app_says_so_first_and_qts_noise_stays_out(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["SSD_CHAT_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run([sys.executable, "-m", "app"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert done.stderr.startswith("ssd-chat: no display to open the window on"), done.stderr
    assert "xcb-cursor0" not in done.stderr and "Reinstalling" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()  # it stopped before anything was written
