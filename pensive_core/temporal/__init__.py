"""Temporal resolution: dates in text, statements and their supersession, and questions
about a time ("as of 2015", "now", "when did ...")."""

from .dates import DateMention, find_dates, parse_date
from .intent import TimeIntent, parse_intent
from .resolve import Resolution, TemporalKnobs, resolve, supported
from .statements import RuleStatementExtractor, Statement, StatementExtractor, slot_key
from .store import SCHEMA_VERSION, TemporalStore, TemporalTables, TemporalView

__all__ = [
    "SCHEMA_VERSION",
    "DateMention",
    "Resolution",
    "RuleStatementExtractor",
    "Statement",
    "StatementExtractor",
    "TemporalKnobs",
    "TemporalStore",
    "TemporalTables",
    "TemporalView",
    "TimeIntent",
    "find_dates",
    "parse_date",
    "parse_intent",
    "resolve",
    "slot_key",
    "supported",
]
