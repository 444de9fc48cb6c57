"""The parts that need no service: backoff, the arguments check."""

from __future__ import annotations

from pathlib import Path

from dfc_device import backoff_delay, validate


def test_backoff_grows_exponentially_is_jittered_within_the_upper_half_and_stops_at_the_maximum() -> None:
    assert backoff_delay(0, 0.25, 30, lambda: 0) == 0.125
    assert backoff_delay(0, 0.25, 30, lambda: 1) == 0.25
    assert backoff_delay(3, 0.25, 30, lambda: 0.5) == 1.5
    assert backoff_delay(40, 0.25, 30, lambda: 1) == 30


SCHEMA = {
    "type": "object",
    "properties": {
        "celsius": {"type": "number", "minimum": 5, "maximum": 30, "multipleOf": 0.5},
        "mode": {"enum": ["heat", "off"]},
        "zones": {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
    },
    "required": ["celsius"],
    "additionalProperties": False,
}


def test_arguments_inside_the_manifest_schema_pass() -> None:
    assert validate({"celsius": 22.5, "mode": "heat", "zones": [1, 2]}, SCHEMA) == []


def test_arguments_outside_the_manifest_schema_are_named_by_path() -> None:
    assert validate({"celsius": 22.2, "extra": 1}, SCHEMA) == ["args.celsius: must be a multiple of 0.5", "args.extra: not allowed"]
    assert validate({"mode": "cool"}, SCHEMA) == ["args.celsius: required", "args.mode: must be one of ['heat', 'off']"]
    assert validate({"celsius": True}, SCHEMA) == ["args.celsius: must be number"]
    assert validate({"celsius": 40, "zones": [1.5]}, SCHEMA) == ["args.celsius: must be <= 30", "args.zones[0]: must be integer"]
    assert validate([], SCHEMA) == ["args: must be object"]


def test_the_readme_shows_the_example_as_it_is() -> None:
    package = Path(__file__).resolve().parents[1]
    example = (package / "examples/thermostat.py").read_text(encoding="utf-8")
    assert f"```python\n{example}```" in (package / "README.md").read_text(encoding="utf-8")


def test_split_setup_token_reads_the_qr_text_and_leaves_a_bare_token_alone() -> None:
    from dfc_device import split_setup_token

    assert split_setup_token("https://dfc.example.com/#setup-token=dfc_setup_a%2Bb") == ("https://dfc.example.com", "dfc_setup_a+b")
    assert split_setup_token("http://127.0.0.1:8787#setup-token=dfc_setup_x") == ("http://127.0.0.1:8787", "dfc_setup_x")
    assert split_setup_token("dfc_setup_x") == (None, "dfc_setup_x")
