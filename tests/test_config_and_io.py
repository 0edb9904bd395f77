import json
import os

import pytest
from pydantic import BaseModel, ConfigDict

from rlsim.config_loader import apply_overrides, load_config
from rlsim.errors import ConfigError, RlsimError
from rlsim.io import atomic_write_json
from rlsim.registry import Registry


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = 1


class Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    inner: Inner = Inner()


def test_all_config_errors_are_reported_together(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("inner:\n  size: big\n  colour: red\n")
    with pytest.raises(ConfigError) as err:
        load_config(Cfg, path)
    assert len(err.value.errors) == 3  # name missing, size not int, colour unknown
    text = str(err.value)
    assert "name" in text and "inner.size" in text and "inner.colour" in text


def test_overrides_parse_yaml_values():
    data = apply_overrides({"inner": {"size": 1}}, ["inner.size=4", "name=x", "new.list=[1, 2]"])
    assert data == {"inner": {"size": 4}, "name": "x", "new": {"list": [1, 2]}}
    with pytest.raises(ConfigError, match="key.path=value"):
        apply_overrides({}, ["novalue"])


def test_missing_config_file_names_the_fix(tmp_path):
    with pytest.raises(RlsimError, match="configs/default.yaml"):
        load_config(Cfg, tmp_path / "nope.yaml")


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    atomic_write_json(target, {"a": 1})
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # readable like any file the user writes

    def interrupted(*_args):  # the process dies after writing the temp file, before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_json(target, {"a": 2, "big": "x" * 100_000})
    assert json.loads(target.read_text()) == {"a": 1}  # old content survives the failed write
    assert os.listdir(tmp_path) == ["r.json"]  # and no temp file is left behind


def test_registry_is_idempotent_and_lists_names():
    reg: Registry = Registry("thing")

    @reg.register("a")
    def a():
        pass

    reg.register("a")(a)  # re-import in a worker: fine
    with pytest.raises(ValueError):
        reg.register("a")(lambda: None)
    with pytest.raises(RlsimError, match="valid names: a"):
        reg.get("b")


def test_a_validators_own_message_is_shown_without_pydantics_prefix() -> None:
    from rlsim.config_loader import describe_error

    error = {"type": "value_error", "loc": ("reward", "url"), "msg": "Value error, 'ftp://x' is not a URL",
             "input": "ftp://x"}  # fmt: skip
    assert describe_error(error) == "reward.url: 'ftp://x' is not a URL (got 'ftp://x')"
