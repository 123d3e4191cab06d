#!/usr/bin/python3
"""security.py - the relay worker never runs a user's code as a superuser
(issue 13, holes 3 and 4, with the real worker and a real SQLite replica).

The database's owner shadows the operators and functions the relay's SQL uses
in a schema of its own and makes it first in the database's search_path
(ALTER DATABASE ... SET search_path): run by a superuser, each makes the owner
one.  A table owner mirrors a catalog read through an active view and a
record whose trigger refuses a row until a fix: its code records as whom it
ran.  The worker, as the bootstrap superuser and then as a least-privileged
role (magic_sync.role, a member of sync_relay), relays, files the inbox
again, and calls none of the shadows; the owner's code runs as the owner.

Run by tests/e2e/run (inside pg_virtualenv)."""
import time

from harness import Replica, Server, check, finish

S1 = "5ec00000-0000-4000-8000-000000000001"
DB = "security"
PASSWORDS = {"sec_dbowner": "dbowner-pw", "sec_tabowner": "tabowner-pw", "sec_store1": "store1-pw",
             "sec_relay": "relay-pw"}

root = Server(DB)
root.exec("CREATE ROLE sec_dbowner LOGIN PASSWORD 'dbowner-pw'")
root.exec("CREATE ROLE sec_tabowner LOGIN PASSWORD 'tabowner-pw' IN ROLE sync_admin")
root.exec("CREATE ROLE sec_store1 LOGIN PASSWORD 'store1-pw'")
root.exec(f"ALTER DATABASE {DB} OWNER TO sec_dbowner")
root.exec("CREATE SCHEMA app AUTHORIZATION sec_tabowner")


def connect(role):
    return Server(DB, create=False, user=role, password=PASSWORDS[role])


# The database owner's trap: shadows of what the relay's SQL calls, each
# recording the call and, run by a superuser, making the owner one.
owner = connect("sec_dbowner")
owner.exec("""
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE TABLE evil.calls (fn text, who name, super boolean);
GRANT INSERT ON evil.calls TO PUBLIC;
CREATE FUNCTION evil.called(fn text) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
	super boolean := (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user);
BEGIN
	INSERT INTO evil.calls VALUES (fn, current_user, super);
	IF super THEN
		ALTER ROLE sec_dbowner SUPERUSER;
	END IF;
END $$;
""")
for ty in ("integer", "bigint", "text", "uuid", "bytea", "boolean", "jsonb", "name"):
    owner.exec(f"""
CREATE FUNCTION evil.eq(a {ty}, b {ty}) RETURNS boolean LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('= {ty}'); RETURN a OPERATOR(pg_catalog.=) b; END$$;
CREATE OPERATOR evil.= (LEFTARG = {ty}, RIGHTARG = {ty}, FUNCTION = evil.eq);
CREATE FUNCTION evil.gt(a {ty}, b {ty}) RETURNS boolean LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('> {ty}'); RETURN a OPERATOR(pg_catalog.>) b; END$$;
CREATE OPERATOR evil.> (LEFTARG = {ty}, RIGHTARG = {ty}, FUNCTION = evil.gt);
""")
owner.exec("""
CREATE FUNCTION evil.cat(a text, b text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('|| text'); RETURN a OPERATOR(pg_catalog.||) b; END$$;
CREATE OPERATOR evil.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.cat);
CREATE FUNCTION evil.octet_length(s text) RETURNS integer LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('octet_length'); RETURN pg_catalog.octet_length(s); END$$;
CREATE FUNCTION evil.lower(s text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('lower'); RETURN pg_catalog.lower(s); END$$;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('now'); RETURN pg_catalog.now(); END$$;
CREATE FUNCTION evil.format(f text, a text) RETURNS text LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('format'); RETURN pg_catalog.format(f, a); END$$;
CREATE FUNCTION evil.array_agg(a anynonarray) RETURNS anyarray LANGUAGE plpgsql AS
	$$BEGIN PERFORM evil.called('array_agg'); RETURN ARRAY[a]; END$$;
""")
# The table owner's tables and code: it says as whom it ran.
tab = connect("sec_tabowner")
tab.exec("""
CREATE TABLE app.ran (what text, who name, super boolean);
CREATE TABLE app.fail (stop boolean);
CREATE FUNCTION app.ran(what text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	INSERT INTO app.ran VALUES (what, current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user));
	IF what = 'trigger' AND EXISTS (SELECT FROM app.fail) THEN
		RAISE EXCEPTION 'not yet';
	END IF;
	RETURN true;
END $$;
CREATE TABLE app.items (id int PRIMARY KEY, name text NOT NULL);
CREATE VIEW app.items_active AS SELECT id FROM app.items WHERE app.ran('active view');
CREATE TABLE app.visits (store uuid, id int, note text NOT NULL, PRIMARY KEY (store, id));
CREATE FUNCTION app.visit_noted() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	PERFORM app.ran('trigger');
	RETURN NEW;
END $$;
CREATE TRIGGER visit_noted BEFORE INSERT ON app.visits FOR EACH ROW EXECUTE FUNCTION app.visit_noted();
INSERT INTO app.items VALUES (1, 'bolt'), (2, 'nut');
SELECT sync.mirror('app.items', 'catalog', 'broadcast', active => 'app.items_active');
SELECT sync.mirror('app.visits', 'record', origin => 'store');
""")
root.exec("SELECT sync.replica_add(%s, role => 'sec_store1')", (S1,))
tab.exec("TRUNCATE app.ran")
# the replica, through its own role
store = Replica(connect("sec_store1"), S1)
# the trap is set last: the sessions above keep the search_path they began with
owner.exec(f"ALTER DATABASE {DB} SET search_path = evil, public, pg_catalog")


