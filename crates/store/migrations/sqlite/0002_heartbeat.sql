-- A running run's process writes heartbeat_at every few seconds, so a run
-- whose process died (kill -9, a crash, a lost machine) is told apart from
-- one still working. Keep in step with ../postgres/0002_heartbeat.sql.
ALTER TABLE runs ADD COLUMN heartbeat_at TEXT;
