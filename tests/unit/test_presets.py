"""Presets as data: builtins, user overrides, one-line errors naming file and key, argv, lint."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from presets.catalog import default_user_dir, load_catalog
from presets.schema import (
    Plan,
    PresetError,
    ServerPreset,
    TrafficPreset,
    flag_value,
    fmt_number,
    lint,
)


@pytest.fixture
def cat_no_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    monkeypatch.delenv("LLMOPT_TINY_MODEL", raising=False)


def write(tmp_path: Path, text: str, name: str = "x.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# ------------------------------------------------------------------------------------------- builtins


@pytest.mark.usefixtures("cat_no_user")
def test_builtins_hold_the_documents_matrix() -> None:
    cat = load_catalog()
    assert set(cat.servers) == {"baseline", "awq", "tuned", "tp2", "cpu-starved", "cpu-roomy", "cpu-tuned"}
    assert set(cat.traffic) == {"sharegpt", "prefix", "random", "cpu-random", "cpu-quick", "cpu-prefix"}
    assert set(cat.plans) == {"gpu", "cpu", "cpu-quick"}
    pairs = [(p.server, p.traffic) for p in cat.get_plan("gpu").phases]
    assert pairs == [
        ("baseline", "sharegpt"),
        ("baseline", "prefix"),
        ("awq", "sharegpt"),
        ("tuned", "sharegpt"),
        ("tp2", "sharegpt"),
    ]
    assert [(p.server, p.traffic) for p in cat.get_plan("cpu").phases] == [
        ("cpu-starved", "cpu-random"),
        ("cpu-roomy", "cpu-random"),
        ("cpu-tuned", "cpu-random"),
    ]
    assert [ph.name for ph, _, _ in cat.plan_phases("cpu-quick")] == [
        "cpu-starved-cpu-quick",
        "cpu-roomy-cpu-quick",
    ]
    assert cat.get_plan("gpu").baseline_index == 0


@pytest.mark.usefixtures("cat_no_user")
def test_builtin_server_values() -> None:
    cat = load_catalog(tiny_model="/models/tiny")
    tuned = cat.get_server("tuned")
    assert (tuned.role, tuned.tunes, tuned.model) == ("tuned", "awq", "Qwen/Qwen3-14B-AWQ")
    assert tuned.argv("vllm") == [
        "vllm", "serve", "Qwen/Qwen3-14B-AWQ", "--host", "127.0.0.1", "--port", "8000",
        "--gpu-memory-utilization", "0.95", "--block-size", "16", "--enable-chunked-prefill",
        "--max-num-batched-tokens", "8192",
    ]  # fmt: skip
    assert cat.get_server("tp2").tensor_parallel_size == 2
    assert cat.get_server("baseline").tensor_parallel_size is None
    starved = cat.get_server("cpu-starved")
    assert starved.model == "/models/tiny"
    assert (starved.role, starved.device, starved.max_model_len) == ("baseline", "cpu", 256)
    assert flag_value(starved.args, "--kv-cache-memory-bytes") == "400000"
    assert flag_value(starved.args, "--dtype") == "bfloat16"
    assert "VLLM_CPU_KVCACHE_SPACE" in starved.env_unset and "VLLM_CPU_KVCACHE_SPACE" not in starved.env
    roomy, ctuned = cat.get_server("cpu-roomy"), cat.get_server("cpu-tuned")
    assert flag_value(roomy.args, "--kv-cache-memory-bytes") == str(1 << 30)
    assert (roomy.role, ctuned.role, ctuned.tunes) == ("freed-memory", "tuned", "cpu-roomy")
    assert (ctuned.max_num_seqs, ctuned.max_model_len) == (256, 2048)
    assert [s.name for s in cat.by_role("baseline", "cpu")] == ["cpu-starved"]
    assert [s.name for s in cat.by_role("baseline", "gpu")] == ["baseline"]


@pytest.mark.usefixtures("cat_no_user")
def test_builtin_traffic_values() -> None:
    cat = load_catalog()
    sg, pre, rnd = cat.get_traffic("sharegpt"), cat.get_traffic("prefix"), cat.get_traffic("random")
    assert (sg.num_prompts, sg.rate, sg.burstiness, sg.max_concurrency, sg.dataset_path) == (
        2000,
        10,
        1.0,
        10,
        None,
    )
    assert (pre.prefix_repetition_prefix_len, pre.prefix_repetition_suffix_len) == (256, 256)
    assert (pre.prefix_repetition_num_prefixes, pre.prefix_repetition_output_len, pre.rate) == (10, 128, 5)
    assert (rnd.random_input_len, rnd.random_output_len, rnd.num_prompts) == (1024, 128, 1000)
    cr, cq, cp = cat.get_traffic("cpu-random"), cat.get_traffic("cpu-quick"), cat.get_traffic("cpu-prefix")
    assert (cr.num_prompts, cr.random_input_len, cr.random_output_len, cr.rate) == (200, 128, 64, 20)
    assert (cr.max_concurrency, cr.ignore_eos, cr.seed) == (8, True, 0)
    assert cq.num_prompts == 40 and cq.model_dump(
        exclude={"name", "description", "num_prompts"}
    ) == cr.model_dump(exclude={"name", "description", "num_prompts"})
    assert (cp.dataset, cp.num_prompts, cp.max_total_tokens, cp.ignore_eos) == (
        "prefix_repetition",
        100,
        128,
        True,
    )


def test_tiny_model_placeholder_from_env_and_unresolved(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("LLMOPT_TINY_MODEL", str(tmp_path))
    assert load_catalog().get_server("cpu-roomy").model == str(tmp_path)
    assert load_catalog(tiny_model="/other").get_server("cpu-roomy").model == "/other"  # argument wins
    monkeypatch.delenv("LLMOPT_TINY_MODEL")
    s = load_catalog().get_server("cpu-roomy")
    assert s.model == "{tiny_model}" and s.placeholder_unresolved
    with pytest.raises(PresetError, match="LLMOPT_TINY_MODEL") as e:
        s.argv("vllm")
    assert e.value.key == "servers.cpu-roomy.model"
    assert any("LLMOPT_TINY_MODEL" in w for w in lint(s, load_catalog().get_traffic("cpu-random")))


@pytest.mark.usefixtures("cat_no_user")
def test_every_cpu_builtin_pair_lints_clean(tmp_path: Path) -> None:
    cat = load_catalog(tiny_model=str(tmp_path))
    for plan in ("cpu", "cpu-quick"):
        for _, server, traffic in cat.plan_phases(plan):
            assert lint(server, traffic) == []
    for t in ("cpu-random", "cpu-prefix"):
        assert lint(cat.get_server("cpu-starved"), cat.get_traffic(t)) == []


# --------------------------------------------------------------------------------------------- argv


def test_traffic_argv_random_and_prefix() -> None:
    t = TrafficPreset(
        name="t", num_prompts=200, random_input_len=128, random_output_len=64, request_rate=20,
        max_concurrency=8, ignore_eos=True, seed=0, extra_args=["--label", "x"],
    )  # fmt: skip
    argv = t.argv("/v/bin/vllm", "http://127.0.0.1:8011", "m", "tok", Path("/r"), "bench-0.json")
    assert argv[:3] == ["/v/bin/vllm", "bench", "serve"]
    joined = " ".join(argv)
    for frag in (
        "--backend openai --base-url http://127.0.0.1:8011 --endpoint /v1/completions",
        "--model m --tokenizer tok --dataset-name random",
        "--dataset-name random --random-input-len 128 --random-output-len 64 --num-prompts 200",
        "--request-rate 20 --burstiness 1 --max-concurrency 8 --ignore-eos --seed 0",
        "--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99",
        "--save-result --result-dir /r --result-filename bench-0.json --label x",
    ):
        assert frag in joined
    assert "--prefix-repetition-prefix-len" not in joined and "--dataset-path" not in joined
    p = TrafficPreset(name="p", dataset="prefix_repetition", prefix_repetition_num_prefixes=4)
    pj = " ".join(p.argv("vllm", "u", "m", None, "/r", "f.json"))
    assert "--request-rate inf" in pj and "--tokenizer" not in pj and "--max-concurrency" not in pj
    assert "--prefix-repetition-prefix-len 256 --prefix-repetition-suffix-len 256" in pj
    assert "--prefix-repetition-num-prefixes 4 --prefix-repetition-output-len 128" in pj
    assert "--random-input-len" not in pj


def test_sharegpt_needs_a_dataset_path(tmp_path: Path) -> None:
    t = TrafficPreset(name="sg", dataset="sharegpt", max_concurrency=10)
    with pytest.raises(PresetError) as e:
        t.argv("vllm", "u", "m", None, "/r", "f.json")
    assert e.value.key == "traffic.sg.dataset_path" and "\n" not in str(e.value)
    data = tmp_path / "sg.json"
    data.write_text("[]")
    t2 = t.replace(dataset_path=str(data))
    argv = t2.argv("vllm", "u", "m", None, "/r", "f")
    assert argv[argv.index("--dataset-path") + 1] == str(data)
    assert argv[argv.index("--dataset-name") + 1] == "sharegpt" and "--random-input-len" not in argv
    assert (t.prompt_tokens_max, t.output_tokens, t.max_total_tokens) == (1024, None, 2048)


def test_request_rate_forms() -> None:
    assert TrafficPreset(name="a", request_rate="inf").rate == math.inf
    assert TrafficPreset(name="a", request_rate=math.inf).request_rate == "inf"
    assert TrafficPreset(name="a", request_rate=2.5).rate == 2.5
    assert fmt_number(2.5) == "2.5" and fmt_number(10.0) == "10" and fmt_number(math.inf) == "inf"
    for bad in (0, -1, "fast", True):
        with pytest.raises(ValueError):
            TrafficPreset.model_validate({"name": "a", "request_rate": bad})


def test_server_accessors_and_owned_flags() -> None:
    s = ServerPreset(name="s", model="m", args=["--max-model-len=1024", "--max-num-seqs", "8", "-tp", "4"])
    assert (s.max_model_len, s.max_num_seqs, s.tensor_parallel_size) == (1024, 8, 4)
    assert ServerPreset(name="v6", model="m", host="::1", port=8011).base_url == "http://[::1]:8011"
    with pytest.raises(ValueError, match="preset key"):
        ServerPreset(name="s", model="m", args=["--port", "9000"])


def test_plan_baseline_by_name_index_and_errors() -> None:
    phases = [{"server": "a", "traffic": "t"}, {"server": "b", "traffic": "t", "label": "bee"}]

    def plan(**kw: Any) -> Plan:
        return Plan.model_validate({"name": "p", "phases": phases, **kw})

    assert plan().baseline_index == 0
    assert plan(baseline="bee").baseline_index == 1
    assert plan(baseline=1).baseline_index == 1
    for bad in (2, "nope", 1.0):
        with pytest.raises(ValueError):
            plan(baseline=bad)
    with pytest.raises(ValueError, match="repeat"):
        plan(phases=[phases[0], phases[0]])
    with pytest.raises(ValueError):
        plan(phases=[])


# -------------------------------------------------------------------------------------- user files


@pytest.mark.usefixtures("cat_no_user")
def test_user_file_overrides_builtin_by_name(tmp_path: Path) -> None:
    p = write(tmp_path, '[servers.baseline]\nmodel = "my/model"\nrole = "baseline"\nport = 8011\n')
    cat = load_catalog([tmp_path])
    assert cat.get_server("baseline").model == "my/model" and cat.get_server("baseline").port == 8011
    assert cat.sources["servers.baseline"] == p
    assert cat.get_server("awq").model == "Qwen/Qwen3-14B-AWQ"  # untouched builtins stay


def test_default_user_dir_is_read_when_present(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    d = default_user_dir()
    assert d == tmp_path / "llmopt-tui" / "presets"
    d.mkdir(parents=True)
    write(d, "[traffic.mine]\nnum_prompts = 7\n", "mine.toml")
    assert load_catalog().get_traffic("mine").num_prompts == 7
    assert "mine" not in load_catalog(use_default_user_dir=False).traffic


BAD_FILES = [
    ('[servers.fast]\nmodel = "m"\nmax_num_seqs = 8\n', "servers.fast.max_num_seqs", "unknown key"),
    ('[servers.fast]\nmodel = "m"\nport = "8000"\n', "servers.fast.port", "valid integer"),
    ("[servers.fast]\nport = 8000\n", "servers.fast.model", "missing required key"),
    ('[servers.fast]\nmodel = "m"\nargs = ["--x", 3]\n', "servers.fast.args.1", "valid string"),
    ('[servers.fast]\nmodel = "m"\nrole = "fastest"\n', "servers.fast.role", "baseline"),
    ('[servers.fast]\nmodel = "m"\nenv = { K = 1 }\n', "servers.fast.env.K", "valid string"),
    ('[traffic.t]\nrequest_rate = "fast"\n', "traffic.t.request_rate", '"inf"'),
    ("[traffic.t]\nnum_prompts = 0\n", "traffic.t.num_prompts", "greater than 0"),
    (
        '[plans.p]\nphases = [{ server = "a", traffic = "b", speed = 1 }]\n',
        "plans.p.phases.0.speed",
        "unknown",
    ),
    (
        '[plans.p]\nphases = [{ server = "nope", traffic = "cpu-quick" }]\n',
        "plans.p.phases.0.server",
        "'nope'",
    ),
    ('[servers.s]\nmodel = "m"\ntunes = "ghost"\n', "servers.s.tunes", "ghost"),
    ('[server.s]\nmodel = "m"\n', "server", "unknown section"),
    ('[servers."bad name"]\nmodel = "m"\n', "servers.bad name.name", "file names"),
]


@pytest.mark.usefixtures("cat_no_user")
@pytest.mark.parametrize(("text", "key", "fragment"), BAD_FILES)
def test_bad_preset_file_names_file_and_key(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(PresetError) as e:
        load_catalog([p])
    err = e.value
    assert (err.file, err.key) == (str(p), key)
    assert fragment in err.message
    assert str(err).startswith(f"{p}: {key}: ") and "\n" not in str(err)


@pytest.mark.usefixtures("cat_no_user")
def test_unknown_key_message_is_the_documented_line(tmp_path: Path) -> None:
    p = write(tmp_path, '[servers.fast]\nmodel = "m"\nmax_num_seqs = 8\n')
    with pytest.raises(PresetError) as e:
        load_catalog([p])
    assert str(e.value).startswith(f"{p}: servers.fast.max_num_seqs: unknown key (known: ")


@pytest.mark.usefixtures("cat_no_user")
def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    p = write(tmp_path, '[servers.fast]\nmodel = "m"\nport = = 3\n')
    with pytest.raises(PresetError) as e:
        load_catalog([p])
    assert str(e.value).startswith(f"{p}: TOML syntax error") and "line 3" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.usefixtures("cat_no_user")
def test_non_strict_load_keeps_good_files_and_reports_bad(tmp_path: Path) -> None:
    write(tmp_path, "[servers.fast]\nport = 1\n", "a-bad.toml")
    write(
        tmp_path,
        '[traffic.ok]\nnum_prompts = 3\n[plans.p]\nphases = [{ server = "ghost", traffic = "ok" }]\n',
    )
    cat = load_catalog([tmp_path, tmp_path / "missing"], strict=False)
    assert cat.get_traffic("ok").num_prompts == 3
    assert "p" not in cat.plans and "fast" not in cat.servers
    keys = sorted(str(e.key) for e in cat.errors)
    assert keys == ["None", "plans.p.phases.0.server", "servers.fast.model"]


@pytest.mark.usefixtures("cat_no_user")
def test_get_unknown_names_what_exists() -> None:
    with pytest.raises(PresetError, match=r"no such preset \(known: awq, baseline, cpu-roomy, ") as e:
        load_catalog().get_server("cpu-quick")
    assert e.value.key == "servers.cpu-quick"


# ---------------------------------------------------------------------------------------------- lint


def test_lint_max_model_len_below_sharegpt_requests() -> None:
    s = ServerPreset(name="s", model="Qwen/Qwen3-14B-AWQ", args=["--max-model-len", "1024"])
    warns = lint(s, TrafficPreset(name="sharegpt", dataset="sharegpt", dataset_path="/", max_concurrency=10))
    assert len(warns) == 1 and "--max-model-len 1024" in warns[0] and "817" in warns[0]
    assert (
        lint(
            s.model_copy(update={"args": ["--max-model-len", "2048"]}),
            TrafficPreset(name="x", dataset="sharegpt", dataset_path="/"),
        )
        == []
    )


def test_lint_max_model_len_against_fixed_lengths() -> None:
    s = ServerPreset(name="s", model="m", args=["--max-model-len", "256"])
    assert lint(s, TrafficPreset(name="r", random_input_len=128, random_output_len=64)) == []
    w = lint(s, TrafficPreset(name="r", random_input_len=200, random_output_len=64))
    assert len(w) == 1 and "needs 264 (200 prompt + 64 output)" in w[0]


def test_lint_max_num_seqs_below_client_concurrency() -> None:
    s = ServerPreset(name="s", model="m", args=["--max-num-seqs", "8"])
    w = lint(s, TrafficPreset(name="t", max_concurrency=10))
    assert len(w) == 1 and "--max-num-seqs 8" in w[0] and "--max-concurrency 10" in w[0]
    assert lint(s, TrafficPreset(name="t", max_concurrency=8)) == []
    assert lint(s, TrafficPreset(name="t")) == []  # no client cap: nothing to compare


def test_lint_host_model_path_sharegpt_and_api_key(tmp_path: Path) -> None:
    t = TrafficPreset(name="t")
    assert any(
        "0.0.0.0 is not loopback" in w for w in lint(ServerPreset(name="s", model="m", host="0.0.0.0"), t)
    )
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        assert lint(ServerPreset(name="s", model="m", host=host), t) == []
    assert any("does not exist" in w for w in lint(ServerPreset(name="s", model="./no/such/model"), t))
    assert lint(ServerPreset(name="s", model=str(tmp_path)), t) == []
    assert lint(ServerPreset(name="s", model="org/hub-model"), t) == []
    sg = TrafficPreset(name="sg", dataset="sharegpt")
    assert any("no dataset_path" in w for w in lint(ServerPreset(name="s", model="m"), sg))
    missing = sg.replace(dataset_path=str(tmp_path / "nope.json"))
    assert any("does not exist" in w for w in lint(ServerPreset(name="s", model="m"), missing))
    keyed = ServerPreset(name="s", model="m", args=["--api-key", "sk-1234"])
    assert any("VLLM_API_KEY" in w for w in lint(keyed, t))
