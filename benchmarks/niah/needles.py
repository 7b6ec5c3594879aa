"""Needles of five kinds, their questions, and where they go in a haystack.

Every needle names invented people, places and organisations (built from syllables with a seeded
generator), so no haystack passage can answer for it. Questions are phrased the way a user would
ask: they name what the user knows (the organisation, the invoice number) but not the needle's
wording for the fact asked about.

Kinds:

- ``event``: a critical event, one sentence.
- ``identifier``: an invoice, ticket, order or case number and what it is about.
- ``drift``: three dated statements of one changing value; the latest is the answer, the two
  older ones sit at other depths.
- ``correction``: a statement and a later correction of it; the correction is the answer.
- ``multihop``: two facts joined by a bridge entity; the question needs both. Both are gold.

The templates were written once, before any run, and are not adjusted to what retrieves well.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

KINDS = ("event", "identifier", "drift", "correction", "multihop")
DEPTHS = tuple(range(0, 101, 10))

_ONSETS = [
    "b",
    "br",
    "c",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "kr",
    "l",
    "m",
    "n",
    "p",
    "qu",
    "r",
    "s",
    "st",
    "t",
    "tr",
    "v",
    "w",
    "z",
]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
_CODAS = ["", "n", "r", "l", "s", "th", "rn", "nd", "x", "m", "ck"]
_FIRST = [
    "Amara",
    "Bruno",
    "Celeste",
    "Dmitri",
    "Elif",
    "Farah",
    "Gideon",
    "Hana",
    "Ivo",
    "Jonas",
    "Keiko",
    "Lorcan",
    "Maren",
    "Nadia",
    "Oskar",
    "Priya",
    "Rafael",
    "Saskia",
    "Tobias",
    "Uma",
    "Viktor",
    "Wren",
    "Yusuf",
    "Zelda",
]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


@dataclass
class Needle:
    """One question and the sentences planted for it."""

    id: str
    kind: str
    depth: int  # percent: where the answer (gold) sentence goes
    question: str
    gold: list[str]  # sentences that must be retrieved (both, for multihop)
    support: list[str] = field(default_factory=list)  # planted too, at other depths; not gold
    support_depths: list[float] = field(default_factory=list)


class _Names:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int = 2) -> str:
        while True:
            w = "".join(
                self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + self.rng.choice(_CODAS)
                for _ in range(syllables)
            ).capitalize()
            if w not in self.used and len(w) >= 5:
                self.used.add(w)
                return w

    def person(self) -> str:
        return f"{self.rng.choice(_FIRST)} {self.word(3)}"

    def org(self) -> str:
        return self.word(2) + self.rng.choice(
            [" Logistics", " Foods", " Labs", " Textiles", " Robotics", " Maritime", " Press"]
        )

    def city(self) -> str:
        return self.word(2) + self.rng.choice(["", "burg", "ford", "vik", "mouth"])


def _date(rng: random.Random, year: int | None = None) -> tuple[str, int, int, int]:
    y = year or rng.randint(2016, 2023)
    m = rng.randint(1, 12)
    d = rng.randint(1, 28)
    return f"{d} {_MONTHS[m - 1]} {y}", y, m, d


def _event(n: _Names, rng: random.Random, t: int) -> tuple[str, list[str], list[str]]:
    org, city, city2, person = n.org(), n.city(), n.city(), n.person()
    date = _date(rng)[0]
    options = [
        (
            f"On {date} a fire broke out in the server room of the {org} offices in {city}, "
            "and the backup generator never started.",
            f"Did anything burn down at the {city} site of {org}?",
        ),
        (
            f"Customs officers at the port of {city} seized the entire {org} cargo of copper "
            f"cable on {date}.",
            f"What became of the copper that {org} was shipping through {city}?",
        ),
        (
            f"{person} walked out as chief engineer of {org} on {date}, saying the {city} "
            "reactor was no longer safe to run.",
            f"Why did the head engineer at {org} leave?",
        ),
        (
            f"A landslide on {date} buried the only road between {city} and {city2}, leaving "
            "forty families cut off for nine days.",
            f"How were people travelling between {city} and {city2} affected by the mudslide?",
        ),
    ]
    s, q = options[t % len(options)]
    return q, [s], []


def _identifier(n: _Names, rng: random.Random, t: int) -> tuple[str, list[str], list[str]]:
    org, person = n.org(), n.person()
    date = _date(rng)[0]
    inv = (
        f"INV-{rng.randint(1000, 9999)}-{rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ')}"
        f"{rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ')}"
    )
    tkt = f"#{rng.randint(100000, 999999)}"
    po = f"PO-{rng.randint(20000, 99999)}"
    case = f"{rng.randint(10, 99)}/{rng.randint(1000, 9999)}-{rng.choice('KMRT')}"
    options = [
        (
            f"Invoice {inv} for the {org} warehouse roof was paid in full by bank transfer on "
            f"{date}.",
            f"Has invoice {inv} been settled?",
        ),
        (
            f"Support ticket {tkt} says the {org} mobile app crashes every time {person} tries "
            "to upload a photo.",
            f"What is the problem reported in ticket {tkt}?",
        ),
        (
            f"Purchase order {po} covers 240 replacement water filters for the {org} plant.",
            f"What did we buy under {po}?",
        ),
        (
            f"Court case {case} concerns the unpaid wages of drivers employed by {org}.",
            f"What is case {case} about?",
        ),
    ]
    s, q = options[t % len(options)]
    return q, [s], []


def _drift(n: _Names, rng: random.Random, t: int) -> tuple[str, list[str], list[str]]:
    org, city, person = n.org(), n.city(), n.person()
    y1 = rng.randint(2012, 2016)
    y2, y3 = y1 + rng.randint(2, 3), y1 + rng.randint(5, 7)
    a, b, c = sorted(rng.sample(range(8, 90), 3))
    p1 = rng.randint(30, 40)
    p2, p3 = p1 + rng.randint(3, 6), p1 + rng.randint(9, 14)
    options = [
        (
            [
                f"In {y1} the {org} field office in {city} had {a} staff.",
                f"By {y2} the {city} field office of {org} had grown to {b} employees.",
                f"As of {y3}, {c} people work at the {org} office in {city}.",
            ],
            f"What is the current headcount of {org} in {city}?",
        ),
        (
            [
                f"In {y1} a monthly tram pass in {city} cost {p1} euros.",
                f"In {y2} the price of the monthly tram pass in {city} went up to {p2} euros.",
                f"Since {y3} the {city} monthly tram pass has cost {p3} euros.",
            ],
            f"How much do I pay now for a month of trams in {city}?",
        ),
        (
            [
                f"In {y1} {person} was head of sales at {org}.",
                f"In {y2} {person} became operations director of {org}.",
                f"Since {y3} {person} has been chief executive of {org}.",
            ],
            f"What job does {person} hold at {org} today?",
        ),
        (
            [
                f"In {y1} the {org} depot in {city} stored {a} thousand tonnes of grain.",
                f"By {y2} the {org} depot in {city} held {b} thousand tonnes of grain.",
                f"As of {y3} the grain held at the {city} depot of {org} stands at {c} thousand "
                "tonnes.",
            ],
            f"How much grain is in {org}'s {city} depot at present?",
        ),
    ]
    states, q = options[t % len(options)]
    return q, [states[2]], states[:2]


def _correction(n: _Names, rng: random.Random, t: int) -> tuple[str, list[str], list[str]]:
    org, product = n.org(), n.word(2)
    d1, d2 = rng.sample(range(5), 2)
    day = rng.randint(3, 26)
    month = _MONTHS[rng.randint(0, 11)]
    r1, r2 = rng.sample(range(2, 40), 2)
    batch = f"{rng.choice('ABCDEFGH')}{rng.randint(100, 999)}"
    dose1, dose2 = rng.sample([5, 10, 15, 20, 25, 40], 2)
    options = [
        (
            [f"The {org} board meeting is scheduled for {_DAYS[d1]} {day} {month} in room {r1}."],
            [
                f"Correction: the {org} board meeting will be held on {_DAYS[d2]} {day + 1} "
                f"{month} in room {r2}, not on {_DAYS[d1]}."
            ],
            f"When and where does the board of {org} meet?",
        ),
        (
            [f"The recall notice says {product} crackers from batch {batch} contain peanuts."],
            [
                f"Update to the earlier notice: {product} crackers from batch {batch} contain "
                "sesame, not peanuts."
            ],
            f"Which allergen is in the {product} crackers of batch {batch}?",
        ),
        (
            [f"The {org} handbook sets the daily dose of {product} syrup at {dose1} ml."],
            [
                f"Erratum: the {org} handbook misprinted the {product} syrup dose, which is "
                f"{dose2} ml a day."
            ],
            f"How many millilitres of {product} syrup should be taken each day?",
        ),
        (
            [f"The {org} summer party will take place at the {product} Hotel."],
            [
                f"Change of plan: the {org} summer party has moved from the {product} Hotel to "
                "the river boat."
            ],
            f"Where is the {org} summer party being held?",
        ),
    ]
    old, new, q = options[t % len(options)]
    return q, new, old


def _multihop(n: _Names, rng: random.Random, t: int) -> tuple[str, list[str], list[str]]:
    org, person, city, project, pet = n.org(), n.person(), n.city(), n.word(3), n.word(2)
    floor = rng.choice(["second", "third", "fourth", "fifth", "sixth", "seventh"])
    options = [
        (
            [
                f"The {project} project is led by {person}.",
                f"{person} has a laboratory on the {floor} floor of the {city} Tower.",
            ],
            f"On which floor does the leader of the {project} project work?",
        ),
        (
            [
                f"{person} keeps a grey parrot called {pet}.",
                f"{pet} the parrot was bought at the Sunday market in {city}.",
            ],
            f"Where did {person}'s bird come from?",
        ),
        (
            [
                f"{org} was founded by {person}.",
                f"{person} grew up in the fishing village of {city}.",
            ],
            f"In what village did the founder of {org} spend their childhood?",
        ),
        (
            [
                f"The {project} bridge was designed by the firm {org}.",
                f"{org} has its head office in {city}.",
            ],
            f"In which town are the designers of the {project} bridge based?",
        ),
    ]
    facts, q = options[t % len(options)]
    return q, facts, []


_MAKERS = {
    "event": _event,
    "identifier": _identifier,
    "drift": _drift,
    "correction": _correction,
    "multihop": _multihop,
}


def make_needles(per_cell: int = 2, seed: int = 7) -> list[Needle]:
    """``per_cell`` needles for each (kind, depth); templates taken in turn."""
    rng = random.Random(seed)
    names = _Names(rng)
    out: list[Needle] = []
    for kind in KINDS:
        t = 0
        for depth in DEPTHS:
            for r in range(per_cell):
                q, gold, support = _MAKERS[kind](names, rng, t)
                t += 1
                nd = Needle(f"{kind}-{depth:03d}-{r}", kind, depth, q, gold, support)
                nd.support_depths = [rng.uniform(0, 100) for _ in support]
                if kind == "multihop":
                    # the second fact sits elsewhere in the haystack
                    nd.support_depths = [rng.uniform(0, 100)]
                out.append(nd)
    return out


#: Needles sharing a depth sit this many percentage points apart, each in its own place: put
#: at one point, ten unrelated facts would share a passage, which no real corpus does and which
#: muddles both a passage's embedding and its names.
SLOT_STEP = 0.2


def placements(needles: list[Needle]) -> list[tuple[float, str]]:
    """Every sentence to plant, with its depth in percent. The needles of one depth go to
    points ``SLOT_STEP`` apart around it (after 0%, before 100%), in the order given."""
    out: list[tuple[float, str]] = []
    per_depth: dict[int, int] = {}
    for nd in needles:
        per_depth[nd.depth] = per_depth.get(nd.depth, 0) + 1
    seen: dict[int, int] = {}
    for nd in needles:
        j = seen.get(nd.depth, 0)
        seen[nd.depth] = j + 1
        if nd.depth <= 0:
            at = j * SLOT_STEP
        elif nd.depth >= 100:
            at = 100 - j * SLOT_STEP
        else:
            at = nd.depth + (j - (per_depth[nd.depth] - 1) / 2) * SLOT_STEP
        if nd.kind == "multihop":
            out.append((float(at), nd.gold[0]))
            out.append((nd.support_depths[0], nd.gold[1]))
            continue
        for s in nd.gold:
            out.append((float(at), s))
        for s, d in zip(nd.support, nd.support_depths):
            out.append((d, s))
    return out


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
