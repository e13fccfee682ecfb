-- Proposals: prompts handed out without a model call of kevo's own (the
-- ask/tell interface, `--llm external`) or sent through a provider's batch
-- endpoint (`--llm batch:...`). A proposal stays pending until its answer
-- is recorded as an iteration, in that iteration's transaction, so an
-- answer is stored once and a pending one survives a restart. `batch`
-- names the provider's batch job the proposal went out in (NULL: not
-- submitted, or ask/tell). `selection` is the strategy's selection the
-- prompt was built from (JSON). Keep in step with
-- ../postgres/0005_proposals.sql.
CREATE TABLE proposals (
    id           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT    NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    asked_after  INTEGER NOT NULL CHECK (asked_after >= 0),
    system       TEXT    NOT NULL,
    user_prompt  TEXT    NOT NULL,
    selection    TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('pending', 'answered', 'withdrawn')),
    batch        TEXT,
    iteration    INTEGER CHECK (iteration >= 1),
    reason       TEXT,
    asked_at     TEXT    NOT NULL,
    closed_at    TEXT
) STRICT;

CREATE INDEX proposals_run ON proposals (run_id, status);
