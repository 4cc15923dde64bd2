"""conflict-spec 6.1: delta-spark OptimisticTransactionLegacyTests, as log-level scenarios."""

from __future__ import annotations

from deltatx.errors import ConcurrentAppendException as CA
from deltatx.errors import ConcurrentDeleteDeleteException as CDD
from deltatx.errors import ConcurrentDeleteReadException as CDR
from deltatx.errors import ConcurrentTransactionException as CT
from deltatx.errors import MetadataChangedException as MC
from deltatx.kernel.actions import AddFile, RemoveFile
from deltatx.kernel.operations import OperationName

from .conflict_harness import (
    D3,
    SEED_CA,
    SEED_CDD,
    SEED_CDR,
    SEED_CT,
    SEED_DOWNGRADE,
    SEED_META,
    SEED_PARTITIONS,
    SEED_WS_BLIND,
    Case,
    Table,
    add,
    app,
    metadata,
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

# --- fixtures (conflict-spec section 6) ------------------------------------------------------

P_SCHEMA = schema(part="string", value="long", year="integer")


def p(n: int, name: str, *, dc: bool = True, stats: dict[str, object] | None = None) -> AddFile:
    return add(f"part={n}/{name}", {"part": str(n)}, dc=dc, stats=stats)


def pr(n: int, name: str, *, dc: bool = True) -> RemoveFile:
    return rm(f"part={n}/{name}", {"part": str(n)}, dc=dc)


def P(*files: AddFile) -> Table:
    return Table(P_SCHEMA, ("part",), files)


A_P1, B_P1, C_P1 = p(1, "a"), p(1, "b"), p(1, "c")
C_P2, D_P2, E_P3, F_P3, G_P4 = p(2, "c"), p(2, "d"), p(3, "e"), p(3, "f"), p(4, "g")

N_SCHEMA = schema(a="integer", b="integer", value="long")


def nf(a: int, b: int, name: str) -> AddFile:
    return add(f"a={a}/b={b}/{name}", {"a": str(a), "b": str(b)})


def nr(a: int, b: int, name: str, *, pv: bool = True) -> RemoveFile:
    return rm(f"a={a}/b={b}/{name}", {"a": str(a), "b": str(b)} if pv else {})


def N(*files: AddFile) -> Table:
    return Table(N_SCHEMA, ("a", "b"), files)


A_1_1, B_1_2, C_2_1, D_3_1 = nf(1, 1, "a"), nf(1, 2, "b"), nf(2, 1, "c"), nf(3, 1, "d")

DEFAULT = Table(schema(id="long", value="long"))  # the `check(...)` harness: unpartitioned
X_SCHEMA = schema(x="integer", value="long")


def X(*files: AddFile) -> Table:
    return Table(X_SCHEMA, ("x",), files)


def xf(name: str, x: int) -> AddFile:
    return add(name, {"x": str(x)})


# --- 6.1 OptimisticTransactionLegacyTests ---------------------------------------------------

LEGACY = [
    Case("LT01", SEED_META, P(), (), (A_P1,), (win(metadata(P())),), (MC, MC, MC)),
    Case("LT02", SEED_WS_BLIND, P(), (scan(),), (p(1, "b"),), (win(A_P1),), (CA, OK, OK)),
    Case(
        "LT03",
        "seed 000 table: INSERT vs anything cannot conflict",
        P(A_P1),
        (),
        (p(1, "c"),),
        (win(pr(1, "a"), p(1, "b"), read=True),),
        (OK, OK, OK),
    ),
    Case(
        "LT04",
        "empty winner never conflicts",
        P(A_P1),
        (scan(),),
        (pr(1, "a"), p(1, "b")),
        (win(),),
        (OK, OK, OK),
    ),
    Case(
        "LT05",
        SEED_PARTITIONS,
        P(A_P1, E_P3),
        (scan("part = 3"),),
        (C_P2, pr(3, "e")),
        (win(B_P1, read=True),),
        (OK, OK, OK),
    ),
    Case(
        "LT06",
        SEED_PARTITIONS,
        P(A_P1, D_P2),
        (scan("part IN (1)"),),
        (E_P3, F_P3),
        (win(C_P2, pr(2, "d"), read=True),),
        (OK, OK, OK),
    ),
    Case(
        "LT07",
        SEED_CA,
        P(A_P1, D_P2, E_P3),
        (scan("part = 1"),),
        (p(2, "c2"), p(3, "e2")),
        (win(B_P1, read=True),),
        (CA, CA, OK),
    ),
    Case(
        "LT08",
        SEED_CA,
        P(A_P1, D_P2),
        (scan(), scan("part = 1")),
        (E_P3, F_P3),
        (win(C_P2, pr(2, "d"), read=True),),
        (CA, CA, CDR),
    ),
    Case(
        "LT09",
        SEED_PARTITIONS,
        N(A_1_1),
        (scan("a = 1 AND b = 1"),),
        (C_2_1,),
        (win(B_1_2, read=True),),
        (OK, OK, OK),
    ),
    Case(
        "LT10",
        SEED_PARTITIONS,
        N(A_1_1),
        (scan("a = 1 AND b = 1"),),
        (nf(1, 2, "x"),),
        (win(B_1_2, read=True),),
        (OK, OK, OK),
    ),
    Case(
        "LT11",
        SEED_PARTITIONS,
        N(A_1_1, B_1_2),
        (scan("a = 1"),),
        (D_3_1,),
        (win(C_2_1, read=True),),
        (OK, OK, OK),
    ),
    Case(
        "LT12",
        SEED_CDR,
        N(A_1_1, B_1_2),
        (scan("a = 1"),),
        (D_3_1,),
        (win(nr(1, 1, "a"), read=True),),
        (CDR, CDR, CDR),
    ),
    Case("LT13", SEED_CA, N(A_1_1), (scan(),), (C_2_1,), (win(B_1_2, read=True),), (CA, CA, OK)),
    Case(
        "LT14",
        SEED_CA,
        N(A_1_1),
        (scan("a >= 1 OR b > 1"),),
        (D_3_1,),
        (win(B_1_2, read=True),),
        (CA, CA, OK),
    ),
    Case(
        "LT15",
        SEED_CDD,
        N(B_1_2),
        (scan("a = 2"),),
        (nr(1, 2, "b"),),
        (win(nr(1, 2, "b"), read=True),),
        (CDD, CDD, CDD),
    ),
    Case(
        "LT16",
        SEED_CDD + " (hint from our own remove when the winner's has no partitionValues)",
        N(B_1_2),
        (scan("a = 2"),),
        (nr(1, 2, "b"),),
        (win(nr(1, 2, "b", pv=False)),),
        (CDD, CDD, CDD),
        attrs={"partition_values": {"a": "1", "b": "2"}, "file": "a=1/b=2/b"},
    ),
    Case(
        "LT17",
        SEED_CDR,
        N(B_1_2),
        (scan(),),
        (A_1_1,),
        (win(nr(1, 2, "b", pv=False)),),
        (CDR, CDR, CDR),
    ),
    Case(
        "LT18",
        "C7 runs before C8",
        P(A_P1, C_P2),
        (scan(),),
        (p(2, "d"),),
        (win(pr(2, "c"), B_P1, read=True),),
        (CA, CA, CDR),
    ),
    Case(
        "LT19",
        SEED_CDR,
        P(A_P1, C_P2),
        (scan(),),
        (pr(1, "b"),),
        (win(pr(1, "a"), read=True),),
        (CDR, CDR, CDR),
    ),
    Case(
        "LT20",
        SEED_CA + " (replaceWhere on an empty range)",
        P(A_P1),
        (scan("part >= 2"),),
        (C_P2,),
        (win(E_P3, read=True),),
        (CA, CA, OK),
    ),
    Case(
        "LT21",
        SEED_PARTITIONS,
        P(A_P1),
        (scan("part > 3"),),
        (G_P4,),
        (win(C_P2, read=True),),
        (OK, OK, OK),
    ),
    Case(
        "LT22",
        SEED_CA,
        P(A_P1, G_P4),
        (scan("part >= 2"),),
        (pr(4, "g"), E_P3),
        (win(pr(1, "a"), C_P2, read=True),),
        (CA, CA, OK),
    ),
    Case(
        "LT23",
        SEED_CA,
        P(A_P1),
        (scan("part = 1"),),
        (E_P3,),
        (win(B_P1, read=True),),
        (CA, CA, OK),
    ),
    Case(
        "LT24",
        SEED_CDR,
        P(A_P1, B_P1),
        (scan("part = 1"),),
        (E_P3,),
        (win(pr(1, "a"), read=True),),
        (CDR, CDR, CDR),
    ),
    Case(
        "LT25",
        SEED_CDD,
        P(A_P1),
        (scan("part = 1"),),
        (pr(1, "a"), C_P1),
        (win(pr(1, "a"), B_P1, read=True),),
        (CDD, CDD, CDD),
        adjusted=D3 + " (Spark: CA, CA, CDR): two replaceWhere both rewrote part=1/a",
    ),
    Case(
        "LT26",
        SEED_CDD,
        P(A_P1, C_P2, E_P3),
        (scan("part = 3 OR part = 2"),),
        (pr(2, "c"), pr(3, "e"), D_P2),
        (win(pr(1, "a"), pr(3, "e"), B_P1, read=True),),
        (CDD, CDD, CDD),
        adjusted=D3 + " (Spark: CDR): both removed part=3/e",
    ),
    Case(
        "LT27",
        SEED_CA,
        P(A_P1, E_P3),
        (scan("part = 1"), scan()),
        (pr(1, "a"),),
        (win(C_P2, read=True),),
        (CA, CA, OK),
    ),
    Case(
        "LT28",
        SEED_CA + "; decision 4: a data predicate on a file without stats matches",
        P(A_P1, E_P3),
        (scan("part = 1 OR year > 2019"),),
        (pr(1, "a"),),
        (win(C_P2, read=True),),
        (CA, CA, OK),
    ),
    Case(
        "LT28-stats",
        "decision 4: appends are matched on partition values and min/max statistics",
        P(A_P1, E_P3),
        (scan("part = 1 OR year > 2019"),),
        (pr(1, "a"),),
        (win(p(2, "c", stats=value_stats(2000, 2010, column="year")), read=True),),
        (OK, OK, OK),
        adjusted="decision 4 (Spark: CA, CA): year <= 2010 in the added file's stats",
    ),
    Case(
        "LT29",
        SEED_CA,
        P(A_P1, E_P3),
        (scan("part = 1"), scan("part > 1 AND part < 3")),
        (pr(1, "a"),),
        (win(C_P2, read=True),),
        (CA, CA, OK),
    ),
    Case(
        "LT30",
        SEED_DOWNGRADE + "; seed 000: OPTIMIZE vs INSERT cannot conflict",
        P(A_P1, B_P1),
        (scan(),),
        (pr(1, "a", dc=False), pr(1, "b", dc=False), p(1, "c", dc=False)),
        (win(E_P3, read=True),),
        (OK, OK, OK),
    ),
    Case(
        "LT31",
        SEED_CDD,
        P(A_P1, B_P1),
        (scan(),),
        (pr(1, "a", dc=False), pr(1, "b", dc=False), p(1, "c", dc=False)),
        (win(pr(1, "a"), read=True),),
        (CDD, CDD, CDD),
        adjusted=D3 + " (Spark: CDR): the compaction also removed part=1/a",
    ),
    Case(
        "LT32",
        SEED_CDR + " (whole-table read)",
        P(A_P1),
        (whole(),),
        (B_P1,),
        (win(pr(1, "a")),),
        (CDR, CDR, CDR),
        attrs={"partition_values": None},
    ),
    Case("LT33", SEED_CT, P(), (app("t1"),), (), (win(txn("t2")),), (OK, OK, OK)),
    Case("LT34", SEED_CT, P(), (app("t1"),), (), (win(txn("t1")),), (CT, CT, CT)),
]
