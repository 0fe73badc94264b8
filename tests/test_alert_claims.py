"""The alert claim protocol, with two scans interleaved by hand at the moments that matter."""

from __future__ import annotations

from trackerhealth.writers.alerts import TrackerClaim, format_ids, parse_ids

IDS = ["nonfinite", "vanishing-gradients"]


class Tag:
    """The one bookkeeping value on a run, as the tracker holds it."""

    def __init__(self, value: str = ""):
        self.value = value

    def read(self) -> str:
        return self.value

    def write(self, value: str) -> None:
        self.value = value


def test_a_scan_that_reads_during_the_others_settle_stands_back():
    tag = Tag()
    a, b = TrackerClaim(tag.read, tag.write), TrackerClaim(tag.read, tag.write, sleep=lambda s: None)
    seen = {}
    a.sleep = lambda s: seen.update(b=b(IDS))  # B runs entirely while A settles
    won_a, taken_a = a(IDS)
    won_b, taken_b = seen["b"]
    assert won_a == set(IDS) and not taken_a
    assert won_b == set() and taken_b == {i: a.token for i in IDS}


def test_both_read_before_either_writes_exactly_one_wins():
    tag = Tag()
    a, b = TrackerClaim(tag.read, tag.write), TrackerClaim(tag.read, tag.write, sleep=lambda s: None)
    stale = [""]  # B's first read is from before A's write landed; later ones are live
    b.read = lambda: stale.pop() if stale else tag.read()
    seen = {}
    a.sleep = lambda s: seen.update(b=b(IDS))  # B read "" before A's write landed, then wrote over it
    won_a, taken_a = a(IDS)
    won_b, _ = seen["b"]
    assert won_b == set(IDS) and won_a == set()  # the last writer wins, and both see that
    assert taken_a == {i: b.token for i in IDS}


def test_records_parse_with_and_without_tokens():
    assert parse_ids("nonfinite@3f9c,overfitting") == {"nonfinite", "overfitting"}
    assert format_ids({"overfitting", "nonfinite@3f9c"}) == "nonfinite@3f9c,overfitting"


def test_a_scan_that_starts_during_the_others_settle_keeps_its_claim_on_record():
    """B lists the run while A's claim is pending: B must not send, and B's final record must not
    erase A's token (written back bare, A's re-read would say A lost: nobody would alert)."""
    from trackerhealth.schema import CRITICAL, Finding, HealthReport, RunRef
    from trackerhealth.writers.alerts import deliver, parse_entries

    report = HealthReport(RunRef("mlflow", "e", "r1"), 0.0, (), (Finding("nonfinite", CRITICAL, "t", "m"),),
                          loss_key="loss")
    tag = Tag()
    a = TrackerClaim(tag.read, tag.write)
    sent_by_b: list[str] = []

    def b_scans_now(_seconds):  # B's whole write, between A's claim and A's re-read
        sent, still = deliver(report, parse_entries(tag.read()), False, lambda f: sent_by_b.append(f.id) or True)
        tag.write(format_ids(still))

    a.sleep = b_scans_now
    sent_by_a, _ = deliver(report, parse_entries(""), False, lambda f: True, a)
    assert sent_by_a == ["nonfinite"] and sent_by_b == []  # exactly one alert, A's
