"""conflict-spec 6.2 and 6.3: OptimisticTransactionSuite and DeltaWithNewTransactionSuite."""

from __future__ import annotations

from deltatx.errors import ConcurrentAppendException as CA
from deltatx.errors import ConcurrentDeleteDeleteException as CDD
from deltatx.errors import ConcurrentDeleteReadException as CDR
from deltatx.errors import ConcurrentTransactionException as CT
from deltatx.errors import MetadataChangedException as MC
from deltatx.errors import ProtocolChangedException as PC
from deltatx.kernel.actions import AddFile, RemoveFile
from deltatx.kernel.operations import OperationName

from .conflict_harness import (
    SEED_CDD,
    SEED_CDR,
    SEED_CT,
    SEED_DOWNGRADE,
    SEED_META,
    SEED_PARTITIONS,
    SEED_PC,
    SEED_WS_BLIND,
    Case,
    Table,
    add,
    app,
    dpo,
    meta,
    metadata,
    protocol,
    rm,
    scan,
    schema,
    txn,
    value_stats,
    whole,
    win,
)

OK = None
TRUNCATE = OperationName.TRUNCATE

DEFAULT = Table(schema(id="long", value="long"))  # the `check(...)` harness: unpartitioned
X_SCHEMA = schema(x="integer", value="long")


def X(*files: AddFile) -> Table:
    return Table(X_SCHEMA, ("x",), files)


def xf(name: str, x: int) -> AddFile:
    return add(name, {"x": str(x)})


# --- 6.2 OptimisticTransactionSuite (B reads nothing, op TRUNCATE; A commits with TRUNCATE) ---

A_DEF, B_DEF = add("a"), add("b")

SUITE = [
    Case(
        "OT01",
        "seed 000: INSERT vs INSERT cannot conflict",
        DEFAULT,
        (meta(),),
        (B_DEF,),
        (win(A_DEF, op="TRUNCATE"),),
        (OK, OK, OK),
        op=TRUNCATE,
    ),
    Case(
        "OT02",
        SEED_CT,
        DEFAULT,
        (app("t1"),),
        (),
        (win(txn("t2", 0), op="TRUNCATE"),),
        (OK, OK, OK),
        op=TRUNCATE,
    ),
    Case(
        "OT03",
        SEED_PARTITIONS,
        X(xf("a", 2)),
        (scan("x = 1"),),
        (),
        (win(rm("a"), op="TRUNCATE"),),
        (OK, OK, OK),
        op=TRUNCATE,
    ),
    Case(
        "OT04",
        SEED_PARTITIONS,
        X(),
        (scan("x = 1"),),
        (),
        (win(xf("a", 2), op="TRUNCATE"),),
        (OK, OK, OK),
        op=TRUNCATE,
    ),
    Case(
        "OT05",
        SEED_CDD,
        DEFAULT,
        (),
        (rm("a"),),
        (win(rm("a"), op="TRUNCATE"),),
        (CDD, CDD, CDD),
        op=TRUNCATE,
        attrs={"partition_values": None, "file": "a"},
    ),
    Case(
        "OT06",
        SEED_WS_BLIND,
        X(),
        (scan("x = 1"),),
        (xf("b", 1),),
        (win(xf("a", 1), op="TRUNCATE"),),
        (CA, OK, OK),
        op=TRUNCATE,
        read_version=0,
        first_winner_version=1,
        attrs={
            "winning_operation": "TRUNCATE",
            "winning_version": 1,
            "partition_values": {"x": "1"},
        },
    ),
    Case(
        "OT07",
        SEED_DOWNGRADE,
        X(),
        (scan("x = 1"),),
        (),
        (win(xf("a", 1), op="TRUNCATE"),),
        (OK, OK, OK),
        op=TRUNCATE,
    ),
    Case(
        "OT08",
        SEED_WS_BLIND,
        X(),
        (scan("x = 1"), scan("x = 2")),
        (xf("b", 2),),
        (win(xf("a", 1), op="TRUNCATE"),),
        (CA, OK, OK),
        op=TRUNCATE,
    ),
    Case(
        "OT09",
        SEED_CDR,
        X(xf("a", 1)),
        (scan("x = 1"),),
        (),
        (win(rm("a"), op="TRUNCATE"),),
        (CDR, CDR, CDR),
        op=TRUNCATE,
        attrs={
            "winning_operation": "TRUNCATE",
            "winning_version": 2,
            "partition_values": {"x": "1"},
        },
    ),
    Case(
        "OT10",
        SEED_META,
        DEFAULT,
        (meta(),),
        (),
        (win(metadata(), op="TRUNCATE"),),
        (MC, MC, MC),
        op=TRUNCATE,
    ),
    Case(
        "OT11",
        SEED_CT,
        DEFAULT,
        (app("t1"),),
        (),
        (win(txn("t1", 0), op="TRUNCATE"),),
        (CT, CT, CT),
        op=TRUNCATE,
    ),
    Case(
        "OT12",
        SEED_PC,
        DEFAULT,
        (meta(),),
        (protocol(3, 7),),
        (win(protocol(3, 7), op="TRUNCATE"),),
        (PC, PC, PC),
        op=TRUNCATE,
    ),
    Case(
        "OT13",
        SEED_WS_BLIND,
        X(xf("a", 2)),
        (scan("x = 1"), whole()),
        (xf("c", 4),),
        (win(xf("b", 3), op="TRUNCATE"),),
        (CA, OK, OK),
        op=TRUNCATE,
    ),
    Case(
        "OT14",
        SEED_CDR + " (whole-table read)",
        Table(DEFAULT.schema, (), (A_DEF,)),
        (whole(),),
        (B_DEF,),
        (win(rm("a"), op="TRUNCATE"),),
        (CDR, CDR, CDR),
        op=TRUNCATE,
        attrs={"partition_values": None},
    ),
]

