"""Message labels never resize the main window: long text wraps, the height is capped, the rest is in a tooltip.

A QLabel asks its layout for room for its whole text: without a cap, one long error or verdict (an
unbreakable token, a pasted log) widens the window past the screen and pushes its buttons out of sight.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QLabel, QToolTip

MAX_LINES = 6
SLACK_PX = 16  # style-sheet padding and borders that contentsMargins() does not report


class _FullTextTip(QObject):
    """Shows a label's whole text as its tooltip when the label had to cut it."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(watched, QLabel) and isinstance(event, QHelpEvent):
            if not watched.toolTip() and is_cut(watched):
                QToolTip.showText(event.globalPos(), watched.text(), watched)
                return True
        return False


def is_cut(label: QLabel) -> bool:
    """Whether ``label`` shows less than its whole text."""
    return label.heightForWidth(label.width()) > label.height() or (
        not label.wordWrap() and label.sizeHint().width() > label.width())


def never_widen(*labels: QLabel, max_lines: int = MAX_LINES) -> None:
    """Let ``labels`` take only the width the window gives them and at most ``max_lines`` lines."""
    for label in labels:
        label.setWordWrap(max_lines > 1)
        label.setMinimumWidth(1)  # overrides the text's minimum size hint: the layout may give it less
        margins = label.contentsMargins()
        label.setMaximumHeight(max_lines * label.fontMetrics().lineSpacing() + margins.top() + margins.bottom()
                               + SLACK_PX)
        label.installEventFilter(_FullTextTip(label))
