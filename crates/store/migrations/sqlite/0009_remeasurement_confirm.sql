-- A run's final pick is confirmed against the seed on fresh rounds
-- (purpose 'confirm'). SQLite cannot change a CHECK constraint in place:
-- the table is rebuilt with the rows it holds. Keep in step with
-- ../postgres/0009_remeasurement_confirm.sql.
CREATE TABLE remeasurements_new (
    id           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration    INTEGER NOT NULL CHECK (iteration >= 0),
    purpose      TEXT    NOT NULL CHECK (purpose IN ('promotion', 'final', 'confirm')),
    candidates   TEXT    NOT NULL,
    verdict      TEXT    NOT NULL,
    rounds       TEXT    NOT NULL,
    evaluations  INTEGER NOT NULL CHECK (evaluations >= 0),
    device_s     REAL    NOT NULL,
    wall_s       REAL    NOT NULL,
    created_at   TEXT    NOT NULL
) STRICT;

INSERT INTO remeasurements_new
    (id, run_id, iteration, purpose, candidates, verdict, rounds, evaluations, device_s, wall_s, created_at)
SELECT id, run_id, iteration, purpose, candidates, verdict, rounds, evaluations, device_s, wall_s, created_at
FROM remeasurements;

DROP TABLE remeasurements;
ALTER TABLE remeasurements_new RENAME TO remeasurements;
CREATE INDEX remeasurements_run ON remeasurements (run_id, iteration);
