"""Load preset TOML files (builtins, then user files overriding by name) into one checked catalog.

Every problem becomes a one-line PresetError naming the file and the dotted key, so a user who mistyped
``max_num_seqs`` as a preset key reads exactly where and why, not a pydantic traceback.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from presets.schema import Plan, PlanPhase, PresetError, Role, ServerPreset, TrafficPreset, lint

__all__ = ["BUILTIN_DIR", "Catalog", "PresetError", "default_user_dir", "lint", "load_catalog"]

BUILTIN_DIR = Path(__file__).parent / "builtin"
TINY_MODEL_ENV = "LLMOPT_TINY_MODEL"
SECTIONS: dict[str, type[BaseModel]] = {"servers": ServerPreset, "traffic": TrafficPreset, "plans": Plan}

M = TypeVar("M", bound=BaseModel)


def default_user_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "llmopt-tui" / "presets"


@dataclass
class Catalog:
    """All presets by name, and which file each came from."""

    servers: dict[str, ServerPreset] = field(default_factory=dict)
    traffic: dict[str, TrafficPreset] = field(default_factory=dict)
    plans: dict[str, Plan] = field(default_factory=dict)
    sources: dict[str, Path] = field(default_factory=dict)  # "servers.NAME" -> file
    errors: list[PresetError] = field(default_factory=list)  # only filled when loaded with strict=False

    def _get(self, kind: str, table: Mapping[str, M], name: str) -> M:
        try:
            return table[name]
        except KeyError:
            known = ", ".join(sorted(table)) or "none"
            raise PresetError(None, f"{kind}.{name}", f"no such preset (known: {known})") from None

    def get_server(self, name: str) -> ServerPreset:
        return self._get("servers", self.servers, name)

    def get_traffic(self, name: str) -> TrafficPreset:
        return self._get("traffic", self.traffic, name)

    def get_plan(self, name: str) -> Plan:
        return self._get("plans", self.plans, name)

    def by_role(self, role: Role, device: str | None = None) -> list[ServerPreset]:
        """Servers with a role (the TUI's b/a/t keys), optionally only for one device kind."""
        return [s for s in self.servers.values() if s.role == role and device in (None, s.device)]

    def plan_phases(self, plan: Plan | str) -> list[tuple[PlanPhase, ServerPreset, TrafficPreset]]:
        p = self.get_plan(plan) if isinstance(plan, str) else plan
        return [(ph, self.get_server(ph.server), self.get_traffic(ph.traffic)) for ph in p.phases]


def _dotted(prefix: str, loc: Sequence[int | str]) -> str:
    return ".".join([prefix, *(str(x) for x in loc)])


def _message(err: Mapping[str, Any]) -> str:
    kind = err.get("type")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing required key"
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if "input" in err and kind not in ("value_error",):
        shown = repr(err["input"])
        msg += f" (got {shown[:60]}{'...' if len(shown) > 60 else ''})"
    return msg


def _validate(model: type[M], data: Any, file: Path, prefix: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        key = _dotted(prefix, first["loc"])
        msg = _message(first)
        if first["type"] == "extra_forbidden":
            allowed = ", ".join(k for k in model.model_fields if k != "name")
            msg += f" (known: {allowed})" if len(first["loc"]) == 1 else ""
        raise PresetError(file, key, msg) from None


def read_file(path: Path) -> dict[str, dict[str, BaseModel]]:
    """Parse and validate one TOML file: {"servers": {name: preset}, ...}."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise PresetError(path, None, f"TOML syntax error: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PresetError(path, None, f"cannot read: {e}") from None
    out: dict[str, dict[str, BaseModel]] = {}
    for section, table in data.items():
        model = SECTIONS.get(section)
        if model is None:
            raise PresetError(path, section, f"unknown section (expected {', '.join(SECTIONS)})")
        if not isinstance(table, dict):
            raise PresetError(path, section, "must be a table of named presets, e.g. [servers.mine]")
        for name, body in table.items():
            if not isinstance(body, dict):
                raise PresetError(path, f"{section}.{name}", "must be a table")
            if "name" in body and body["name"] != name:
                raise PresetError(path, f"{section}.{name}.name", "differs from the table name")
            preset = _validate(model, {**body, "name": name}, path, f"{section}.{name}")
            out.setdefault(section, {})[name] = preset
    return out


def _files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        p = p.expanduser()
        if p.is_dir():
            files += sorted(p.glob("*.toml"))
        elif p.exists():
            files.append(p)
        else:
            raise PresetError(p, None, "no such file or folder")
    return files


def _reference_errors(cat: Catalog) -> list[tuple[str, PresetError]]:
    """Dangling names (a plan's server/traffic, a server's ``tunes``) as (catalog key, error)."""
    errs: list[tuple[str, PresetError]] = []
    for name, s in cat.servers.items():
        if s.tunes is not None and s.tunes not in cat.servers:
            src = cat.sources.get(f"servers.{name}")
            errs.append(
                (f"servers.{name}", PresetError(src, f"servers.{name}.tunes", f"unknown server {s.tunes!r}"))
            )
    for name, plan in cat.plans.items():
        for i, ph in enumerate(plan.phases):
            for kind, ref, table in (
                ("server", ph.server, cat.servers),
                ("traffic", ph.traffic, cat.traffic),
            ):
                if ref not in table:
                    known = ", ".join(sorted(table))
                    key = f"plans.{name}.phases.{i}.{kind}"
                    msg = f"unknown {kind} {ref!r} (known: {known})"
                    errs.append((f"plans.{name}", PresetError(cat.sources.get(f"plans.{name}"), key, msg)))
    return errs


def load_catalog(
    user_dirs: Sequence[Path] = (),
    *,
    tiny_model: str | Path | None = None,
    use_default_user_dir: bool = True,
    strict: bool = True,
) -> Catalog:
    """Builtins, then the default user folder (if it exists), then ``user_dirs`` (folders or files).

    ``{tiny_model}`` resolves from ``tiny_model`` or $LLMOPT_TINY_MODEL. With ``strict=False`` a bad
    user file is skipped and its error kept in ``Catalog.errors`` (builtin errors always raise).
    """
    cat = Catalog()
    dirs: list[Path] = []
    if use_default_user_dir and default_user_dir().is_dir():
        dirs.append(default_user_dir())
    dirs += [Path(d) for d in user_dirs]
    builtin = sorted(BUILTIN_DIR.glob("*.toml"))
    user_files = _files(dirs) if strict else []
    if not strict:
        for d in dirs:
            try:
                user_files += _files([d])
            except PresetError as e:
                cat.errors.append(e)
    for path in [*builtin, *user_files]:
        try:
            parsed = read_file(path)
        except PresetError as e:
            if strict or path in builtin:
                raise
            cat.errors.append(e)
            continue
        for section, presets in parsed.items():
            table: dict[str, Any] = getattr(cat, section)
            for name, preset in presets.items():
                table[name] = preset
                cat.sources[f"{section}.{name}"] = path
    tiny = str(tiny_model) if tiny_model is not None else os.environ.get(TINY_MODEL_ENV) or None
    cat.servers = {n: s.resolve(tiny) for n, s in cat.servers.items()}
    while errs := _reference_errors(cat):  # dropping one preset can leave another dangling
        for where, err in errs:
            if strict:
                raise err
            cat.errors.append(err)
            section, name = where.split(".", 1)
            getattr(cat, section).pop(name, None)
    return cat
