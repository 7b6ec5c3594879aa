"""Fixed corpora and questions of the golden behaviour file (see :mod:`tests.golden.harness`).

Written once, before the engine was split into stages, and kept fixed: the golden file records
what the engine answered for exactly these inputs, so editing them means recording again on a
commit whose behaviour is trusted.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone

from pensive_core import Document

U = timezone.utc


def day(y: int, m: int = 1, d: int = 1) -> datetime:
    return datetime(y, m, d, tzinfo=U)


# People, firms, projects, roles that change, invoices, figures and corrections: enough for the
# graph (names shared across documents, two-hop facts), temporal resolution (supersession, as-of),
# the L3 escalation (identifiers L2 may miss), aggregation ("how many times") and filters.
_TEXTS: list[tuple[str, str, dict, datetime | None]] = [
    (
        "q3",
        "Acme revenue rose 12% to $4.1 billion in Q3 2024, driven by cloud sales.",
        {"topic": "finance", "year": 2024},
        day(2024, 10, 2),
    ),
    (
        "q4",
        "Acme revenue fell 3% to $3.9 billion in Q4 2024 as hardware demand slowed.",
        {"topic": "finance", "year": 2024},
        day(2025, 1, 20),
    ),
    (
        "inv",
        "Invoice INV-4471 for 3,200 euros was paid by Globex on 2 May 2024.",
        {"topic": "invoice", "status": "paid"},
        day(2024, 5, 2),
    ),
    (
        "inv2",
        "Invoice INV-4472 remains unpaid; Initech disputes the shipping charges.",
        {"topic": "invoice", "status": "open"},
        day(2024, 5, 9),
    ),
    (
        "ceo-2019",
        "The CEO of Vantor is Alice Moreau. She joined Vantor from Globex in 2019.",
        {"topic": "people"},
        day(2019, 3, 1),
    ),
    (
        "ceo-2022",
        "Bruno Silva is the new CEO of Vantor, replacing Alice Moreau.",
        {"topic": "people"},
        day(2022, 6, 15),
    ),
    (
        "quorbel",
        "The Quorbel project is led by Hana Kraind. Quorbel builds tide sensors for "
        "small harbours and reports to the Vantor board.",
        {"topic": "projects"},
        day(2023, 2, 1),
    ),
    (
        "kraind",
        "Hana Kraind was born in Tallinn and studied ocean engineering in Delft before "
        "she joined Vantor.",
        {"topic": "people"},
        day(2023, 2, 3),
    ),
    (
        "ferry",
        "The night ferry Amsel Star sails from Port Amsel at 22:40 every Monday, "
        "Wednesday and Friday. The day ferry leaves at 07:15.",
        {"topic": "schedule"},
        day(2024, 3, 1),
    ),
    (
        "ferry-update",
        "Update: the night ferry Amsel Star now sails from Port Amsel at 23:05 on "
        "Mondays only, because of harbour works.",
        {"topic": "schedule"},
        day(2024, 9, 1),
    ),
    ("staff-2014", "In 2014, the Kestrel lab had 14 staff.", {"topic": "org"}, day(2014, 6, 1)),
    ("staff-2020", "By 2020 the Kestrel lab had 54 staff.", {"topic": "org"}, day(2020, 6, 1)),
    (
        "price",
        "The price of the Falcon starter plan is 9 euros per month.",
        {"topic": "pricing"},
        day(2021, 1, 10),
    ),
    (
        "price-fix",
        "Correction: the price of the Falcon starter plan is 12 euros per month, not 9 euros.",
        {"topic": "pricing"},
        day(2021, 1, 12),
    ),
    ("diary-1", "Met Lena Ortiz for coffee at the harbour cafe.", {"n": 1}, day(2024, 1, 3)),
    (
        "diary-2",
        "Lunch with Lena Ortiz and Tom Becker near the market.",
        {"n": 2},
        day(2024, 1, 10),
    ),
    ("diary-3", "Called Lena Ortiz about the Quorbel sensors.", {"n": 3}, day(2024, 2, 1)),
    (
        "code",
        "The function getUserName reads the user_name column from the accounts table.",
        {"topic": "code"},
        None,
    ),
    (
        "bird",
        "The arctic tern migrates from pole to pole every year, the longest migration.",
        {"topic": "nature"},
        None,
    ),
    (
        "tea",
        "Green tea contains catechins, antioxidants studied for heart health.",
        {"topic": "nature"},
        day(2018, 4, 4),
    ),
    (
        "tern",
        "Arctic terns live up to thirty years and see two summers every year.",
        {"topic": "nature"},
        day(2018, 5, 5),
    ),
    (
        "incident",
        "On 3 March the night ferry Amsel Star lost power to the port engine for "
        "twelve minutes near the harbour mouth. The crew switched to the backup fuel filter and the "
        "voyage continued. Root cause: a clogged primary filter; filters are now changed every 250 "
        "engine hours instead of every 400.\n\nOn 19 April a passenger slipped on the wet car deck "
        "of the day ferry. Non-slip paint was applied to the whole deck the following week, and a "
        "warning sign was added at the stairwell.\n\nOn 2 May the departure boards at Port Amsel "
        "showed last week's night schedule because the tide sync had not run. Since then the sync "
        "failure raises a page to the on-call planner.",
        {"topic": "incident"},
        day(2024, 5, 20),
    ),
]

_WORDS = (
    "harbour tide sensor ferry cargo invoice engine filter deck crew schedule river bridge "
    "market cafe school garden museum library station tower bakery clinic orchard valley "
    "summit forest meadow canal island lantern compass ledger anchor beacon pilot signal "
    "quarter revenue budget audit contract supplier warehouse freight customs berth dock"
).split()


def long_document() -> Document:
    """One document of many passages: passage expansion and L3's matched-passage window."""
    rng = random.Random(5)
    paras = []
    for i in range(24):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(40, 70))]
        if i == 17:
            words[10:10] = "the vault code is ZK-7731 and only the harbour master holds it".split()
        paras.append(" ".join(words).capitalize() + ".")
    return Document(
        id="manual",
        text="\n\n".join(paras),
        metadata={"topic": "manual"},
        timestamp=day(2022, 8, 8),
    )


