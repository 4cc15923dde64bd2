"""conflict-spec 6.4 (delta-rs conflict_checker.rs) and the derived scenarios X01-X04."""

from __future__ import annotations

from deltatx.errors import ConcurrentAppendException as CA
from deltatx.errors import ConcurrentDeleteDeleteException as CDD
from deltatx.errors import ConcurrentDeleteReadException as CDR
from deltatx.errors import ConcurrentTransactionException as CT
from deltatx.errors import MetadataChangedException as MC
from deltatx.errors import ProtocolChangedException as PC
from deltatx.kernel.actions import AddCDCFile, AddFile
from deltatx.kernel.operations import OperationName

from .catalogue_suite import A_DEF, DEFAULT, X, xf
from .conflict_harness import (
    SEED_CA,
    SEED_CDD,
    SEED_CDR,
    SEED_CT,
    SEED_META,
    SEED_PARTITIONS,
    SEED_PC,
    Case,
    Table,
    add,
    bare,
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

# --- 6.4 delta-rs conflict_checker.rs (unpartitioned, stats on `value`) ----------------------

DR_SCHEMA = schema(id="string", value="integer", modified="string")


def sa(path: str, lo: int, hi: int, *, dc: bool = True) -> AddFile:
    return add(path, stats=value_stats(lo, hi), dc=dc)


def R(*files: AddFile) -> Table:
    return Table(DR_SCHEMA, (), files)


F1, F2 = sa("f1", 1, 10), sa("f2", 100, 10000)
D6 = "decision 6: compaction (dataChange=false) still conflicts with reads (delta-rs: no conflict)"
D4 = "decision 4: data predicates are evaluated on min/max stats (delta-spark: CA on unpartitioned)"

DELTA_RS = [
    Case(
        "DR01",
        "seed 000: INSERT vs INSERT cannot conflict",
        R(),
        (),
        (sa("a", 1, 10),),
        (bare(sa("b", 1, 10)),),
        (OK, OK, OK),
    ),
    Case(
        "DR02",
        SEED_PARTITIONS + " (stats)",
        R(F1, F2),
        (scan("value > 10"),),
        (),
        (bare(rm("f1")),),
        (OK, OK, OK),
    ),
    Case(
        "DR03",
        SEED_PARTITIONS + " (stats)",
        R(F2),
        (scan("value > 10"),),
        (),
        (bare(sa("n", 1, 10)),),
        (OK, OK, OK),
    ),
    Case("DR04", SEED_CDD, R(), (), (rm("f"),), (bare(rm("f")),), (CDD, CDD, CDD)),
    Case(
        "DR05",
        SEED_CA,
        R(),
        (scan("value <= 10"),),
        (sa("a", 1, 10),),
        (bare(sa("b", 1, 10)),),
        (CA, CA, OK),
    ),
    Case("DR06", SEED_CDR, R(F1), (scan("value <= 10"),), (), (bare(rm("f1")),), (CDR, CDR, CDR)),
    Case("DR07", SEED_META, R(), (), (), (bare(metadata(R())),), (MC, MC, MC)),
    Case("DR08", SEED_PC, R(), (), (protocol(),), (bare(protocol()),), (PC, PC, PC)),
    Case(
        "DR09",
        SEED_CA + " (whole table)",
        R(F1),
        (scan("value < 0"), whole()),
        (sa("a", 101, 1000),),
        (bare(sa("b", 11, 100)),),
        (CA, CA, OK),
    ),
    Case(
        "DR10",
        SEED_CDR + " (whole table)",
        R(F1),
        (whole(),),
        (sa("a", 11, 100),),
        (bare(rm("f1")),),
        (CDR, CDR, CDR),
    ),
    Case(
        "DR11",
        SEED_CDR,
        R(F1),
        (scan("value <= 10"),),
        (),
        (bare(rm("f1", dc=False)),),
        (CDR, CDR, CDR),
        adjusted=D6,
    ),
    Case("DR12", SEED_CDR, R(F1), (scan("value <= 10"),), (), (bare(rm("f1")),), (CDR, CDR, CDR)),
    Case(
        "DR13",
        SEED_CDR,
        R(F1),
        (whole(),),
        (sa("a", 11, 100),),
        (bare(rm("f1", dc=False)),),
        (CDR, CDR, CDR),
        adjusted=D6,
    ),
    Case(
        "DR14",
        SEED_CDR,
        R(F1, sa("f2", 11, 20)),
        (scan("value <= 20"),),
        (),
        (bare(rm("f1", dc=False), rm("f2", dc=False)),),
        (CDR, CDR, CDR),
        adjusted=D6,
    ),
    Case(
        "DR15",
        SEED_CDR,
        R(F1, sa("f2", 11, 20)),
        (scan("value <= 20"),),
        (),
        (bare(rm("f1", dc=False), rm("f2")),),
        (CDR, CDR, CDR),
    ),
    Case(
        "DR16",
        SEED_CDD,
        R(F1),
        (),
        (rm("f1", dc=False),),
        (bare(rm("f1", dc=False)),),
        (CDD, CDD, CDD),
    ),
    Case(
        "DR17",
        SEED_CA,
        R(F1),
        (scan("value <= 200"),),
        (sa("a", 5, 15),),
        (bare(sa("b", 100, 200)),),
        (CA, CA, OK),
    ),
    Case(
        "DR18",
        "decision 4",
        R(F1),
        (scan("value <= 50"),),
        (sa("a", 5, 15),),
        (bare(sa("b", 100, 200)),),
        (OK, OK, OK),
        adjusted=D4,
    ),
    Case(
        "DR19",
        SEED_CT + " (the winner wrote our own app id)",
        R(),
        (),
        (txn("streaming_query_1"), sa("a", 1, 2)),
        (bare(txn("streaming_query_1"), sa("b", 1, 2)),),
        (CT, CT, CT),
    ),
    Case(
        "DR20",
        SEED_CT,
        R(),
        (),
        (txn("q1"), sa("a", 1, 2)),
        (bare(txn("q2"), sa("b", 1, 2)),),
        (OK, OK, OK),
    ),
    Case(
        "DR21",
        SEED_CA + " (replaceWhere)",
        R(sa("one", 1, 1)),
        (scan("value >= 2"),),
        (sa("a", 2, 2),),
        (bare(sa("b", 3, 3)),),
        (CA, CA, OK),
    ),
    Case(
        "DR22",
        "decision 4",
        R(sa("one", 1, 1)),
        (scan("value > 1 AND value <= 3"),),
        (sa("a", 2, 2),),
        (bare(sa("b", 5, 5)),),
        (OK, OK, OK),
        adjusted=D4,
    ),
]


# --- extra derived scenarios ----------------------------------------------------------------

CREATE = Table(schema(id="long"))
EXTRA = [
    Case(
        "X01",
        SEED_PC + ": several writers create the table at the same path",
        CREATE,
        (),
        (protocol(), metadata(CREATE), add("mine")),
        (win(protocol(), metadata(CREATE), op="CREATE TABLE"),),
        (PC, PC, PC),
        op=OperationName.CREATE_TABLE,
        read_version=-1,
        first_winner_version=0,
        attrs={"winning_version": 0},
    ),
    Case(
        "X02",
        "decision 4: appends are matched against what was read; nothing read, nothing to match",
        Table(DEFAULT.schema, (), (A_DEF,)),
        (),
        (rm("a"),),
        (win(add("c"), read=True),),
        (OK, OK, OK),
        adjusted="decision 4 (Spark >= 3.1: CA on any unpartitioned append)",
    ),
    Case(
        "X03",
        "decision 5: a winner without isBlindAppend is not blind",
        X(xf("a", 1)),
        (scan("x = 1"),),
        (xf("b", 1),),
        (bare(xf("c", 1)),),
        (CA, CA, OK),
    ),
    Case(
        "X04",
        SEED_CDR + "; decision 6: compaction removes conflict with reads",
        X(xf("a", 1)),
        (scan("x = 1"),),
        (xf("b", 1),),
        (win(rm("a", {"x": "1"}, dc=False), op="OPTIMIZE", read=True),),
        (CDR, CDR, CDR),
        adjusted="decision 6 (delta-rs: no conflict for dataChange=false removes)",
    ),
    Case(
        "X04-rewrite",
        SEED_CDR + "; a compaction's dataChange=false output is not new data",
        X(xf("a", 1)),
        (scan("x = 1"),),
        (xf("b", 1),),
        (
            win(
                rm("a", {"x": "1"}, dc=False),
                add("a2", {"x": "1"}, dc=False),
                op="OPTIMIZE",
                read=True,
            ),
        ),
        (CDR, CDR, CDR),
        adjusted="deltatx skips winning adds with dataChange=false in the append check (Spark "
        "counts them, giving CA); the removed file the transaction read still conflicts",
    ),
    Case(
        "X05",
        SEED_CA + "; a change data file (cdc action) is not a file of the table's rows",
        X(xf("a", 1)),
        (scan("x = 1"),),
        (xf("b", 1),),
        (win(AddCDCFile("_change_data/x=1/c", {"x": "1"}, 10), read=True),),
        (OK, OK, OK),
    ),
    Case(
        "X05-update",
        SEED_PARTITIONS + "; the winner's change data files stay in its own partition",
        X(xf("a", 1), xf("z", 2)),
        (scan("x = 1"),),
        (rm("a", {"x": "1"}), xf("b", 1), AddCDCFile("_change_data/x=1/mine", {"x": "1"}, 10)),
        (
            win(
                rm("z", {"x": "2"}),
                xf("z2", 2),
                AddCDCFile("_change_data/x=2/theirs", {"x": "2"}, 10),
                op="UPDATE",
                read=True,
            ),
        ),
        (OK, OK, OK),
    ),
]
