"""WinningCommit's views of a winner's actions, and what the pending side carries."""

from __future__ import annotations

from deltatx.kernel.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    ProtocolAction,
    RemoveFile,
    SetTransaction,
)
from deltatx.kernel.commits import WinningCommit


def test_winning_commit_views_take_each_kind_in_order() -> None:
    def add(path: str) -> AddFile:
        return AddFile(
            path=path, partition_values={}, size=1, modification_time=0, data_change=True
        )

    actions: list[Action] = [
        CommitInfo(operation="WRITE", is_blind_append=True),
        add("a"),
        RemoveFile(path="r"),
        AddCDCFile(path="c", partition_values={}, size=1),
        SetTransaction(app_id="app", version=1),
        DomainMetadata(domain="d", configuration="{}"),
        ProtocolAction(1, 2),
        Metadata(id="m", schema_string='{"type":"struct","fields":[]}'),
        add("b"),
        CommitInfo(operation="LATER"),
        ProtocolAction(3, 7),
        Metadata(id="later", schema_string='{"type":"struct","fields":[]}'),
    ]
    w = WinningCommit(version=1, actions=tuple(actions))
    # The first commitInfo, protocol and metaData count, as a reader of the log takes them.
    assert w.operation == "WRITE" and w.is_blind_append
    assert w.protocol == ProtocolAction(1, 2)
    assert w.metadata is not None and w.metadata.id == "m"
    assert [a.path for a in w.adds] == ["a", "b"]
    assert [r.path for r in w.removes] == ["r"]
    assert [t.app_id for t in w.txns] == ["app"]
    assert [d.domain for d in w.domains] == ["d"]
    assert not w._only_adds
    only = WinningCommit(version=2, actions=(actions[0], actions[1], actions[3]))
    assert only._only_adds and only.adds == (actions[1],)
    assert WinningCommit(version=3, actions=())._only_adds


def test_a_winner_without_commit_info_is_a_transaction_and_not_blind() -> None:
    bare = WinningCommit(version=4, actions=(RemoveFile(path="r"),))
    assert bare.commit_info is None
    assert bare.operation == "TRANSACTION"
    assert not bare.is_blind_append
    # Only an explicit isBlindAppend=true makes a blind append; a missing flag does not.
    unflagged = WinningCommit(version=5, actions=(CommitInfo(operation="WRITE"),))
    assert unflagged.operation == "WRITE" and not unflagged.is_blind_append
    flagged = WinningCommit(
        version=6, actions=(CommitInfo(operation="WRITE", is_blind_append=False),)
    )
    assert not flagged.is_blind_append
