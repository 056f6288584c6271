"""What eidolons wrote into a database before the trace store was bound to its database
(schema version 3): cluster-wide NOLOGIN roles ``eidolons_gate`` / ``eidolons_orchestrator``
and an insert trigger that tests membership of the latter. Kept verbatim (the scripts of
``eidolons.trace.pg_schema`` at that version) so the upgrade is tested against what a
real older store holds, not against what the current code would make."""

from __future__ import annotations

from typing import Any

SCHEMA = "eidolons"
GATE_ROLE = "eidolons_gate"
ORCHESTRATOR_ROLE = "eidolons_orchestrator"

# roles are cluster-wide: created if missing (a concurrent init's duplicate is harmless)
ROLES = f"""
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{GATE_ROLE}') THEN
    CREATE ROLE {GATE_ROLE} NOLOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ORCHESTRATOR_ROLE}') THEN
    CREATE ROLE {ORCHESTRATOR_ROLE} NOLOGIN;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
GRANT {GATE_ROLE} TO {ORCHESTRATOR_ROLE};
"""

BOOTSTRAP = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
REVOKE CREATE ON SCHEMA {SCHEMA} FROM PUBLIC;
CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version (
  version integer PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now()
);
"""

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        f"""
CREATE TABLE {SCHEMA}.trace_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  thread text NOT NULL,
  seq bigint NOT NULL CHECK (seq >= 1),
  prev text NOT NULL CHECK (prev ~ '^[0-9a-f]{{64}}$'),
  line bytea NOT NULL,
  verdict_for bytea,
  written_by name NOT NULL DEFAULT current_user,
  written_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (thread, seq)
);
COMMENT ON COLUMN {SCHEMA}.trace_events.line IS
  'the event''s exact line bytes, without the newline: what the hash chain covers';
COMMENT ON COLUMN {SCHEMA}.trace_events.verdict_for IS
  'UTF-8 message_id when the line is an orchestrator verify_pass/verify_fail (index only)';

-- the receiver's lookup: latest orchestrator verdict for a message id in a thread
CREATE INDEX trace_events_verdict
  ON {SCHEMA}.trace_events (thread, verdict_for, seq DESC) WHERE verdict_for IS NOT NULL;

CREATE FUNCTION {SCHEMA}.trace_events_before_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  last_seq bigint;
  last_line bytea;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(NEW.thread, 0));
  SELECT e.seq, e.line INTO last_seq, last_line FROM {SCHEMA}.trace_events e
    WHERE e.thread = NEW.thread ORDER BY e.seq DESC LIMIT 1;
  IF NEW.seq <> coalesce(last_seq, 0) + 1
     OR NEW.prev <> coalesce(encode(sha256(last_line), 'hex'), repeat('0', 64)) THEN
    RAISE EXCEPTION 'eidolons: the hash chain of thread % does not continue at seq %',
      NEW.thread, NEW.seq USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.verdict_for IS NOT NULL
     AND NOT pg_has_role(current_user, '{ORCHESTRATOR_ROLE}', 'USAGE') THEN
    RAISE EXCEPTION 'eidolons: only {ORCHESTRATOR_ROLE} may record orchestrator verdicts'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  NEW.written_by := current_user;
  NEW.written_at := clock_timestamp();
  RETURN NEW;
END
$fn$;

CREATE FUNCTION {SCHEMA}.trace_events_refuse() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
  RAISE EXCEPTION 'eidolons: the trace is append-only (% refused)', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$fn$;

CREATE TRIGGER trace_events_insert BEFORE INSERT ON {SCHEMA}.trace_events
  FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.trace_events_before_insert();
CREATE TRIGGER trace_events_no_change BEFORE UPDATE OR DELETE ON {SCHEMA}.trace_events
  FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.trace_events_refuse();
CREATE TRIGGER trace_events_no_truncate BEFORE TRUNCATE ON {SCHEMA}.trace_events
  FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.trace_events_refuse();
CREATE TRIGGER schema_version_no_change BEFORE UPDATE OR DELETE ON {SCHEMA}.schema_version
  FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.trace_events_refuse();
CREATE TRIGGER schema_version_no_truncate BEFORE TRUNCATE ON {SCHEMA}.schema_version
  FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.trace_events_refuse();

REVOKE ALL ON {SCHEMA}.trace_events, {SCHEMA}.schema_version FROM PUBLIC;
GRANT USAGE ON SCHEMA {SCHEMA} TO {GATE_ROLE};
GRANT SELECT, INSERT ON {SCHEMA}.trace_events TO {GATE_ROLE};
GRANT SELECT ON {SCHEMA}.schema_version TO {GATE_ROLE};
REVOKE UPDATE, DELETE, TRUNCATE ON {SCHEMA}.trace_events FROM {GATE_ROLE};
""",
    ),
    (
        2,
        f"""
-- is this path a hand-off? (ADR 0007): the events naming a payload, by its key
ALTER TABLE {SCHEMA}.trace_events ADD COLUMN payload_key bytea;
COMMENT ON COLUMN {SCHEMA}.trace_events.payload_key IS
  'UTF-8 payload_path of an emit/verify_pass/verify_fail event (index only)';
CREATE INDEX trace_events_payload
  ON {SCHEMA}.trace_events (payload_key, thread, seq) WHERE payload_key IS NOT NULL;
""",
    ),
    (
        3,
        f"""
-- a line longer than readers accept (eidolons.trace.log.MAX_LINE_BYTES) is damage: refused
-- at the door, so a writer cannot make every reader fetch a gigabyte
ALTER TABLE {SCHEMA}.trace_events ADD CONSTRAINT trace_events_line_size
  CHECK (octet_length(line) BETWEEN 1 AND 1048576) NOT VALID;
""",
    ),
)


def init_v3(
    dsn: str, grant_gate: tuple[str, ...] = (), grant_orchestrator: tuple[str, ...] = ()
) -> None:
    """``eidolons trace store init`` as version 3 ran it (a fresh database)."""
    import psycopg
    from psycopg import sql

    conn: psycopg.Connection[Any] = psycopg.connect(dsn, autocommit=True)
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('eidolons-init', 0))")
            conn.execute(ROLES)
            conn.execute(BOOTSTRAP)
            for version, script in MIGRATIONS:
                conn.execute(script)
                conn.execute(
                    f"INSERT INTO {SCHEMA}.schema_version (version) VALUES (%s)", (version,)
                )
            for role_name, members in (
                (GATE_ROLE, grant_gate),
                (ORCHESTRATOR_ROLE, grant_orchestrator),
            ):
                for member in members:
                    conn.execute(
                        sql.SQL("GRANT {} TO {}").format(
                            sql.Identifier(role_name), sql.Identifier(member)
                        )
                    )
    finally:
        conn.close()
