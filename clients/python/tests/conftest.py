"""The test database: the cluster the libpq environment names (PGHOST, PGPORT, PGUSER as a
superuser), cscp installed there, and application roles the clients connect as."""
import uuid

import psycopg
import pytest

APP_ROLE = "cscp_py_app"
BOUND_ROLE = "cscp_py_bound"
BOUND_TENANT = "py-bound"


@pytest.fixture(scope="session")
def admin():
    with psycopg.connect(autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS cscp")
        for role in (APP_ROLE, BOUND_ROLE):
            conn.execute(f"DO $$ BEGIN CREATE ROLE {role} LOGIN; "
                         "EXCEPTION WHEN duplicate_object THEN NULL; END $$")
        conn.execute("SELECT cscp.grant_app(%s)", (APP_ROLE,))
        conn.execute("SELECT cscp.grant_app(%s, %s)", (BOUND_ROLE, [BOUND_TENANT]))
        yield conn


@pytest.fixture
def tenant():
    return f"py-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def app_conninfo(admin):
    return f"user={APP_ROLE}"


@pytest.fixture
def bound_conninfo(admin):
    return f"user={BOUND_ROLE}"
