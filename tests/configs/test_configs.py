"""Agent configurations and `agent.*=` / `env.*=` overrides."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rlrun import configs
from rlrun.configs import loading
from rlrun.errors import InvalidArgument, UnknownConfigKey

CONFIG = {"num_envs": 8, "algorithm": {"learning_rate": 1e-3, "schedule": "adaptive"}, "hidden": [32], "flag": True}


def test_overrides_are_typed_like_yaml_and_nested_keys_are_reached_with_dots():
    config = configs.apply_overrides(
        CONFIG, ["algorithm.learning_rate=3e-4", "hidden=[64,64]", "flag=false", "num_envs=16"], scope="agent"
    )
    assert config == {
        "num_envs": 16,
        "algorithm": {"learning_rate": 3e-4, "schedule": "adaptive"},
        "hidden": [64, 64],
        "flag": False,
    }
    assert CONFIG["algorithm"]["learning_rate"] == 1e-3  # the original is untouched


def test_an_unknown_key_names_the_nearest_valid_one():
    with pytest.raises(UnknownConfigKey) as raised:
        configs.apply_overrides(CONFIG, ["algorithm.learning_rat=1"], scope="agent")
    assert str(raised.value) == (
        "unknown agent configuration key 'agent.algorithm.learning_rat'. Did you mean 'agent.algorithm.learning_rate'?"
    )
    with pytest.raises(UnknownConfigKey, match=re.escape("Did you mean 'agent.algorithm.learning_rate'")):
        configs.apply_overrides(CONFIG, ["learning_rate=1"], scope="agent")
    with pytest.raises(UnknownConfigKey, match=re.escape("Did you mean 'agent.algorithm.learning_rate'")):
        configs.apply_overrides(CONFIG, ["algoritm.learning_rate=1"], scope="agent")  # the section misspelt


@pytest.mark.parametrize("override", ["hidden.0=32", "hidden.x.y=1"])
def test_an_override_into_a_list_names_the_list_and_the_fix(override):
    with pytest.raises(InvalidArgument) as raised:
        configs.apply_overrides(CONFIG, [override], scope="agent")
    assert str(raised.value) == (
        f"override 'agent.{override}' reaches into agent.hidden, a list; pass the whole list, e.g. agent.hidden=[32]."
    )


def test_an_unknown_key_with_nothing_close_lists_the_keys_of_its_section():
    with pytest.raises(UnknownConfigKey) as raised:
        configs.apply_overrides(CONFIG, ["zzz=1"], scope="agent")
    assert str(raised.value) == (
        "unknown agent configuration key 'agent.zzz'. Keys of agent: num_envs, algorithm, hidden, flag."
    )
    with pytest.raises(UnknownConfigKey, match=re.escape("Keys of agent.algorithm: learning_rate, schedule.")):
        configs.apply_overrides(CONFIG, ["algorithm.zzz=1"], scope="agent")
    with pytest.raises(UnknownConfigKey, match=re.escape("Keys of agent: num_envs, algorithm, hidden, flag.")):
        configs.apply_overrides(CONFIG, ["zzz.y=1"], scope="agent")  # no such section: the level above
    many = {f"key{i}": i for i in range(15)}
    with pytest.raises(UnknownConfigKey, match=re.escape("key11 and 3 more.")):
        configs.apply_overrides(many, ["zzz=1"], scope="env")


@pytest.mark.parametrize(
    ("override", "expected"),
    [("num_envs=2.5", "an integer"), ("algorithm.learning_rate=fast", "a number"), ("flag=1", "true or false")],
)
def test_a_value_of_the_wrong_type_is_refused(override, expected):
    with pytest.raises(InvalidArgument, match=expected):
        configs.apply_overrides(CONFIG, [override], scope="agent")


@pytest.mark.parametrize("word", ["lr=1", "agent.lr", "policy.x=1", "agent.=1"])
def test_words_that_are_not_scoped_overrides_are_refused(word):
    with pytest.raises(InvalidArgument, match=re.escape("agent.<key>=<value>")):
        configs.split_overrides([word])


def test_tuned_configurations_are_found_and_others_fall_back_to_the_default():
    assert configs.has_tuned_config("rsl_rl", "ppo", "rlrun/CartPoleContinuous-v1")
    assert not configs.has_tuned_config("rsl_rl", "ppo", "HalfCheetah-v5")
    tuned = configs.load_agent_config("rsl_rl", "ppo", "rlrun/CartPoleContinuous-v1")
    generic = configs.load_agent_config("rsl_rl", "ppo", "HalfCheetah-v5")
    assert tuned["num_envs"] == 512 and generic["actor"]["class_name"] == "MLPModel"
    assert set(configs.RUN_KEYS) <= set(tuned) and set(configs.RUN_KEYS) <= set(generic)


@pytest.mark.parametrize(
    ("word", "fragment"),
    [
        ("actor.hidden_dims=abc", "expects a list"),
        ("actor.hidden_dims=[a,b]", "expects a list of integers"),
        ("actor.hidden_dims=[16,", "is not a YAML value"),
        ("algorithm.learning_rate=-1", "a learning rate must be positive"),
        ("algorithm.learning_rate=0", "a learning rate must be positive"),
        ("actor=3", "expects a mapping"),
    ],
)
def test_an_override_the_library_would_reject_is_refused_with_the_key(word, fragment):
    from rlrun.configs import apply_overrides, load_agent_config
    from rlrun.errors import InvalidArgument

    config = load_agent_config("rsl_rl", "ppo", "rlrun/Pendulum-v1")
    with pytest.raises(InvalidArgument, match=fragment) as caught:
        apply_overrides(config, [word], scope="agent")
    assert f"agent.{word.split('=')[0]}" in str(caught.value) and "\n" not in str(caught.value)


def test_overrides_of_the_right_shape_still_apply():
    from rlrun.configs import apply_overrides, load_agent_config

    config = load_agent_config("rsl_rl", "ppo", "rlrun/Pendulum-v1")
    changed = apply_overrides(config, ["actor.hidden_dims=[8,8,8]", "algorithm.learning_rate=1e-4"], scope="agent")
    assert changed["actor"]["hidden_dims"] == [8, 8, 8] and changed["algorithm"]["learning_rate"] == 1e-4


def test_a_yaml_file_is_parsed_once_per_text_and_every_caller_gets_its_own_configuration(tmp_path, monkeypatch):
    parses = []
    parse_yaml = loading.parse_yaml  # rlrun.trust.limits's bounded parser
    monkeypatch.setattr(loading, "parse_yaml", lambda text, what: parses.append(text) or parse_yaml(text, what))
    monkeypatch.setattr(loading, "_PARSED", {})  # the cache lives where `parsed_yaml` reads it
    path = tmp_path / "config.yaml"
    path.write_text("a: 1\nb: [1, 2]\n", encoding="utf-8")
    assert configs.parsed_yaml(path) == {"a": 1, "b": [1, 2]} and configs.parsed_yaml(path) is configs.parsed_yaml(path)
    assert len(parses) == 1
    path.write_text("a: 2\n", encoding="utf-8")  # an edited file is read again
    assert configs.parsed_yaml(path) == {"a": 2} and len(parses) == 2

    first = configs.load_agent_config("rsl_rl", "ppo", "rlrun/CartPoleContinuous-v1")
    first["actor"]["hidden_dims"].append(999)
    second = configs.load_agent_config("rsl_rl", "ppo", "rlrun/CartPoleContinuous-v1")
    assert second["actor"]["hidden_dims"] == [32, 32] and len(parses) == 3


def test_yaml_text_is_safe_dumps_for_every_shipped_configuration():
    """`to_yaml` uses libyaml's emitter when it can: the text must be `yaml.safe_dump`'s, which params files had."""
    import yaml

    shipped = sorted(Path(configs.__file__).parent.rglob("*.yaml"))
    assert len(shipped) > 10
    for path in shipped:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert configs.to_yaml(config) == yaml.safe_dump(config, sort_keys=False), path


def test_overrides_apply_in_their_order_a_later_one_winning():
    """All overrides go through one merge; the result is that of applying them one after another."""
    config = {"a": {"b": 1, "c": [1, 2]}, "lr": 0.1, "n": 3}
    words = ["a={b: 5, c: [3]}", "a.b=7", "lr=0.2", "lr=0.3"]
    assert configs.apply_overrides(config, words, scope="agent") == {"a": {"b": 7, "c": [3]}, "lr": 0.3, "n": 3}
    words = ["a.c=[4,5]", "a={b: 2, c: [9]}"]
    assert configs.apply_overrides(config, words, scope="agent") == {"a": {"b": 2, "c": [9]}, "lr": 0.1, "n": 3}
    with pytest.raises(UnknownConfigKey, match=r"'agent\.a\.d'"):  # the one at fault is named
        configs.apply_overrides(config, ["lr=0.2", "a.d=1"], scope="agent")


_NAMES = st.sampled_from(["a", "b", "lr", "gamma", "net"])
_LEAVES = st.one_of(st.none(), st.integers(-3, 3), st.lists(st.integers(0, 3), max_size=2))
_CONFIGS = st.recursive(_LEAVES, lambda inner: st.dictionaries(_NAMES, inner, max_size=3), max_leaves=8).filter(
    lambda value: isinstance(value, dict)
)
_KEYS = st.lists(st.one_of(_NAMES, st.sampled_from(["0", "a[0]", ""])), min_size=1, max_size=3).map(".".join)


def _outcome(config, dotlist):
    try:
        return configs.apply_overrides(config, dotlist, scope="agent")
    except (InvalidArgument, UnknownConfigKey) as error:
        return type(error), str(error)


@settings(max_examples=150, deadline=None)
@given(_CONFIGS, st.lists(st.tuples(_KEYS, st.sampled_from(["1", "null", "[2]"])), min_size=1, max_size=2))
@example(config={}, pairs=[("a", "[2]"), ("a.a", "1")])  # OmegaConf's from_dotlist raised a bare ValueError
@example(config={"a": None}, pairs=[("a", "[2]"), ("a.a", "1")])
def test_a_key_refused_from_the_data_is_refused_as_omegaconf_refuses_it(config, pairs):
    """Unknown keys are answered before OmegaConf is imported; the outcome (value or the one line) must be what
    OmegaConf's own struct check gives for every configuration and override."""
    from rlrun.configs import overrides

    dotlist = [f"{key}={value}" for key, value in pairs]
    fast = _outcome(config, dotlist)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(overrides, "_absent", lambda config, key: False)
        assert _outcome(config, dotlist) == fast


def test_a_mistyped_key_is_answered_without_importing_omegaconf():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from rlrun.configs import apply_overrides\n"
        "try:\n"
        "    apply_overrides({'algorithm': {'gamma': 0.99}}, ['algorithm.gama=0.9'], scope='agent')\n"
        "except Exception as error:\n"
        "    print(type(error).__name__, 'omegaconf' in sys.modules, error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("UnknownConfigKey False ") and "Did you mean 'agent.algorithm.gamma'?" in out
