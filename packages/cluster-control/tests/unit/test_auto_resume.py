"""The Coordinator's auto-resume step: paced, and only through a repository that can resume."""

from __future__ import annotations

from ql3_cluster_control.coordinator._auto_resume import AutoResume, PauseResumer


class _Repository:
    """Counts probes; each finds `found` spans to resume."""

    def __init__(self, found: int) -> None:
        self.found = found
        self.probes = 0

    def resume_expired_pauses(self) -> int:
        self.probes += 1
        return self.found


def test_the_first_step_probes_and_the_next_waits_for_the_pace() -> None:
    """One probe, then none until `every_s` passed (monotonic); resumed spans are counted."""
    repository = _Repository(found=2)
    assert isinstance(repository, PauseResumer)
    pacing = AutoResume(every_s=3600.0)
    assert pacing.step(repository) == 2
    assert pacing.step(repository) == 0
    assert (repository.probes, pacing.resumed) == (1, 2)
    eager = AutoResume(every_s=0.0)
    assert eager.step(repository) == 2
    assert eager.step(repository) == 2
    assert repository.probes == 3


def test_a_repository_without_the_probe_is_left_alone() -> None:
    """A test double of the claim protocol alone (no auto-resume) is never probed."""
    assert AutoResume(every_s=0.0).step(object()) == 0
