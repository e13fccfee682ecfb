-- Re-measurements: candidates timed again together, interleaved, in one
-- session, either to confirm a promotion (challenger first, then the
-- candidate it would replace) or at the end of a run to pick the winner
-- among the best few. `rounds` holds every round's scores and per-size
-- medians; evaluations and device_s are the spend, counted apart from the
-- candidates' own evaluations. Keep in step with
-- ../postgres/0004_remeasurements.sql.
CREATE TABLE remeasurements (
    id           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration    INTEGER NOT NULL CHECK (iteration >= 0),
    purpose      TEXT    NOT NULL CHECK (purpose IN ('promotion', 'final')),
    candidates   TEXT    NOT NULL,
    verdict      TEXT    NOT NULL,
    rounds       TEXT    NOT NULL,
    evaluations  INTEGER NOT NULL CHECK (evaluations >= 0),
    device_s     REAL    NOT NULL,
    wall_s       REAL    NOT NULL,
    created_at   TEXT    NOT NULL
) STRICT;

CREATE INDEX remeasurements_run ON remeasurements (run_id, iteration);
