"""What to run, as validated data: a server preset, a traffic preset and a plan of phases.

Presets are strict (unknown keys and wrong types are errors, not silently ignored) because a typo in a
knob name would otherwise run a different experiment than the user meant. Each preset builds its own
argv list; nothing here starts a process.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
TINY_MODEL_PLACEHOLDER = "{tiny_model}"
LOOPBACK_HOSTS = frozenset({"localhost", "::1"})

# vLLM's sharegpt loader skips pairs whose prompt is over 1024 tokens or whose prompt+output is over 2048.
SHAREGPT_MAX_PROMPT = 1024
SHAREGPT_MAX_TOTAL = 2048

Role = Literal["baseline", "freed-memory", "tuned", "tp", "other"]
Device = Literal["gpu", "cpu"]
Dataset = Literal["random", "sharegpt", "prefix_repetition"]


class PresetError(Exception):
    """A preset problem, located by file and dotted key; ``str()`` is always one line."""

    def __init__(self, file: str | Path | None, key: str | None, message: str) -> None:
        self.file = str(file) if file is not None else None
        self.key = key
        self.message = " ".join(message.split())
        super().__init__(str(self))

    def __str__(self) -> str:
        return ": ".join(p for p in (self.file, self.key, self.message) if p)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("names use letters, digits, '.', '_' and '-' (they become file names)")
        return v


def fmt_number(x: float) -> str:
    """Format a number for a command line: 10.0 -> "10", 0.5 -> "0.5", inf -> "inf"."""
    if math.isinf(x):
        return "inf"
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value of ``--flag V`` or ``--flag=V`` in an argv list (the last one wins, as argparse does)."""
    found: str | None = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith(flag + "="):
            found = a[len(flag) + 1 :]
    return found


def _int_flag(args: Sequence[str], flag: str) -> int | None:
    v = flag_value(args, flag)
    if v is None:
        return None
    try:
        return int(v.replace("_", ""))
    except ValueError:
        return None


class ServerPreset(_Strict):
    """One ``vllm serve`` configuration. vLLM flags live in ``args`` so any flag of any version works."""

    role: Role = "other"
    model: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_unset: list[str] = Field(default_factory=list)  # variables removed from the inherited environment
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    device: Device = "gpu"
    startup_timeout_s: float = Field(default=900.0, gt=0)
    tunes: str | None = None  # the preset this one tunes: the comparison "tuned vs what it tunes"

    @field_validator("args")
    @classmethod
    def _no_owned_flags(cls, v: list[str]) -> list[str]:
        for a in v:
            for owned in ("--host", "--port"):
                if a == owned or a.startswith(owned + "="):
                    raise ValueError(f"{owned} is a preset key ({owned[2:]} = ...), not an arg")
        return v

    @property
    def placeholder_unresolved(self) -> bool:
        return TINY_MODEL_PLACEHOLDER in self.model

    def resolve(self, tiny_model: str | None) -> ServerPreset:
        """Substitute ``{tiny_model}`` in model, args and env; unchanged when no value is known."""
        if tiny_model is None:
            return self

        def sub(s: str) -> str:
            return s.replace(TINY_MODEL_PLACEHOLDER, tiny_model)

        return self.model_copy(
            update={
                "model": sub(self.model),
                "args": [sub(a) for a in self.args],
                "env": {k: sub(v) for k, v in self.env.items()},
            }
        )

    def argv(self, vllm_exe: str | Path) -> list[str]:
        if self.placeholder_unresolved:
            raise PresetError(
                None,
                f"servers.{self.name}.model",
                f"{TINY_MODEL_PLACEHOLDER} is not set: pass the tiny model path or set LLMOPT_TINY_MODEL",
            )
        return [str(vllm_exe), "serve", self.model, "--host", self.host, "--port", str(self.port), *self.args]

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def max_model_len(self) -> int | None:
        return _int_flag(self.args, "--max-model-len")

    @property
    def max_num_seqs(self) -> int | None:
        return _int_flag(self.args, "--max-num-seqs")

    @property
    def tensor_parallel_size(self) -> int | None:
        return _int_flag(self.args, "--tensor-parallel-size") or _int_flag(self.args, "-tp")


