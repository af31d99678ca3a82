"""The signature as an object: named fields, today's string byte for byte, the fields that differ."""

from __future__ import annotations

import pytest

from full_metric.result import Signature, make_signature, signature_differences

SETTINGS = dict(model="facebook/blenderbot-400M-distill", revision="abc123", dtype="float32", engine="packed",
                rendering="blenderbot", truncation="left:128", max_turns=50,
                follow_ups=("Not really relevant here.", "What are you trying to say?"), aggregation="sum", level="turn")


def test_the_string_is_the_one_signature_format_and_reads_back():
    text = make_signature(**SETTINGS)
    assert text.startswith("full:") and "|model:facebook/blenderbot-400M-distill@abc123|dtype:float32|engine:packed|" \
        "render:blenderbot|trunc:left:128|turns:50|fu:custom-2-" in text and text.endswith("|agg:sum|level:turn")
    assert "pos:" not in text
    parsed = Signature.parse(text)
    assert str(parsed) == text and parsed.truncation == "left:128" and parsed.max_turns == "50"
    with_praise = make_signature(**SETTINGS, positive_follow_ups=("Great answer!",))
    assert "|pos:custom-1-" in with_praise and str(Signature.parse(with_praise)) == with_praise
    assert "speakers:" not in text
    stripped = make_signature(**SETTINGS, strip_speaker_prefixes=True)
    assert stripped == text.replace("|trunc:", "|speakers:stripped|trunc:")
    assert str(Signature.parse(stripped)) == stripped and Signature.parse(stripped).speakers == "stripped"
    assert Signature.parse(stripped).differences(text) == ["speakers: stripped vs (none)"]


def test_the_golden_and_adapted_signatures_read_back_byte_for_byte():
    golden = ("full:0.1.0|model:tiny-blenderbot@sha256:ed42f23953ceffcd|dtype:float32|engine:packed|render:blenderbot|"
              "trunc:left-128|turns:50|fu:paper-5-f55a6ff1|agg:sum|level:turn")  # test_golden's, written out
    adapted = golden.replace("@sha256:ed42f23953ceffcd", "@sha256:0123456789abcdef+adapted:d123f0481b80b23e")
    for text in (golden, adapted):
        assert str(Signature.parse(text)) == text
    assert Signature.parse(adapted).model == "tiny-blenderbot@sha256:0123456789abcdef+adapted:d123f0481b80b23e"


def test_differences_name_each_field_that_differs():
    a = make_signature(**SETTINGS)
    b = make_signature(**{**SETTINGS, "dtype": "bfloat16", "aggregation": "mean"},
                       positive_follow_ups=("Great answer!",))
    diff = Signature.parse(a).differences(b)
    assert diff[0] == "dtype: float32 vs bfloat16" and diff[1].startswith("pos: (none) vs custom-1-")
    assert diff[2] == "agg: sum vs mean" and len(diff) == 3
    assert Signature.parse(a).differences(a) == []
    assert signature_differences(a, b) == "; ".join(diff)
    assert signature_differences("scored elsewhere", a) == f"'scored elsewhere' vs {a!r}"
    with pytest.raises(ValueError, match="not a FULL signature"):
        Signature.parse("full:1|model:x@y")


def test_differences_name_every_field_the_version_included():
    """Two signatures that differ in one field, for every field (the package version included), are
    told apart by that field's name; equal ones differ in nothing."""
    from full_metric.result import Signature

    text = ("full:0.1.0|model:m@sha256:abc|dtype:float32|engine:packed|render:chat_template|speakers:stripped|"
            "trunc:left-8184|turns:50|fu:paper-5-f55a6ff1|pos:none-0-0|agg:sum|level:turn")
    base = Signature.parse(text)
    assert not base.differences(Signature.parse(text))
    for part in text.split("|"):
        key, _, value = part.partition(":")
        changed = Signature.parse(text.replace(part, f"{key}:{value}x"))
        found = base.differences(changed)
        assert len(found) == 1 and found[0].startswith(f"{key}: ") and found[0].endswith("x"), (key, found)
