"""What the Postgres parts say about a DSN: whether it holds a password, and where it points
(for messages: never the user or the password)."""

import pytest

from pensive_core.storage.pg import describe, has_password


@pytest.mark.parametrize(
    "dsn, secret",
    [
        ("postgresql://app:s3cret@db.internal:5433/pensive", True),
        ("postgres://app:p%40ss@db/pensive", True),
        ("host=db password=s3cret dbname=pensive", True),
        ("host=db PASSWORD = s3cret", True),
        ("postgresql://app@db/pensive", False),
        ("postgresql://postgres:@/postgres?host=/tmp/pg", False),  # an empty password is none
        ("host=db dbname=pensive user=app", False),
    ],
)
def test_has_password(dsn, secret):
    assert has_password(dsn) is secret


def test_describe_names_host_port_and_database_only():
    assert (
        describe("postgresql://app:s3cret@db.internal:5433/pensive") == "db.internal:5433/pensive"
    )
    assert describe("host=db dbname=vecs user=app password=s3cret") == "db/vecs"
    assert "s3cret" not in describe("postgresql://app:s3cret@/x?host=/tmp/sock")
    assert describe("not a dsn = = =") == "a malformed DSN"
