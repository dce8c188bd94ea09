"""Requests are the one source of truth: the command line's flags, defaults and help come from their fields."""

from __future__ import annotations

import dataclasses

import pytest

import rlrun
from rlrun import cli
from rlrun.api.requests import AgentRequest, ExportRequest, PlayRequest, TrainRequest, field_docs

COMMANDS = {
    "train": TrainRequest,
    "play": PlayRequest,
    "export": ExportRequest,
    "zero": AgentRequest,
    "random": AgentRequest,
}


@pytest.mark.parametrize("request_type", sorted(set(COMMANDS.values()), key=lambda cls: cls.__name__))
def test_every_request_field_has_a_docstring(request_type):
    docs = field_docs(request_type)
    for item in dataclasses.fields(request_type):
        assert docs.get(item.name), f"{request_type.__name__}.{item.name} has no docstring"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_request_field_is_a_flag_whose_help_shows_its_default(command, capsys):
    assert rlrun.main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    request_type = COMMANDS[command]
    docs = field_docs(request_type)
    for item in dataclasses.fields(request_type):
        if not item.metadata.get("cli", True):
            continue
        flag = item.metadata.get("flag", f"--{item.name}")
        assert flag in text
        assert " ".join(docs[item.name].split())[:30] in text
        if item.default is not dataclasses.MISSING:
            shown = {None: "-", False: "off", True: "on"}.get(item.default, item.default)
            default = "off" if item.metadata.get("negate") else shown
            assert f"(default: {default})" in text, f"{command} {flag}: no default shown"


@pytest.mark.parametrize(
    ("command", "words", "field", "value"),
    [
        ("train", ["--rl_library", "sb3"], "library", "sb3"),
        ("train", ["--experiment_name", "e1"], "experiment", "e1"),
        ("train", ["--num_envs", "3", "--max_iterations", "2"], "max_iterations", 2),
        ("play", ["--stochastic"], "deterministic", False),
        ("play", [], "deterministic", True),
        ("play", [], "checkpoint", "latest"),
        ("export", [], "num_envs", 8),
        ("zero", [], "num_envs", 4),
        ("train", ["agent.seed=3"], "overrides", ["agent.seed=3"]),
    ],
)
def test_flags_parse_into_the_request_fields(command, words, field, value):
    args = cli.parse([command, "--task", "rlrun/CartPole-v1", *words])
    assert getattr(args, field) == value