class TrafficPreset(_Strict):
    """One ``vllm bench serve`` load: dataset shape, arrival process and client concurrency."""

    dataset: Dataset = "random"
    num_prompts: int = Field(default=1000, gt=0)
    request_rate: float | Literal["inf"] = "inf"
    burstiness: float = Field(default=1.0, gt=0)
    max_concurrency: int | None = Field(default=None, gt=0)
    random_input_len: int = Field(default=1024, gt=0)
    random_output_len: int = Field(default=128, gt=0)
    prefix_repetition_prefix_len: int = Field(default=256, ge=0)
    prefix_repetition_suffix_len: int = Field(default=256, ge=0)
    prefix_repetition_num_prefixes: int = Field(default=10, gt=0)
    prefix_repetition_output_len: int = Field(default=128, gt=0)
    dataset_path: str | None = None
    ignore_eos: bool = False
    seed: int | None = None
    extra_args: list[str] = Field(default_factory=list)

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rate(cls, v: Any) -> float | str:
        if isinstance(v, str) and v.strip().lower() in ("inf", "infinity"):
            return "inf"
        if isinstance(v, int | float) and not isinstance(v, bool):
            if math.isinf(v) and v > 0:
                return "inf"
            if math.isnan(v) or v <= 0:
                raise ValueError('must be a positive number of requests per second or "inf"')
            return float(v)
        raise ValueError(f'must be a number or "inf" (got {v!r})')

    def replace(self, **changes: Any) -> TrafficPreset:
        """A validated copy with some fields changed (e.g. the CLI's --dataset-path)."""
        return TrafficPreset.model_validate({**self.model_dump(), **changes})

    @property
    def rate(self) -> float:
        return math.inf if self.request_rate == "inf" else float(self.request_rate)

    @property
    def prompt_tokens_max(self) -> int:
        """The longest prompt this traffic sends (sharegpt: vLLM's loader bound)."""
        if self.dataset == "random":
            return self.random_input_len
        if self.dataset == "prefix_repetition":
            return self.prefix_repetition_prefix_len + self.prefix_repetition_suffix_len
        return SHAREGPT_MAX_PROMPT

    @property
    def output_tokens(self) -> int | None:
        """Output tokens per request when the traffic fixes it; None when the dataset decides (sharegpt)."""
        if self.dataset == "random":
            return self.random_output_len
        if self.dataset == "prefix_repetition":
            return self.prefix_repetition_output_len
        return None

    @property
    def max_total_tokens(self) -> int:
        """Prompt + output of the longest request: what --max-model-len must hold."""
        out = self.output_tokens
        return SHAREGPT_MAX_TOTAL if out is None else self.prompt_tokens_max + out

    def argv(
        self,
        vllm_exe: str | Path,
        base_url: str,
        model: str,
        tokenizer: str | None,
        result_dir: str | Path,
        result_filename: str,
    ) -> list[str]:
        if self.dataset == "sharegpt" and not self.dataset_path:
            raise PresetError(
                None, f"traffic.{self.name}.dataset_path", "required for dataset sharegpt (the JSON file)"
            )
        argv = [str(vllm_exe), "bench", "serve", "--backend", "openai", "--base-url", base_url]
        argv += ["--endpoint", "/v1/completions", "--model", model]
        if tokenizer:
            argv += ["--tokenizer", tokenizer]
        argv += ["--dataset-name", self.dataset]
        if self.dataset_path:
            argv += ["--dataset-path", str(Path(self.dataset_path).expanduser())]
        if self.dataset == "random":
            argv += ["--random-input-len", str(self.random_input_len)]
            argv += ["--random-output-len", str(self.random_output_len)]
        elif self.dataset == "prefix_repetition":
            argv += ["--prefix-repetition-prefix-len", str(self.prefix_repetition_prefix_len)]
            argv += ["--prefix-repetition-suffix-len", str(self.prefix_repetition_suffix_len)]
            argv += ["--prefix-repetition-num-prefixes", str(self.prefix_repetition_num_prefixes)]
            argv += ["--prefix-repetition-output-len", str(self.prefix_repetition_output_len)]
        argv += ["--num-prompts", str(self.num_prompts)]
        argv += ["--request-rate", fmt_number(self.rate), "--burstiness", fmt_number(self.burstiness)]
        if self.max_concurrency is not None:
            argv += ["--max-concurrency", str(self.max_concurrency)]
        if self.ignore_eos:
            argv.append("--ignore-eos")
        if self.seed is not None:
            argv += ["--seed", str(self.seed)]
        argv += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
        argv += ["--save-result", "--result-dir", str(result_dir), "--result-filename", result_filename]
        return argv + list(self.extra_args)