PART_SCHEMA = schema(part="integer", value="long")
PV_SCHEMA = schema(partitionValues="integer", value="long")


def dpo_table(col: str) -> Table:
    s = PART_SCHEMA if col == "part" else PV_SCHEMA
    return Table(s, (col,), (add(f"{col}=0/a", {col: "0"}), add(f"{col}=1/b", {col: "1"})))


for col in ("part", "partitionValues"):
    a0 = {col: "0"}
    SUITE += [
        Case(
            f"OT15[{col}]",
            SEED_WS_BLIND + " (dynamic partition overwrite records a partition predicate)",
            dpo_table(col),
            (dpo(f"{col} IN (0)"),),
            (rm(f"{col}=0/a", a0), add(f"{col}=0/x", a0)),
            (win(add(f"{col}=0/y", a0)),),
            (CA, OK, OK),
            attrs={
                "winning_operation": "Manual Update",
                "winning_version": 2,
                "partition_values": a0,
            },
        ),
        Case(
            f"OT16[{col}]",
            SEED_PARTITIONS,
            dpo_table(col),
            (dpo(f"{col} IN (0)"),),
            (rm(f"{col}=0/a", a0), add(f"{col}=0/x", a0)),
            (win(add(f"{col}=1/y", {col: "1"})),),
            (OK, OK, OK),
        ),
        Case(
            f"OT17[{col}]",
            SEED_CDD + " (DPO records no read files, so not CDR)",
            dpo_table(col),
            (dpo(f"{col} IN (0)"),),
            (rm(f"{col}=0/a", a0), add(f"{col}=0/x", a0)),
            (win(rm(f"{col}=0/a", a0)),),
            (CDD, CDD, CDD),
            attrs={"partition_values": a0, "winning_version": 2},
        ),
        Case(
            f"OT18[{col}]",
            SEED_PARTITIONS,
            dpo_table(col),
            (dpo(f"{col} IN (0)"),),
            (rm(f"{col}=0/a", a0), add(f"{col}=0/x", a0)),
            (win(rm(f"{col}=1/b", {col: "1"})),),
            (OK, OK, OK),
        ),
    ]

SUITE.append(
    Case(
        "OT20",
        "two empty commits from one version both land",
        DEFAULT,
        (),
        (),
        (win(op="Manual Update"),),
        (OK, OK, OK),
    )
)


# --- 6.3 DeltaWithNewTransactionSuite (log level) --------------------------------------------

K_SCHEMA = schema(key="integer", value="integer")


def kf(k: int, v: int) -> AddFile:
    return add(f"key={k}/f", {"key": str(k)}, stats=value_stats(v, v))


def kr(k: int) -> RemoveFile:
    return rm(f"key={k}/f", {"key": str(k)})


K = Table(K_SCHEMA, ("key",), (kf(1, 1), kf(2, 2), kf(3, 3)))

NEW_TXN = [
    Case(
        "NT01",
        SEED_CDR + " (full scan, empty commit is auto-SI)",
        K,
        (scan(),),
        (),
        (win(kr(1), op="DELETE"),),
        (CDR, CDR, CDR),
    ),
    Case("NT02", SEED_CDR, K, (scan("key = 1"),), (), (win(kr(1), op="DELETE"),), (CDR, CDR, CDR)),
    Case(
        "NT03",
        SEED_CDR + " (data skipping keeps one file)",
        K,
        (scan("value = 1"),),
        (),
        (win(kr(1), op="DELETE"),),
        (CDR, CDR, CDR),
    ),
    Case(
        "NT04",
        SEED_PARTITIONS,
        K,
        (scan("key = 1"),),
        (),
        (win(kr(2), op="DELETE"), win(add("key=4/g", {"key": "4"}), op="WRITE")),
        (OK, OK, OK),
    ),
    Case(
        "NT05",
        SEED_CDR + " (limit scans the table)",
        K,
        (scan(),),
        (),
        (win(kr(1), kr(2), kr(3), op="DELETE"),),
        (CDR, CDR, CDR),
    ),
    Case(
        "NT06",
        SEED_CDR + "; auto-SI leaves only C8",
        K,
        (scan(),),
        (),
        (win(kr(3), add("key=2/u", {"key": "2"}), op="UPDATE", read=True),),
        (CDR, CDR, CDR),
    ),
]
