"""ssd-chat's desktop app: PySide6 views plus one worker that adapts the engine to Qt signals."""
