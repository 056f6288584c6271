"""The PostgreSQL trace schema and its migrations (ADR 0014), applied once each, in order,
by ``eidolons trace store init``. ``eidolons.writers`` names the logins bound to this
database; only an ``orchestrator`` may record orchestrator verdicts (migration 4 took
every privilege of the old cluster-wide roles, :data:`LEGACY_ROLES`).
"""

from __future__ import annotations

SCHEMA = "eidolons"
GATE = "gate"
ORCHESTRATOR = "orchestrator"
AUTHORITIES = (GATE, ORCHESTRATOR)  # an orchestrator is a gate too
BOUND_VERSION = 4  # the first version whose authority is the database's

# the cluster-wide roles of versions 1-3: every database of the cluster shared them
LEGACY_GATE_ROLE = "eidolons_gate"
LEGACY_ORCHESTRATOR_ROLE = "eidolons_orchestrator"
LEGACY_ROLES = (LEGACY_GATE_ROLE, LEGACY_ORCHESTRATOR_ROLE)

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
     AND NOT pg_has_role(current_user, '{LEGACY_ORCHESTRATOR_ROLE}', 'USAGE') THEN
    RAISE EXCEPTION 'eidolons: only % may record orchestrator verdicts',
      '{LEGACY_ORCHESTRATOR_ROLE}' USING ERRCODE = 'insufficient_privilege';
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
-- (versions 1-3 granted SELECT, INSERT to the cluster-wide eidolons_gate here; logins
-- are bound per database since version 4, see migration 4)
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
    (
        4,
        f"""
-- authority is this database's: the logins `trace store init` bound here, by name
CREATE TABLE {SCHEMA}.writers (
  login name PRIMARY KEY,
  authority text NOT NULL CHECK (authority IN ('{GATE}', '{ORCHESTRATOR}')),
  bound_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE {SCHEMA}.writers IS
  'the logins bound to this database''s trace; only an orchestrator records verdicts';
REVOKE ALL ON {SCHEMA}.writers FROM PUBLIC;

-- the one rule of who may stamp a row as an orchestrator verdict (the insert trigger
-- and `eidolons doctor` both ask it)
CREATE FUNCTION {SCHEMA}.may_record_verdicts(who name) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT EXISTS (SELECT 1 FROM {SCHEMA}.writers w
                 WHERE w.login = who AND w.authority = '{ORCHESTRATOR}')
$fn$;

CREATE OR REPLACE FUNCTION {SCHEMA}.trace_events_before_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  last_seq bigint;
  last_line bytea;
  bound_as text;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(NEW.thread, 0));
  SELECT e.seq, e.line INTO last_seq, last_line FROM {SCHEMA}.trace_events e
    WHERE e.thread = NEW.thread ORDER BY e.seq DESC LIMIT 1;
  IF NEW.seq <> coalesce(last_seq, 0) + 1
     OR NEW.prev <> coalesce(encode(sha256(last_line), 'hex'), repeat('0', 64)) THEN
    RAISE EXCEPTION 'eidolons: the hash chain of thread % does not continue at seq %',
      NEW.thread, NEW.seq USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF NEW.verdict_for IS NOT NULL AND NOT {SCHEMA}.may_record_verdicts(current_user) THEN
    SELECT w.authority INTO bound_as FROM {SCHEMA}.writers w WHERE w.login = current_user;
    RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege', MESSAGE = format(
      'eidolons: login %s may not record orchestrator verdicts in database %s: '
      'it is bound there as %s', current_user, current_database(),
      coalesce(bound_as, 'nothing'));
  END IF;
  NEW.written_by := current_user;
  NEW.written_at := clock_timestamp();
  RETURN NEW;
END
$fn$;

-- the cluster-wide roles of versions 1-3 keep no privilege here
DO $do$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['{LEGACY_GATE_ROLE}', '{LEGACY_ORCHESTRATOR_ROLE}'] LOOP
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
      EXECUTE format('REVOKE ALL ON SCHEMA {SCHEMA} FROM %I', r);
      EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA {SCHEMA} FROM %I', r);
    END IF;
  END LOOP;
END
$do$;
""",
    ),
)
# rows written before a migration that adds an index column get it from their line bytes,
# by the same Python rule as an append (the one UPDATE the schema ever makes, as owner)
BACKFILL = {2: "payload_key"}

CURRENT_VERSION = MIGRATIONS[-1][0]