def worker():
    rows = root.rows("SELECT pid, usename FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"
                     " AND datname = %s", (DB,))
    return rows[0] if rows else (None, None)


def wait_for(seconds, sql, args=None):
    end = time.time() + seconds
    while time.time() < end:
        if root.one(sql, args):
            return True
        root.exec("SELECT sync.wake()")
        time.sleep(0.2)
    return False


def held(table):
    return root.one("SELECT count(*) FROM sync.held h JOIN sync.tables t ON t.id = h.tab"
                    " WHERE t.name = %s AND h.replica = %s", (table, S1))


def ran():
    return sorted(set(tab.rows("SELECT what, who, super FROM app.ran")))


def calls():
    return owner.rows("SELECT fn, who, super FROM evil.calls ORDER BY 1, 2")


def supers():
    return root.rows("SELECT rolname, rolsuper FROM pg_roles WHERE rolname LIKE 'sec%' ORDER BY 1")


NOBODY_SUPER = [("sec_dbowner", False), ("sec_relay", False), ("sec_store1", False), ("sec_tabowner", False)]

def round_trip(name, role):
    """The worker relays a change, the replica takes it and files a visit the
    owner's trigger refuses until a fix; the worker files it again then."""
    n = held("app.items")
    tab.exec("INSERT INTO app.items VALUES (%s, %s)", (10 + n, name))
    check(f"{role}: the worker relays", wait_for(30, "SELECT count(*) > %s FROM sync.held h JOIN sync.tables t"
                                                 " ON t.id = h.tab WHERE t.name = 'app.items'", (n,)), True)
    store.pull_apply()
    check(f"{role}: the replica holds what was relayed", store.one('SELECT count(*) FROM "app.items"'), n + 1)
    tab.exec("INSERT INTO app.fail VALUES (true)")
    store.q('INSERT INTO "app.visits" VALUES (?, ?, ?)', (S1, n, name))
    filed = store.upload()
    check(f"{role}: the owner's trigger set the visit aside", filed["set_aside"], 1)
    tab.exec("DELETE FROM app.fail")
    root.exec("UPDATE sync.inbox SET last_at = now() - interval '1 day'")
    check(f"{role}: the worker files it again once fixed",
          wait_for(30, "SELECT NOT EXISTS (SELECT FROM sync.inbox)"), True)
    check(f"{role}: the visit is filed", tab.one("SELECT count(*) FROM app.visits WHERE id = %s", (n,)), 1)


# As the bootstrap superuser (magic_sync.role's default), in the owner's search_path.
root.exec("SELECT sync.relay_start()")
check("the worker starts", wait_for(20, "SELECT count(*) = 1 FROM pg_stat_activity"
                                        " WHERE backend_type = 'magic_sync relay'"), True)
check("it runs as the bootstrap superuser", worker()[1], root.one("SELECT rolname FROM pg_roles WHERE oid = 10"))
check("it provisions the replica", wait_for(30, "SELECT count(*) = 2 FROM sync.held"), True)
root.exec("CREATE ROLE sec_relay LOGIN PASSWORD 'relay-pw' IN ROLE sync_relay")
round_trip("washer", "superuser worker")
check("superuser worker: no shadow of the owner's was called", calls(), [])
check("superuser worker: nobody became a superuser", supers(), NOBODY_SUPER)
check("superuser worker: the owner's code ran as the owner, never as a superuser", ran(),
      [("active view", "sec_tabowner", False), ("trigger", "sec_tabowner", False)])
tab.exec("TRUNCATE app.ran")

# As a least-privileged role: a member of sync_relay, no superuser.
root.exec("ALTER SYSTEM SET magic_sync.role = 'sec_relay'")
root.exec("SELECT pg_reload_conf()")
pid = worker()[0]
root.exec("SELECT pg_terminate_backend(%s)", (pid,))
check("the worker comes back as magic_sync.role",
      wait_for(40, "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'magic_sync relay'"
                   " AND usename = 'sec_relay'"), True)
round_trip("spring", "sec_relay worker")
check("sec_relay worker: no shadow of the owner's was called", calls(), [])
check("sec_relay worker: nobody became a superuser", supers(), NOBODY_SUPER)
check("sec_relay worker: the owner's code ran as the owner", ran(),
      [("active view", "sec_tabowner", False), ("trigger", "sec_tabowner", False)])
check("sync.check is clean", root.rows("SELECT * FROM sync.check()"), [])
root.exec("ALTER SYSTEM RESET magic_sync.role")
root.exec("SELECT pg_reload_conf()")
finish()