def filler(n: int, seed: int = 3) -> list[Document]:
    """Generated documents that give the candidate lists depth (and BM25 document frequency)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(12, 40))]
        out.append(
            Document(
                id=f"f{i:03d}",
                text=" ".join(words).capitalize() + ".",
                metadata={"topic": "filler", "n": i % 7},
                timestamp=day(2010 + i % 15, 1 + i % 12, 1 + i % 28),
            )
        )
    return out


def corpus() -> list[Document]:
    docs = [Document(id=i, text=t, metadata=m, timestamp=ts) for i, t, m, ts in _TEXTS]
    return [*docs, long_document(), *filler(120)]


# (text, k, as_of, filters, context): run in this order on every scenario, then once more
# (the second pass shows which answers L1 serves).
QUESTIONS: list[tuple[str, int, datetime | None, dict | None, list[str] | None]] = [
    ("What was Acme revenue in Q3 2024?", 5, None, None, None),
    ("What was Acme revenue in Q4 2024?", 5, None, None, None),
    ("Who is the CEO of Vantor?", 5, None, None, None),
    ("Who is the CEO of Vantor?", 5, day(2020, 1, 1), None, None),
    ("Who was the CEO of Vantor in 2020?", 5, None, None, None),
    ("Where was the leader of the Quorbel project born?", 5, None, None, None),
    ("When does the night ferry leave Port Amsel?", 3, None, None, None),
    ("How many staff does the Kestrel lab have?", 5, None, None, None),
    ("What does the Falcon starter plan cost?", 5, None, None, None),
    ("How many times did I meet Lena Ortiz?", 10, None, None, None),
    ("How many times is Lena Ortiz mentioned?", 10, None, None, None),
    ("customs declaration CD-99812", 5, None, None, None),
    ("Was invoice INV-4471 paid?", 5, None, None, None),
    ("Which invoice is unpaid?", 5, None, {"topic": "invoice"}, None),
    ("Which invoice is unpaid?", 5, None, {"status": {"$in": ["open", "paid"]}}, None),
    ("arctic tern migration", 4, None, {"topic": {"$ne": "filler"}}, None),
    ("what is the vault code ZK-7731", 5, None, None, None),
    ("getUserName accounts table", 5, None, None, None),
    ("heart health antioxidants", 5, day(2018, 12, 31), None, None),
    ("harbour tide sensor budget", 8, None, None, None),
    ("Who leads the sensors project?", 5, None, None, ["We talked about Hana Kraind today."]),
    ("engine filter hours", 5, None, {"n": {"$gte": 3}}, None),
    ("cargo freight customs warehouse", 20, None, None, None),
    ("Why did the departure boards show the wrong schedule?", 5, None, None, None),
]

# Kept in the archive only (not embedded, not in BM25): found by L3's exact-string search.
ARCHIVED = Document(
    id="cold",
    text="Archived customs declaration CD-99812: 40 crates of compasses held at berth 7 pending "
    "an audit.",
    metadata={"topic": "archive"},
    timestamp=day(2023, 11, 11),
)

# Scripted changes for the L1 invalidation record: each is applied, then every question is asked
# again and the tier of each answer shows whether its cached entry survived.
NEW_DOCS = [
    Document(
        id="ceo-2025",
        text="Clara Dahl is the new CEO of Vantor, replacing Bruno Silva.",
        metadata={"topic": "people"},
        timestamp=day(2025, 2, 1),
    ),
    Document(
        id="note",
        text="A note about lanterns and compasses in the museum library.",
        metadata={"topic": "filler", "n": 1},
        timestamp=day(2024, 7, 7),
    ),
]
REPLACED = Document(
    id="inv2",
    text="Invoice INV-4472 was paid by Initech on 30 June 2024 after the shipping dispute.",
    metadata={"topic": "invoice", "status": "paid"},
    timestamp=day(2024, 6, 30),
)
DELETED = "tern"
