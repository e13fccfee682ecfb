-- Cross-device results (`kevo cross`): a run's winner and seed evaluated
-- together, in one session, on another device or backend than the run's;
-- `evaluation` is the whole kevo_eval::Evaluation, `score` its score when
-- correct. Keep in step with ../postgres/0006_cross.sql.
CREATE TABLE cross_evaluations (
    id            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    candidate_id  INTEGER NOT NULL REFERENCES candidates (id) ON DELETE CASCADE,
    role          TEXT    NOT NULL CHECK (role IN ('seed', 'winner')),
    session       TEXT    NOT NULL,
    backend       TEXT    NOT NULL,
    device        TEXT    NOT NULL,
    outcome_kind  TEXT    NOT NULL,
    score         REAL,
    evaluation    TEXT    NOT NULL,
    created_at    TEXT    NOT NULL
) STRICT;

CREATE INDEX cross_evaluations_run ON cross_evaluations (run_id, session);
