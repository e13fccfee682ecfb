-- The validation gate (`--validate`): a candidate the search was about to
-- keep, evaluated at the task's validation sizes (never shown to the
-- proposer); `passed` is whether it was kept, `reason` why not (or the
-- seed's baseline), `evaluation` the whole kevo_eval::Evaluation there.
-- Keep in step with ../postgres/0007_validations.sql.
CREATE TABLE validations (
    id            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    iteration     INTEGER NOT NULL CHECK (iteration >= 0),
    candidate_id  INTEGER NOT NULL REFERENCES candidates (id) ON DELETE CASCADE,
    passed        INTEGER NOT NULL CHECK (passed IN (0, 1)),
    reason        TEXT    NOT NULL,
    evaluation    TEXT    NOT NULL,
    device_s      REAL    NOT NULL,
    wall_s        REAL    NOT NULL,
    created_at    TEXT    NOT NULL
) STRICT;

CREATE INDEX validations_run ON validations (run_id, iteration);
