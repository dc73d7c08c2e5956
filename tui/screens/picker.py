"""Pick any server preset, traffic preset or plan from the catalog (key p): a keyboard list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from presets.catalog import Catalog

Kind = Literal["server", "traffic", "plan"]


@dataclass(frozen=True, slots=True)
class Pick:
    kind: Kind
    name: str


def options(catalog: Catalog, device: str | None) -> list[Option | None]:
    """Servers for this host's device first, then traffic, then plans; ids are "kind:name"."""
    out: list[Option | None] = []
    servers = [s for s in catalog.servers.values() if device is None or s.device == device]
    for s in sorted(servers, key=lambda s: (s.role, s.name)):
        out.append(Option(f"server   {s.name:<16} {s.role:<12} {s.description}", id=f"server:{s.name}"))
    if out:
        out.append(None)
    for t in sorted(catalog.traffic.values(), key=lambda t: t.name):
        out.append(Option(f"traffic  {t.name:<16} {t.dataset:<12} {t.description}", id=f"traffic:{t.name}"))
    if catalog.plans:
        out.append(None)
    for name, p in sorted(catalog.plans.items()):
        text = f"plan     {name:<16} {len(p.phases)} phases     {p.description}"
        out.append(Option(text, id=f"plan:{name}"))
    return out


class PickerScreen(ModalScreen[Pick | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="picker.cancel")]

    def __init__(self, catalog: Catalog, device: str | None) -> None:
        super().__init__()
        self._catalog = catalog
        self._device = device

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box", classes="modal-box"):
            yield OptionList(*options(self._catalog, self._device), id="picker-list")

    def on_mount(self) -> None:
        box = self.query_one("#picker-box")
        box.border_title = "Pick a preset"
        box.border_subtitle = "enter: server = serve it · traffic = run it · plan = run all · esc: cancel"
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        ident = event.option.id or ""
        kind, _, name = ident.partition(":")
        if kind in ("server", "traffic", "plan"):
            self.dismiss(Pick(kind, name))  # type: ignore[arg-type]

    def action_cancel(self) -> None:
        self.dismiss(None)