class PlanPhase(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    server: str
    traffic: str
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or f"{self.server}-{self.traffic}"

    @field_validator("label")
    @classmethod
    def _label_ok(cls, v: str | None) -> str | None:
        if v is not None and not NAME_RE.match(v):
            raise ValueError("labels use letters, digits, '.', '_' and '-' (they become file names)")
        return v


class Plan(_Strict):
    """An ordered list of (server, traffic) phases; ratios are taken against the baseline phase."""

    phases: list[PlanPhase] = Field(min_length=1)
    baseline: int | str | None = None  # a phase index or a phase name; None = the first phase

    @field_validator("baseline", mode="before")
    @classmethod
    def _baseline_type(cls, v: Any) -> Any:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | str)):
            raise ValueError(f"must be a phase index or a phase name (got {v!r})")
        return v

    @model_validator(mode="after")
    def _baseline_exists(self) -> Plan:
        self.baseline_index  # noqa: B018 - raises ValueError when it does not resolve
        names = [p.name for p in self.phases]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"phase names repeat ({', '.join(sorted(dup))}): give those phases a label")
        return self

    @property
    def baseline_index(self) -> int:
        b = self.baseline
        if b is None:
            return 0
        if isinstance(b, int):
            if not 0 <= b < len(self.phases):
                raise ValueError(f"baseline index {b} is out of range (0..{len(self.phases) - 1})")
            return b
        for i, p in enumerate(self.phases):
            if p.name == b:
                return i
        raise ValueError(f"baseline {b!r} is not a phase name ({', '.join(p.name for p in self.phases)})")


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def lint(server: ServerPreset, traffic: TrafficPreset) -> list[str]:
    """One-line warnings about a (server, traffic) pair that would run, but not as the user expects."""
    out: list[str] = []
    mml = server.max_model_len
    if mml is not None and mml < traffic.max_total_tokens:
        if traffic.output_tokens is None:
            need = (
                f"sharegpt requests reach {traffic.max_total_tokens} tokens "
                f"(prompts up to {traffic.prompt_tokens_max}, e.g. 817, plus their outputs)"
            )
        else:
            need = (
                f"{traffic.name} needs {traffic.max_total_tokens} "
                f"({traffic.prompt_tokens_max} prompt + {traffic.output_tokens} output)"
            )
        out.append(f"--max-model-len {mml} is below what requests need: {need}; they will be rejected")
    mns = server.max_num_seqs
    if mns is not None and traffic.max_concurrency is not None and mns < traffic.max_concurrency:
        out.append(
            f"--max-num-seqs {mns} is below the client's --max-concurrency {traffic.max_concurrency}: "
            "the server caps the batch, requests queue"
        )
    if not is_loopback(server.host):
        out.append(f"host {server.host} is not loopback: the server is reachable from other machines")
    if server.placeholder_unresolved:
        out.append(f"model {server.model!r}: set LLMOPT_TINY_MODEL to the tiny local model's path")
    elif server.model.startswith(("/", ".", "~")) and not Path(server.model).expanduser().exists():
        out.append(f"model path {server.model} does not exist")
    if flag_value(server.args, "--api-key") is not None:
        out.append("--api-key in args is visible in the process list: set VLLM_API_KEY in env instead")
    if traffic.dataset == "sharegpt":
        if not traffic.dataset_path:
            out.append(
                f"traffic {traffic.name} uses sharegpt but has no dataset_path (the ShareGPT JSON file)"
            )
        elif not Path(traffic.dataset_path).expanduser().exists():
            out.append(f"dataset_path {traffic.dataset_path} does not exist")
    return out
