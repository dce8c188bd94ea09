"""Configuration strings are data (the corpus's classes 1 and 2, `security_cases`): a name that selects code is
looked up in the table rlrun keeps per library, a model expression is parsed by rlrun, and a shared study's
hand-made trials never become `best.yaml`.

Every crafted configuration below would run code if the library read it as it stands (RSL-RL imports a
`class_name`, SKRL `eval`s and `exec`s): each is refused in one line naming the key, before any folder exists, and
the payload's marker file is never written. The property tests generate strings at each library's code-selecting
keys and record what reaches the library's own entry points (SKRL's expression parsers and `eval`, RSL-RL's
`resolve_callable`, rl_games' factories): a string is refused, or it is one rlrun's table lists or its parser
produced.
"""

from __future__ import annotations

import contextlib
import copy
import re
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlrun
from rlrun import configs
from rlrun.configs import library_config, load_agent_config
from rlrun.errors import InvalidArgument, UnsafeConfig, UserError
from rlrun.libraries import LIBRARIES, get_library, load_adapter
from rlrun.libraries.base import code_tables
from rlrun.trust.names import Expression, check_config, parse_expression, render, rule_for

PENDULUM = "rlrun/Pendulum-v1"
PAYLOAD = "rlrun_trust_payload"
"""A module that writes the marker when imported: what a `class_name` of `module:attr` would import."""
ALGORITHMS = {"rsl_rl": "ppo", "skrl": "ppo", "rl_games": "ppo", "torchrl": "ppo", "sb3": "ppo"}
SHIPPED = Path(configs.__file__).parent


@pytest.fixture(scope="module")
def marker(tmp_path_factory):
    """The file a payload would write, and the payload module on `sys.path` (removed again afterwards)."""
    folder = tmp_path_factory.mktemp("payload")
    path = folder / "ran"
    (folder / f"{PAYLOAD}.py").write_text(
        f"import pathlib\npathlib.Path({str(path)!r}).write_text('ran')\n"
        "class PPO: ...\nMLPModel = Writer = Net = Act = Policy = Memory = PPO\ndef load(*args, **kwargs): return PPO\n"
    )
    sys.path.insert(0, str(folder))
    yield path
    sys.path.remove(str(folder))
    sys.modules.pop(PAYLOAD, None)


def touch(marker: Path) -> str:
    """A Python expression that writes the marker."""
    return f"__import__('pathlib').Path({str(marker)!r}).touch()"


