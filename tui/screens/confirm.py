"""A yes/no question (e.g. "a phase is running: replace it?"); y / n / escape, no mouse needed."""

from __future__ import annotations

import textwrap
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen

from tui.widgets.lines import LinePanel, line


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n", "answer(False)", "No", id="confirm.no"),
        Binding("escape", "answer(False)", "Cancel", id="confirm.cancel"),
    ]

    def __init__(self, title: str, question: str) -> None:
        super().__init__()
        self._title = title
        self._question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box", classes="modal-box"):
            yield LinePanel(id="confirm-text")

    def on_mount(self) -> None:
        self.query_one("#confirm-box").border_title = self._title
        self.query_one("#confirm-text", LinePanel).set_lines(
            [
                *(line((text, "lp--value")) for text in textwrap.wrap(self._question, 56)),
                line(),
                line(
                    ("y", "lp--key"),
                    (" yes   ", "lp--dim"),
                    ("n", "lp--key"),
                    (" / ", "lp--dim"),
                    ("esc", "lp--key"),
                    (" no", "lp--dim"),
                ),
            ]
        )

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
