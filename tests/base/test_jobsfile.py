"""The GPU Job Scheduler's jobs-file line, format detection, requirement tables, sweep grids and GPU-id
injection: the pure parts (berth/jobsfile/, berth/wire/inject.py)."""

from __future__ import annotations

import json

import pytest

from berth.errors import UsageError
from berth.jobsfile import detect, gjs_line, grid, requirements
from berth.wire import inject

README_LINES = [
    "0,/path/to/train.py,pytorch_env,--llm qwen2.5-7b-inst --epochs 100,0-3",
    "1,/path/to/eval.py,pytorch_env,--llm qwen2.5-3b-inst --dataset test,",
    "2,/path/to/inference.py,,--llm qwen2.5-32b-inst --batch_size 1,4,5,6,7",
]


def test_the_readme_lines_parse_as_the_seed_read_them() -> None:
    a, b, c = (gjs_line.parse(t, n, f"jobs.txt:{n}") for n, t in enumerate(README_LINES, 2))
    assert (a.priority, a.script, a.conda, a.gpu_ids) == (0, "/path/to/train.py", "pytorch_env",
                                                          [0, 1, 2, 3])  # fmt: skip
    assert a.args == ["--llm", "qwen2.5-7b-inst", "--epochs", "100"]
    assert (b.conda, b.gpu_ids, b.args[-1]) == ("pytorch_env", None, "test")  # empty field: any
    assert (c.conda, c.gpu_ids) == (None, [4, 5, 6, 7])  # the last field keeps its commas
    assert c.args == ["--llm", "qwen2.5-32b-inst", "--batch_size", "1"]
    assert [gjs_line.berth_priority(x.priority) for x in (a, b, c)] == [0, -1, -2]


def test_comments_quotes_and_short_lines() -> None:
    line = gjs_line.parse('0,/s.py,env,--names "a,b" --x,0-3 # GPU range', 1, "f:1")
    assert line.args == ["--names", "a,b", "--x"] and line.gpu_ids == [0, 1, 2, 3]
    assert gjs_line.parse("1,/s.py", 1, "f:1").conda is None
    assert not gjs_line.is_job_line("   # only a comment") and not gjs_line.is_job_line("  ")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("x,/s.py,,,", "f:1:1: priority 'x' is not an integer"),
        ("0,", "f:1:3: no script_path"),
        ("0,/s.py,,--a 'open,", "f:1:10: arguments"),
        ("0,/s.py,,,0-x", "f:1:11: invalid allowed_gpus '0-x'"),
        ("0,/s.py,my env,,", "f:1:9: conda_env 'my env' is not an environment name"),
    ],
)
def test_a_bad_field_is_named_with_line_and_column(text: str, where: str) -> None:
    with pytest.raises(UsageError) as e:
        gjs_line.parse(text, 1, "f:1")
    assert str(e.value).startswith(where), str(e.value)


def test_a_file_is_in_one_format() -> None:
    kind, lines = detect.detect(
        "f", [(1, "# c"), (2, README_LINES[0]), (3, ""), (4, README_LINES[1])]
    )
    assert kind == detect.GJS and [n for n, _ in lines] == [2, 4]
    assert detect.detect("f", [(1, "-g 2 -- python x.py"), (2, "echo hi")])[0] == detect.BERTH
    with pytest.raises(UsageError, match=r"f:3:1: this line is in berth's format, but line 1"):
        detect.detect("f", [(1, README_LINES[0]), (2, "# x"), (3, "python x.py")])
    with pytest.raises(UsageError, match=r"f:2:1: priority 'x' is not an integer"):
        detect.detect("f", [(1, README_LINES[0]), (2, "x,/s.py,,,")])  # a GPU Job Scheduler line gone wrong


def test_requirement_tables_in_the_seed_format_and_berth_extensions(tmp_path) -> None:
    path = tmp_path / "llm_config.json"
    path.write_text(json.dumps({"default_requirement": 1.0, "models": {
        "qwen2.5-3b-inst": 0.5, "big": {"gpus": 2, "mem": "40G"}}}))  # fmt: skip
    table = requirements.load(str(path))
    half = table.choose(["python", "eval.py", "--llm", "qwen2.5-3b-inst"])
    assert half is not None and (half.gpus, half.mem) == (0.5, None)
    assert half.source == "llm_config.json: --llm qwen2.5-3b-inst -> 0.5 GPU"
    big = table.choose(["x", "--llm=big"])
    assert big is not None and (big.gpus, big.mem) == (2, 40 << 30)
    other = table.choose(["x", "--llm", "mystery"])
    assert (
        other is not None and other.gpus == 1 and "not listed, default_requirement" in other.source
    )
    assert table.choose(["python", "plain.py"]) is None  # no --llm: berth's default
    for bad, why in (
        ({"models": {"m": 1.5}}, "models.m = 1.5: the GPUs must be a whole number"),
        ({"models": {"m": "half"}}, "models.m = 'half': the GPUs must be a number"),
        ({"model": {}}, "unknown key 'model'"),
        ({"models": {"m": {"gpus": 1, "memory": 3}}}, "models.m"),
    ):
        path.write_text(json.dumps(bad))
        with pytest.raises(UsageError, match=why):
            requirements.load(str(path))


def test_sweep_grids_multiply_their_axes() -> None:
    commands, axes = grid.expand("python train.py --lr {1e-3,1e-4} --seed {0..4}".split())
    assert len(commands) == 10 and [len(v) for _, v in axes] == [2, 5]
    assert commands[0][2:] == ["--lr", "1e-3", "--seed", "0"]
    assert commands[6][2:] == ["--lr", "1e-4", "--seed", "1"]  # the first axis slowest
    assert grid.expand(["x", "--out=r{01..03}", "{}", "{gpus}"])[0][2] == [
        "x", "--out=r03", "{}", "{gpus}"]  # fmt: skip
    assert grid.expand(["x", "{6..0..3}"])[0] == [["x", "6"], ["x", "3"], ["x", "0"]]
    with pytest.raises(UsageError, match="integers"):
        grid.expand(["x", "{a..e}"])


def test_injection_rewrites_or_appends_in_either_numbering() -> None:
    gpus = [5, 2]  # the machine's indices, in the job's CUDA order
    assert inject.ids(gpus, "job") == "0,1" and inject.ids(gpus, "machine") == "5,2"
    assert inject.rewrite(["p", "a.py"], "--cuda", "0,1") == ["p", "a.py", "--cuda", "0,1"]
    assert inject.rewrite(["p", "--cuda", "7", "x"], "--cuda", "3") == ["p", "--cuda", "3", "x"]
    assert inject.rewrite(["p", "--cuda=7"], "--cuda", "3") == ["p", "--cuda=3"]
    assert inject.fill("cuda:{cuda} on {gpus}", gpus) == "cuda:0,1 on 5,2"
    assert inject.parse("--cuda=machine") == ("--cuda", "machine")
    for bad in ("cuda", "--cuda=mine", "--"):
        with pytest.raises(ValueError):
            inject.parse(bad)