def tables(library: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    return code_tables(load_adapter(get_library(library)))


def shipped(library: str, algorithm: str | None = None) -> dict[str, Any]:
    return library_config(load_agent_config(library, algorithm or ALGORITHMS[library], PENDULUM))


def placed(config: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A copy of `config` with `value` at `path` (mapping keys and list indices)."""
    config = copy.deepcopy(config)
    node = config
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return config


# --- every genuine configuration passes, and unchanged -------------------------------------------------------


@pytest.mark.parametrize("path", sorted(SHIPPED.rglob("*.yaml")), ids=lambda path: str(path.relative_to(SHIPPED)))
def test_every_shipped_configuration_passes_the_checker_unchanged(path):
    from rlrun.trust.names import canonical

    library = path.relative_to(SHIPPED).parts[0]
    config = yaml.safe_load(path.read_text())
    names, source = tables(library)
    check_config(config, names, source, library=library, origin=str(path))
    assert canonical(config, names, source, library=library) == config, "rlrun's rendering of a shipped expression"


def test_every_rl_zoo_entry_rlrun_applies_passes_the_checker():
    pytest.importorskip("rl_zoo3")
    from rlrun.configs import zoo
    from rlrun.libraries import sb3

    names, source = tables("sb3")
    checked = 0
    for algorithm in ("ppo", "a2c", "sac", "td3"):
        for task, entry in yaml.safe_load(zoo.hyperparams_file(algorithm).read_text()).items():
            try:
                config = zoo.to_rlrun(algorithm, entry, shipped("sb3", algorithm), sb3.env_steps_per_iteration, task)
            except (zoo.ZooRefused, UserError):
                continue
            check_config(config, names, source, library="sb3", origin=task)
            checked += 1
    assert checked > 20


# --- the expression language ---------------------------------------------------------------------------------


def skrl_rules() -> tuple[Expression, Expression]:
    from rlrun.libraries.skrl_config import MODEL_OUTPUT, NETWORK_INPUT

    return MODEL_OUTPUT, NETWORK_INPUT


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("ACTIONS", "ACTIONS"),
        ("ONE", "ONE"),
        ("tanh(ACTIONS)", "tanh(ACTIONS)"),
        ("2*tanh( ACTIONS )", "2 * tanh(ACTIONS)"),
        ("ACTIONS * 0.5 + 1", "(ACTIONS * 0.5) + 1"),
        ("-(ACTIONS)", "-ACTIONS"),
        ("((ACTIONS)) / -2", "ACTIONS / (-2)"),
    ],
)
def test_model_outputs_are_parsed_and_rendered_as_rlruns_own_text(text, rendered):
    output, _ = skrl_rules()
    assert render(parse_expression(text, output)) == rendered
    assert render(parse_expression(rendered, output)) == rendered, "the rendering is a fixed point"


@pytest.mark.parametrize(
    "text",
    [
        "OBSERVATIONS",
        "concatenate([OBSERVATIONS, ACTIONS])",
        "permute(OBSERVATIONS, (0, 3, 1, 2))",
        "concatenate([features, ACTIONS])",
    ],
)
def test_network_inputs_name_tokens_and_the_models_networks(text):
    _, network_input = skrl_rules()
    assert render(parse_expression(text, network_input, ["features"])) == text


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "ACTIONS.__class__",
        "ACTIONS[0]",
        "lambda: ACTIONS",
        "ACTIONS if True else ONE",
        "ACTIONS * ONE",
        "open('x')",
        "tanh(ACTIONS, dim=1)",
        "ACTIONS ** 2",
        "'ACTIONS'",
        "1e999 * ACTIONS",
        "2",
        "tanh",
        "ACTIONS; import os",
        "[ACTIONS for _ in ()]",
        "x" * 500,
        "(" * 200 + "ACTIONS" + ")" * 200,
    ],
)
def test_anything_else_in_an_expression_is_refused(text):
    output, _ = skrl_rules()
    with pytest.raises(UnsafeConfig) as refused:
        check_config({"models": {"policy": {"output": text}}}, {"models.*.output": output}, ("models",))
    assert "\n" not in str(refused.value) and "agent.models.policy.output" in str(refused.value)


def test_an_unknown_name_is_one_line_naming_the_key_and_the_allowed_names():
    names, source = tables("rsl_rl")
    config = placed(shipped("rsl_rl"), ("algorithm", "class_name"), "torch.hub:load")
    with pytest.raises(UnsafeConfig, match=r"^/x/agent\.yaml: 'agent\.algorithm\.class_name: torch\.hub:load'.*PPO"):
        check_config(config, names, source, library="rsl_rl", origin="/x/agent.yaml")


def test_an_import_path_anywhere_is_refused_even_where_no_table_reaches():
    names, source = tables("torchrl")
    with pytest.raises(UnsafeConfig, match=r"agent\.extra\.hook.*import path"):
        check_config({**shipped("torchrl"), "extra": {"hook": "os:system"}}, names, source)


# --- crafted configurations through `rlrun.train`: refused in one line, no marker, no folder -----------------


def crafted(marker: Path) -> list[tuple[str, tuple[Any, ...], Any]]:
    """(library, path, value): a configuration that would run code, per library and code-selecting key."""
    payload = touch(marker)
    return [
        ("rsl_rl", ("algorithm", "class_name"), f"{PAYLOAD}:PPO"),
        ("rsl_rl", ("actor", "class_name"), f"{PAYLOAD}.MLPModel"),
        ("rsl_rl", ("critic", "class_name"), "torch.hub:load"),
        ("rsl_rl", ("actor", "distribution_cfg", "class_name"), f"{PAYLOAD}:PPO"),
        ("rsl_rl", ("logger",), {"class_name": f"{PAYLOAD}:Writer", "source": "local"}),
        ("rsl_rl", ("algorithm", "symmetry_cfg"), {"use_data_augmentation": True, "data_augmentation_func": "load"}),
        ("rsl_rl", ("actor", "activation"), f"{PAYLOAD}.Act"),
        ("skrl", ("agent", "learning_rate_scheduler"), f"{payload} or KLAdaptiveLR"),
        ("skrl", ("agent", "observation_preprocessor"), f"{payload} or RunningStandardScaler"),
        ("skrl", ("agent", "value_preprocessor"), f"{payload} or RunningStandardScaler"),
        ("skrl", ("agent", "state_preprocessor"), f"{payload} or RunningStandardScaler"),
        ("skrl", ("models", "policy", "output"), f"ACTIONS if {payload} is None else ACTIONS"),
        ("skrl", ("models", "value", "network", 0, "input"), f"({payload}, OBSERVATIONS)[1]"),
        ("skrl", ("models", "policy", "network", 0, "name"), f"net_container = None\n        {payload}\n        net"),
        ("skrl", ("models", "policy", "network", 0, "layers"), [{"linear": {"out_features": f"{payload} or 64"}}]),
        ("skrl", ("models", "policy", "network", 0, "layers"), [{"linear": {f"bias={payload}, x": 64}}]),
        ("skrl", ("models", "policy", "network", 0, "activations"), f"{PAYLOAD}.Act"),
        ("skrl", ("models", "policy", "class"), "GaussianMixin), __import__('os'), (object"),
        ("skrl", ("models", "policy", "clip_actions"), payload),
        ("skrl", ("memory", "class"), f"{PAYLOAD}:Memory"),
        ("rl_games", ("params", "network", "name"), f"{PAYLOAD}:Net"),
        ("rl_games", ("params", "network", "mlp", "activation"), f"{PAYLOAD}.Act"),
        ("torchrl", ("actor", "activation"), f"{PAYLOAD}.Act"),
        ("sb3", ("policy_kwargs", "activation_fn"), f"{PAYLOAD}.Act"),
        ("sb3", ("policy",), f"{PAYLOAD}:Policy"),
    ]


def crafted_ids() -> list[str]:
    return [f"{library}-{'.'.join(map(str, path))}" for library, path, _ in crafted(Path("m"))]


@pytest.mark.parametrize("index", range(len(crafted_ids())), ids=crafted_ids())
def test_a_crafted_agent_config_is_refused_in_one_line_before_anything_runs(index, marker, tmp_path):
    library, path, value = crafted(marker)[index]
    if not LIBRARIES[library].installed:
        pytest.skip(f"{library} is not installed")
    file = tmp_path / "agent.yaml"
    config = {**load_agent_config(library, ALGORITHMS[library], PENDULUM)}
    file.write_text(yaml.safe_dump(placed(config, path, value), sort_keys=False))
    request = rlrun.TrainRequest(
        task=PENDULUM, library=library, agent_config=str(file), log_root=str(tmp_path / "logs"), max_iterations=1
    )
    with pytest.raises(InvalidArgument) as refused:  # UnsafeConfig, or the type check of `--agent_config` before it
        rlrun.train(request)
    message = str(refused.value)
    assert "\n" not in message and str(file) in message
    assert ".".join(("agent", *map(str, path))) in message
    assert not marker.exists() and not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    ("library", "word"),
    [
        ("rsl_rl", f"agent.algorithm.class_name={PAYLOAD}:PPO"),
        ("skrl", "agent.models.policy.output=__import__('os').getcwd()"),
        ("skrl", "agent.agent.learning_rate_scheduler=__import__('os').getcwd"),
    ],
)
def test_an_override_is_refused_on_the_command_line_with_exit_2_and_one_line(library, word, marker, tmp_path, capsys):
    root = tmp_path / "logs"
    assert rlrun.main(["train", "--task", PENDULUM, "--library", library, "--log_root", str(root), word]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"override '{word.split('=')[0]}" in error
    assert not marker.exists() and not root.exists()


# --- a run folder's params/agent.yaml: play, export and resume refuse it ------------------------------------

PLANTED = {
    "rsl_rl": (("algorithm", "class_name"), f"{PAYLOAD}:PPO", ("agent.num_steps_per_env=8",)),
    "skrl": (("models", "policy", "output"), "ACTIONS if {payload} else ACTIONS", ("agent.agent.rollouts=8",)),
}


@pytest.mark.parametrize("library", list(PLANTED))
def test_a_planted_run_is_refused_by_play_export_and_resume(library, marker, tmp_path):
    pytest.importorskip(library)
    path, value, small = PLANTED[library]
    root = tmp_path / "logs"
    trained = rlrun.train(
        rlrun.TrainRequest(
            task=PENDULUM, library=library, log_root=str(root), num_envs=2, max_iterations=1, overrides=small
        )
    )
    params = trained.run_dir / "params" / "agent.yaml"
    planted = placed(yaml.safe_load(params.read_text()), path, value.format(payload=touch(marker)))
    params.write_text(yaml.safe_dump(planted, sort_keys=False))
    before = sorted(root.rglob("*"))
    common = {"task": PENDULUM, "library": library, "log_root": str(root)}
    for request, call in (
        (rlrun.PlayRequest(**common, num_episodes=1), rlrun.play),
        (rlrun.ExportRequest(**common), rlrun.export),
        (rlrun.TrainRequest(**common, resume=True, max_iterations=1), rlrun.train),
    ):
        with pytest.raises(UnsafeConfig, match="^" + re.escape(f"{params}: 'agent.{'.'.join(path)}: ")):
            call(request)
    assert not marker.exists() and sorted(root.rglob("*")) == before


# --- tune: search spaces, and trials put into a shared study by hand -----------------------------------------


def test_a_search_space_choice_that_selects_code_is_refused_before_the_study_exists(marker, tmp_path):
    pytest.importorskip("optuna")
    pytest.importorskip("skrl")
    from rlrun.tuning import TuneRequest

    out = tmp_path / "tune"
    for space, key in (
        ({"agent.models.policy.output": f"choice(['ACTIONS', \"{touch(marker)}\"])"}, "agent.models.policy.output"),
        ({"agent.agent.learning_rate_scheduler": "choice(['KLAdaptiveLR', 'os:system'])"}, "import path"),
    ):
        request = TuneRequest(
            task=PENDULUM, library="skrl", iterations=1, n_trials=1, search_space=space, out=str(out), report=False
        )
        with pytest.raises(UnsafeConfig, match=key):
            rlrun.tune(request)
    assert not marker.exists() and not out.exists()


def test_trials_put_into_a_shared_study_by_hand_never_become_best_yaml(tmp_path):
    optuna = pytest.importorskip("optuna")
    pytest.importorskip("stable_baselines3")
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from rlrun.tuning import TuneRequest

    out = tmp_path / "tune"
    out.mkdir()
    space = {"agent.learning_rate": "loguniform(1e-4, 1e-2)", "agent.n_epochs": "int(1, 4)"}
    ours = {"agent.learning_rate": FloatDistribution(1e-4, 1e-2, log=True), "agent.n_epochs": IntDistribution(1, 4)}
    wide = {**ours, "agent.n_epochs": IntDistribution(1, 400)}
    storage = optuna.storages.RDBStorage(f"sqlite:///{out / 'study.db'}")
    study = optuna.create_study(storage=storage, study_name="shared", direction="maximize")
    genuine = {"agent.learning_rate": 1e-3, "agent.n_epochs": 2}
    study.add_trial(optuna.trial.create_trial(params=genuine, distributions=ours, value=10.0))
    study.add_trial(
        optuna.trial.create_trial(params={**genuine, "agent.n_epochs": 300}, distributions=wide, value=1e300)
    )
    study.add_trial(optuna.trial.create_trial(params=genuine, distributions=ours, value=float("inf")))
    extra = {**ours, "agent.policy": CategoricalDistribution(["os:system"])}
    study.add_trial(
        optuna.trial.create_trial(params={**genuine, "agent.policy": "os:system"}, distributions=extra, value=1e200)
    )
    storage.remove_session()
    storage.engine.dispose()
    request = TuneRequest(
        task="rlrun/CartPole-v1",
        library="sb3",
        iterations=1,
        n_trials=4,
        search_space=space,
        study="shared",
        out=str(out),
        report=False,
        pruner="none",
    )
    with pytest.warns(UserWarning) as warned:
        result = rlrun.tune(request)
    notes = [str(warning.message) for warning in warned if "ignored for best" in str(warning.message)]
    assert len(notes) == 3 and all("\n" not in note for note in notes), notes
    assert result.ran == 0 and result.best_trial == 0 and result.best_value == 10.0
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["learning_rate"] == 1e-3 and best["n_epochs"] == 2 and best["policy"] == "MlpPolicy"


# --- the property: generated strings never reach a library unparsed ------------------------------------------

WORDS = (
    *("ACTIONS", "ONE", "OBSERVATIONS", "STATES", "net", "PLACEHOLDER", "taken_actions", "self", "torch", "nn"),
    *("__import__", "open", "eval", "exec", "getattr", "os", "tanh", "relu", "concatenate", "permute", "lambda"),
    *("KLAdaptiveLR", "RunningStandardScaler", "GaussianNoise", "GaussianMixin", "DeterministicMixin", "PPO"),
    *("MLPModel", "GaussianDistribution", "BetaDistribution", "Distillation", "RNNModel", "elu", "tensorboard"),
    *("actor_critic", "continuous_a2c_logstd", "default", "None", "torch.hub:load", f"{PAYLOAD}:PPO", "os.system"),
)
JOINS = (" + ", " - ", "*", "/", "**", " if ", "; ", "\n", ".", ",", " or ")
FUNCTIONS = ("tanh", "concatenate", "permute", "__import__", "open", "getattr", "eval", "sigmoid", "print")


def expressions(marker: Path) -> st.SearchStrategy[str]:
    """Text at a code-selecting key: known names, payloads, and expressions grown from them, valid or not."""
    atoms = st.one_of(
        st.sampled_from(WORDS),
        st.sampled_from((touch(marker), f"exec({touch(marker)!r})", "().__class__.__bases__[0]")),
        st.integers(-3, 300).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
    )
    grown = st.recursive(
        atoms,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(JOINS), inner).map("".join),
            st.tuples(st.sampled_from(FUNCTIONS), st.lists(inner, max_size=3)).map(
                lambda call: f"{call[0]}({', '.join(call[1])})"
            ),
            inner.map(lambda text: f"[{text}]"),
            inner.map(lambda text: f"({text})"),
            inner.map(lambda text: f"{text}[0]"),
            inner.map(lambda text: f"{text}.__class__"),
        ),
        max_leaves=6,
    )
    return st.one_of(grown, st.text(max_size=24))


def from_rule(rule: Any) -> st.SearchStrategy[str]:
    """Text in the key's own language, spelt with the spaces and parentheses rlrun's rendering drops, and now and
    then one step outside it (a lower-case token, a call the rule does not list)."""
    if isinstance(rule, tuple):
        listed = st.sampled_from(rule or ("x",))
        return st.one_of(listed, listed.map(str.upper), listed.map(lambda name: f" {name}"))
    if not isinstance(rule, Expression):
        return st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
    spaces = st.sampled_from(("", " ", "  "))

    def grown(token: str) -> st.SearchStrategy[str]:
        atoms = st.one_of(st.just(token), st.sampled_from(("2", "0.5", "1e-3", token.lower())))
        calls = [name for name, shape in rule.functions.items() if shape == "value"] + ["exp"]
        return st.recursive(
            atoms,
            lambda inner: st.one_of(
                st.tuples(inner, st.sampled_from((" + ", "-", " * ", "/")), inner).map("".join),
                st.tuples(spaces, inner, spaces).map(lambda parts: f"({''.join(parts)})"),
                st.tuples(st.sampled_from(calls), inner).map(lambda call: f"{call[0]}( {call[1]})"),
                st.lists(inner, min_size=1, max_size=3).map(lambda items: f"concatenate([{', '.join(items)}])"),
                inner.map(lambda text: f"permute({text}, (0, 1))"),
            ),
            max_leaves=5,
        )

    return st.tuples(spaces, st.sampled_from(rule.tokens).flatmap(grown), spaces).map("".join)


SKRL_KEYS = (
    ("models", "policy", "output"),
    ("models", "value", "output"),
    ("models", "policy", "network", 0, "input"),
    ("models", "value", "network", 0, "name"),
    ("models", "policy", "network", 0, "activations"),
    ("models", "policy", "class"),
    ("models", "policy", "reduction"),
    ("agent", "learning_rate_scheduler"),
    ("agent", "observation_preprocessor"),
    ("agent", "value_preprocessor"),
)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def skrl_entry_points(monkeypatch):
    """What reaches SKRL's text-reading entry points: its network input and output parsers and the Runner's `eval`."""
    pytest.importorskip("skrl")
    import skrl.utils.model_instantiators.torch.common as common
    import skrl.utils.runner.torch.runner as runner_module

    seen: dict[str, list[Any]] = {"input": [], "output": [], "eval": []}
    parse_input, parse_output = common._parse_input, common._parse_output

    def recorded(kind, real):
        return lambda text, *rest: (seen[kind].append(text), real(text, *rest))[1]

    monkeypatch.setattr(common, "_parse_input", recorded("input", parse_input))
    monkeypatch.setattr(common, "_parse_output", recorded("output", parse_output))
    monkeypatch.setattr(runner_module, "eval", recorded("eval", eval), raising=False)
    return seen


def skrl_build(config: dict[str, Any]) -> None:
    """What SKRL's `Runner` does with a configuration's text, without seeding the process: the adapter's hand-over,
    the models (their source written and `exec`ed) and the agent's configuration (its `eval`s)."""
    import gymnasium
    from skrl.utils.runner.torch import Runner

    from rlrun.libraries.skrl_config import hand_over

    handed = hand_over(config, "torch")
    runner = Runner.__new__(Runner)
    runner._verbose = False
    env = types.SimpleNamespace(
        observation_space=gymnasium.spaces.Box(-1, 1, (3,)),
        state_space=None,
        action_space=gymnasium.spaces.Box(-1, 1, (1,)),
        device="cpu",
        num_envs=2,
    )
    with contextlib.suppress(Exception):  # one SKRL cannot build (a bad layer list): what counts is what it was given
        runner._generate_models(env, copy.deepcopy(handed))
    runner._process_cfg(handed["agent"])


@PROPERTY
@given(data=st.data())
def test_skrl_never_reads_text_that_rlrun_did_not_parse_and_render(data, marker, skrl_entry_points):
    from rlrun.libraries.skrl_config import MODEL_OUTPUT, NETWORK_INPUT

    names, source = tables("skrl")
    path = data.draw(st.sampled_from(SKRL_KEYS))
    rule = rule_for(tuple(map(str, path)), names)
    text = data.draw(st.one_of(from_rule(rule), from_rule(rule), expressions(marker)))
    config = placed(shipped("skrl"), path, text)
    try:
        check_config(config, names, source, library="skrl")
    except UnsafeConfig as refused:
        assert "\n" not in str(refused)
        assert not marker.exists()
        return
    for seen in skrl_entry_points.values():
        seen.clear()
    skrl_build(config)
    networks = [network["name"] for model in config["models"].values() if isinstance(model, dict)
                for network in model["network"]]  # fmt: skip
    for text in skrl_entry_points["input"]:
        assert render(parse_expression(text, NETWORK_INPUT, networks)) == text
    for text in skrl_entry_points["output"]:
        assert render(parse_expression(text, MODEL_OUTPUT)) == text
    assert skrl_entry_points["eval"] == [], "SKRL is handed classes, never names to evaluate"
    assert not marker.exists()


RSL_RL_KEYS = (
    ("algorithm", "class_name"),
    ("actor", "class_name"),
    ("critic", "class_name"),
    ("actor", "distribution_cfg", "class_name"),
    ("actor", "activation"),
    ("algorithm", "optimizer"),
)


@pytest.fixture
def rsl_rl_resolved(monkeypatch):
    """The names RSL-RL's `resolve_callable` (which imports `module:attr`) is asked for."""
    pytest.importorskip("rsl_rl")
    import rsl_rl.runners.on_policy_runner as runner_module
    import rsl_rl.utils.utils as utils

    resolved: list[Any] = []
    resolve = utils.resolve_callable
    record = lambda name: (resolved.append(name), resolve(name))[1]  # noqa: E731
    monkeypatch.setattr(utils, "resolve_callable", record)
    monkeypatch.setattr(runner_module, "resolve_callable", record)
    return resolved


@PROPERTY
@given(data=st.data())
def test_rsl_rl_resolves_no_name_outside_rlruns_table(data, marker, rsl_rl_resolved):
    from rlrun.envs import make_env
    from rlrun.libraries import rsl_rl
    from rlrun.libraries.rsl_rl_config import CODE_NAMES

    path = data.draw(st.sampled_from(RSL_RL_KEYS))
    config = placed(shipped("rsl_rl"), path, data.draw(st.one_of(st.sampled_from(WORDS), expressions(marker))))
    try:
        check_config(config, CODE_NAMES, library="rsl_rl")
    except UnsafeConfig:
        assert not marker.exists()
        return
    rsl_rl_resolved.clear()
    env = make_env(PENDULUM, 2)
    try:
        rsl_rl._runner(env, copy.deepcopy(config), None, "cpu", 0)
    except Exception:  # a name RSL-RL's own tables refuse (an activation spelt otherwise): nothing was imported
        pass
    finally:
        env.close()
    allowed = {name for rule in CODE_NAMES.values() if isinstance(rule, tuple) for name in rule}
    assert set(rsl_rl_resolved) <= allowed, rsl_rl_resolved
    assert not marker.exists()


RL_GAMES_KEYS = (
    ("params", "network", "name"),
    ("params", "model", "name"),
    ("params", "network", "mlp", "activation"),
    ("params", "network", "mlp", "initializer", "name"),
    ("params", "network", "space", "continuous", "mu_activation"),
)


@pytest.fixture
def rl_games_created(monkeypatch):
    """The names rl_games' factories (agents, models, networks, activations, initialisers) are asked for."""
    pytest.importorskip("rl_games")
    from rl_games.common import object_factory

    created: list[Any] = []
    create = object_factory.ObjectFactory.create

    def recorded(self, name, **kwargs):
        created.append(name)
        return create(self, name, **kwargs)

    monkeypatch.setattr(object_factory.ObjectFactory, "create", recorded)
    return created


@PROPERTY
@given(data=st.data())
def test_rl_games_factories_get_no_name_outside_rlruns_table(data, marker, rl_games_created):
    from rl_games.algos_torch import model_builder

    from rlrun.libraries.rl_games_config import CODE_NAMES

    path = data.draw(st.sampled_from(RL_GAMES_KEYS))
    config = placed(shipped("rl_games"), path, data.draw(st.one_of(st.sampled_from(WORDS), expressions(marker))))
    try:
        check_config(config, CODE_NAMES, library="rl_games")
    except UnsafeConfig:
        return
    rl_games_created.clear()
    params = config["params"]
    params["model"]["name"] = {"auto": "continuous_a2c_logstd"}.get(params["model"]["name"], params["model"]["name"])
    params["network"]["space"] = {"continuous": params["network"]["space"]["continuous"]}
    shapes = {"actions_num": 1, "input_shape": (3,), "num_seqs": 2, "value_size": 1}
    with contextlib.suppress(Exception):  # a model that does not fit this network: what counts is the names asked for
        model_builder.ModelBuilder().load(params).build({**shapes, "normalize_value": False, "normalize_input": False})
    allowed = {name for rule in CODE_NAMES.values() if isinstance(rule, tuple) for name in rule}
    assert set(rl_games_created) <= allowed, rl_games_created
    assert not marker.exists()


@pytest.mark.parametrize("library", list(ALGORITHMS))
@PROPERTY
@given(data=st.data())
def test_a_string_the_checker_accepts_at_a_table_key_is_a_name_of_the_table(library, data):
    """For every library (TorchRL and SB3 build their objects in rlrun's adapter): what passes at a key that
    selects code is one of the names listed there."""
    names, source = tables(library)
    config = shipped(library)
    keys = [path for path in _scalar_paths(config) if isinstance(rule_for(path, names), tuple)]
    path = data.draw(st.sampled_from(keys))
    value = data.draw(st.one_of(st.sampled_from(WORDS), st.text(max_size=16)))
    try:
        check_config(placed(config, path, value), names, source, library=library)
    except UnsafeConfig:
        return
    assert value in rule_for(path, names)


def _scalar_paths(config: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(config, dict):
        return [found for key, value in config.items() for found in _scalar_paths(value, (*path, key))]
    if isinstance(config, list):
        return [found for index, value in enumerate(config) for found in _scalar_paths(value, (*path, index))]
    return [path]


def test_the_payload_module_would_run_if_imported(marker):
    """The marker is a real witness: importing the payload module writes it (then it is removed again)."""
    import importlib

    module = importlib.import_module(PAYLOAD)
    try:
        assert marker.exists()
    finally:
        marker.unlink()
        sys.modules.pop(module.__name__, None)


def test_a_refusal_quotes_a_value_with_newlines_escaped_on_its_one_line():
    """A value that reads as text but holds newlines is quoted, escaped, in the one line of the refusal."""
    names, source = tables("skrl")
    text = textwrap.dedent("""\
        ACTIONS
        import os""")
    with pytest.raises(UnsafeConfig) as refused:
        check_config(placed(shipped("skrl"), ("models", "policy", "output"), text), names, source)
    assert "\n" not in str(refused.value) and "\\n" in str(refused.value)
