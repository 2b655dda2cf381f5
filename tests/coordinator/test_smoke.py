from samsa.coordinator import GroupState

from .harness import Ctx


def test_two_members_reach_stable_and_replay() -> None:
    ctx = Ctx()
    _ids, gen = ctx.stable_group(2)
    assert gen == 1
    assert ctx.state() is GroupState.STABLE
    ctx.check_replay()
